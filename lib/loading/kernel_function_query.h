/* Data shared by lib/loading/kernel_functions.bpf.c and lib/loading/kernel_functions.cpp: kernel
 * functions looked up by name in the kernel, for the tools that need a few addresses. */
#ifndef MEMLAT_KERNEL_FUNCTION_QUERY_H
#define MEMLAT_KERNEL_FUNCTION_QUERY_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define KERNEL_FUNCTIONS_MAX 16
#define KERNEL_FUNCTION_NAME_LEN 64
#define KERNEL_FUNCTION_DESCRIBED_LEN 128
#define KERNEL_FUNCTION_CODE_LEN 32

struct kernel_function_query {
    char name[KERNEL_FUNCTION_NAME_LEN]; /* in: NUL-padded, or empty with an address */
    __u64 address;                       /* out for a name: 0 when not found; or in */
    __s64 err;                           /* out: bpf_kallsyms_lookup_name()'s result */
    /* out: "%pS" of the address, "name+0x0/0xSIZE": where the function ends */
    char described[KERNEL_FUNCTION_DESCRIBED_LEN];
    /* out: the first bytes of the function's code (0 when unreadable), for what a short
     * function calls: the paravirtual target a call site was patched to at boot */
    __u8 code[KERNEL_FUNCTION_CODE_LEN];
};

#endif
