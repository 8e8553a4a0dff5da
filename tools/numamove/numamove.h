/* Data shared by numamove.bpf.c and numamove.cpp. */
#ifndef MEMLAT_NUMAMOVE_H
#define MEMLAT_NUMAMOVE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "memlat/hist.h"

/* enum migrate_reason values at or above this are counted in the last slot. */
#define NUMAMOVE_MAX_REASONS 16
#define NUMAMOVE_COMM_LEN 16
/* migrate_pages() calls one thread can have open at once (nested through an allocation). */
#define NUMAMOVE_MAX_DEPTH 4
/* Nesting counted beyond that (each level untimed) before the count saturates. */
#define NUMAMOVE_DEPTH_LIMIT 64
/* Where an argument of mm_migrate_pages is absent on the running kernel (tp_btf/raw_tp). */
#define NUMAMOVE_NO_ARG 0xffu

/* One migrate_pages() call ends in one mm_migrate_pages event; these sum them per reason.
 * Page counts are base pages, as the kernel counts them (a 2 MiB THP is 512). */
struct numamove_count {
    __u64 calls;         /* mm_migrate_pages events */
    __u64 succeeded;     /* pages migrated: the pgmigrate_success increment */
    __u64 failed;        /* pages that failed: the pgmigrate_fail increment */
    __u64 thp_succeeded; /* THPs migrated whole */
    __u64 thp_failed;
    __u64 thp_split;   /* THPs split to migrate their pages */
    __u64 large_split; /* large folios split (kernels with nr_split; else 0) */
    __u64 paired;      /* calls whose mm_migrate_pages_start was seen: timed */
    __u64 total_ns;    /* summed time of the paired calls */
    __u64 pad[7];      /* 128 bytes */
};

/* Calls of migrate_misplaced_folio (or _page), timed entry to return: the per-call view. */
struct numamove_call_count {
    __u64 calls;
    __u64 total_ns;
};

struct numamove_proc_key {
    __u32 pid; /* thread-group id of the task that ran migrate_pages() */
    __u32 reason;
    /* -P's interval (table_epoch): user space reads and deletes one epoch's entries while the
     * programs write the other's, so that an interval's rows and its totals (counts[epoch])
     * hold the same migrations. */
    __u32 epoch;
};

struct numamove_proc_value {
    struct numamove_count c;
    char comm[NUMAMOVE_COMM_LEN];
};

/* sched:sched_move_numa, sched_swap_numa, sched_stick_numa (task moves by NUMA balancing). */
enum numamove_task_move {
    NUMAMOVE_MOVE = 0,
    NUMAMOVE_SWAP = 1,
    NUMAMOVE_STICK = 2,
    NUMAMOVE_TASK_MOVES = 3,
};

#endif
