/* Data shared by tlbflush.bpf.c and tlbflush.cpp. */
#ifndef MEMLAT_TLBFLUSH_H
#define MEMLAT_TLBFLUSH_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "memlat/hist.h"
#include "memlat/stack.h"

#define TLBFLUSH_MAX_CPUS 1024
#define TLBFLUSH_CPU_WORDS (TLBFLUSH_MAX_CPUS / 64)
/* enum tlb_flush_reason values at or above this are counted in the last slot. */
#define TLBFLUSH_MAX_REASONS 16
#define TLBFLUSH_COMM_LEN 16
/* Target CPU of a culprit whose remote flush requests name no CPU the tool could read. */
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
    /* Text and JSON -P read the table one interval at a time (lib/loading/epoch_table.h):
     * the BPF side writes under the epoch user space sets; --prometheus keeps 0. */
    __u32 epoch;
};

struct tlbflush_proc_value {
    struct tlbflush_count c;
    char comm[TLBFLUSH_COMM_LEN];
};

struct tlbflush_culprit_key {
    __u32 pid;          /* sender's thread-group id */
    __u32 tid;          /* sender's thread id */
    __u32 cpu;          /* target CPU, or TLBFLUSH_ANY_CPU for requests whose targets are unknown */
    __s32 kernel_stack; /* stack map ids, < 0 when not collected */
    __s32 user_stack;
    __u32 pad;
};

struct tlbflush_culprit_value {
    __u64 count;    /* flush IPIs queued for the target (csd_queue_cpu, Linux 6.3+) */
    __u64 requests; /* remote flush requests that named the target (see flush_requests) */
    char comm[TLBFLUSH_COMM_LEN];
};

/* Where the CPU mask of a remote flush request was read (tlbflush.bpf.c,
 * read_flush_targets()): the flushed mm's mm_cpumask, reclaim's batch, or nowhere. */
enum tlbflush_target_source {
    TLBFLUSH_TARGETS_MM = 0,
    TLBFLUSH_TARGETS_BATCH = 1,
    TLBFLUSH_TARGETS_UNKNOWN = 2,
    TLBFLUSH_TARGET_SOURCES = 3,
};

/* -L, per victim CPU. A handler run is one call-function IPI handled (irq_vectors entry to
 * exit) in which at least one TLB flush ran. */
struct tlbflush_ipi_counts {
    __u64 handler_runs; /* handler runs with a TLB flush: the handler histogram's samples */
    __u64 shared_runs;  /* of those, runs with more than one TLB flush (counted once) */
    __u64 callbacks;    /* flush_tlb_func callbacks timed inside handler runs (csd only) */
    __u64 without_ipi;  /* TLB flush callbacks (or remote flushes) outside any handler run */
};

/* What a CPU is handling now (BPF side only): written only by that CPU, and a call-function
 * IPI handler runs with interrupts off, so one run never interleaves with another on the same
 * CPU. A cache line each, so that CPUs do not share one. */
struct tlbflush_ipi_state {
    __u64 handler_since;  /* bpf_ktime_get_ns() at the handler's entry; 0 outside one */
    __u64 callback_since; /* at flush_tlb_func's entry; 0 outside it */
    __u32 tlb_flushes;    /* TLB flushes in the current handler run */
    __u32 pad;
    __u64 pad2[5];
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
