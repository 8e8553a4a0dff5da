// SPDX-License-Identifier: GPL-2.0
/* The floor for bench/: a tp_btf program on tlb:tlb_flush that does nothing. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

SEC("tp_btf/tlb_flush")
int BPF_PROG(empty_tlb_flush, int reason, unsigned long pages)
{
	return 0;
}
