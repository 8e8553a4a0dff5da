/* Data shared by bpf/tlbflush.bpf.c and tools/tlbflush.cpp. */
#ifndef MEMLAT_TLBFLUSH_H
#define MEMLAT_TLBFLUSH_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "memlat/hist.h"

#define TLBFLUSH_MAX_CPUS 1024
#define TLBFLUSH_CPU_WORDS (TLBFLUSH_MAX_CPUS / 64)
/* enum tlb_flush_reason values at or above this are counted in the last slot. */
#define TLBFLUSH_MAX_REASONS 16
#define TLBFLUSH_COMM_LEN 16
/* Target CPU of a culprit when only the sending side is visible (no csd tracepoints). */
#define TLBFLUSH_ANY_CPU 0xffffffffu

/* Per CPU and reason. `full` counts flushes of the whole TLB (pages == TLB_FLUSH_ALL), which
 * carry no page count; `pages` sums the ranged ones. */
struct tlbflush_count {
	__u64 count;
	__u64 full;
	__u64 pages;
	__u64 pad; /* 32 bytes: an entry never straddles two cache lines */
};

struct tlbflush_proc_key {
	__u32 pid; /* thread-group id of the task current when the event happened */
	__u32 cpu;
	__u32 reason;
	__u32 pad;
};

struct tlbflush_proc_value {
	struct tlbflush_count c;
	char comm[TLBFLUSH_COMM_LEN];
};

struct tlbflush_culprit_key {
	__u32 pid;	    /* sender's thread-group id */
	__u32 tid;	    /* sender's thread id */
	__u32 cpu;	    /* target CPU, or TLBFLUSH_ANY_CPU */
	__s32 kernel_stack; /* stack map ids, < 0 when not collected */
	__s32 user_stack;
	__u32 pad;
};

struct tlbflush_culprit_value {
	__u64 count;
	char comm[TLBFLUSH_COMM_LEN];
};

struct tlbflush_event {
	__u64 ts_ns; /* bpf_ktime_get_ns() */
	__u64 pages;
	__u32 cpu;
	__u32 pid;
	__u32 tid;
	__s32 reason;
	char comm[TLBFLUSH_COMM_LEN];
};

#endif
