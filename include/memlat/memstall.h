/* Data shared by memstall.bpf.c and memstall.cpp. */
#ifndef MEMLAT_MEMSTALL_H
#define MEMLAT_MEMSTALL_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define MEMSTALL_COMM_LEN 16
/* Kernel frames looked at to tell an off-CPU memory stall's cause. */
#define MEMSTALL_STACK_DEPTH 24
/* Address ranges (functions) of each frame-classified cause. */
#define MEMSTALL_MAX_RANGES 16

/* Why a task is stalled on memory. The first four are begin/end tracepoint windows (wall time,
 * on and off the CPU); the rest are off-CPU intervals of a task with task_struct->in_memstall
 * set (PSI's flag), told apart by the kernel frames the task sleeps in. Without PSI: a swap-in
 * is an I/O sleep under its functions, thrashing an I/O sleep with task_struct->in_thrashing
 * set, memory.high a killable sleep under its functions, and OTHER is not seen. */
enum memstall_cause {
    MEMSTALL_DIRECT_RECLAIM = 0, /* mm_vmscan_direct_reclaim_begin/end */
    MEMSTALL_MEMCG_RECLAIM = 1,  /* mm_vmscan_memcg_reclaim_begin/end */
    MEMSTALL_COMPACTION = 2,     /* mm_compaction_begin/end of a user task (direct) */
    MEMSTALL_DIRTY = 3,          /* writeback:balance_dirty_pages pause until switched in */
    MEMSTALL_SWAPIN = 4,         /* in_memstall, asleep under the swap-in functions */
    MEMSTALL_MEMORY_HIGH = 5,    /* in_memstall, asleep under the memory.high throttle */
    MEMSTALL_THRASHING = 6,      /* in_memstall, asleep waiting for a refaulting folio */
    MEMSTALL_OTHER = 7,          /* in_memstall, anywhere else */
    MEMSTALL_CAUSES = 8,
};

/* Frames classified by name, where kallsyms hides the functions' addresses from the user: the
 * kernel names a return address ("%ps") and the name's hash is looked up among these. */
#define MEMSTALL_NAME_LEN 64
/* FNV-1a, 64 bits, over a name up to its NUL or the first '.' (a compiler's suffix,
 * ".constprop.0", ".isra.0": the function is the same). */
#define MEMSTALL_NAME_HASH_START 0xcbf29ce484222325ULL
#define MEMSTALL_NAME_HASH_PRIME 0x100000001b3ULL

struct memstall_named_cause {
    __u64 name_hash;
    __u32 cause;
    __u32 pad;
};

/* A kernel function's text, [start, end), and the cause a sleep under it is charged to. */
struct memstall_range {
    __u64 start;
    __u64 end;
    __u32 cause;
    __u32 pad;
};

/* Stall time of one thread and cause since load, counted in the kernel. */
struct memstall_key {
    __u32 tid;
    __u32 cause;
};

struct memstall_value {
    __u64 stalls;   /* windows or off-CPU intervals ended */
    __u64 total_ns; /* their wall time */
    __u64 max_ns;
    /* Pages the stalls freed: the nr_reclaimed of direct and memory-cgroup reclaim windows
     * (0 for the other causes). */
    __u64 reclaimed_pages;
    __u64 cgroup_id; /* the thread's memory cgroup when the entry was made */
    __u32 pid;       /* its process */
    __u32 pad;
    char comm[MEMSTALL_COMM_LEN];
};

/* Per cause since load, whatever the options (--prometheus's counters). */
struct memstall_totals {
    __u64 stalls;
    __u64 total_ns;
};

/* --stacks: stall time per process, cause and pair of stacks (ids in the stack-trace map;
 * negative: none could be taken). */
struct memstall_stack_key {
    __u32 pid;
    __u32 cause;
    __s32 kernel_stack;
    __s32 user_stack;
};

struct memstall_stack_value {
    __u64 stalls;
    __u64 total_ns;
    __u64 cgroup_id; /* the process's memory cgroup when the entry was made */
    char comm[MEMSTALL_COMM_LEN];
};

#endif
