// SPDX-License-Identifier: GPL-2.0
/* Kernel functions' addresses and sizes by name, looked up in the kernel: a syscall program
 * that user space runs once (BPF_PROG_RUN, lib/loading/kernel_functions.cpp) instead of
 * reading /proc/kallsyms, whose 120k lines the kernel formats in tens of milliseconds.
 * bpf_kallsyms_lookup_name() (5.16) gives the address, and "%pS" (the kernel's own
 * "name+offset/size") the size; "%pS" also describes the frames of the stack views. The
 * first bytes of each function found are read too: what a short function calls
 * (lib/loading/flush_path.cpp: the remote TLB flush the kernel installed at boot). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "kernel_function_query.h"

char LICENSE[] SEC("license") = "GPL";

struct kernel_function_query queries[KERNEL_FUNCTIONS_MAX] = {};
__u32 query_count = 0;

SEC("syscall")
int find_functions(void *ctx) {
    for (__u32 i = 0; i < KERNEL_FUNCTIONS_MAX; i++) {
        struct kernel_function_query *q = &queries[i];
        __u64 address = 0;

        if (i >= query_count)
            break;
        /* A query names a function, or gives an address to describe. The name's last byte
         * is its padding's NUL, which the helper requires. */
        if (q->name[0]) {
            q->err = bpf_kallsyms_lookup_name(q->name, sizeof(q->name), 0, &address);
            q->address = address;
        }
        if (q->err == 0 && q->address) {
            __u64 args[1] = {q->address};

            bpf_snprintf(q->described, sizeof(q->described), "%pS", args, sizeof(args));
            /* Only for a function looked up by name: the stack views' frames need none. */
            if (q->name[0] && bpf_probe_read_kernel(q->code, sizeof(q->code), (void *)q->address))
                __builtin_memset(q->code, 0, sizeof(q->code));
        }
    }
    return 0;
}
