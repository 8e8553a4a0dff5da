/* Data shared by lockstall.bpf.c and lockstall.cpp. */
#ifndef MEMLAT_LOCKSTALL_H
#define MEMLAT_LOCKSTALL_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "memlat/hist.h"

#define LOCKSTALL_COMM_LEN 16
/* The holders one wait record names: a wait behind a convoy of more is marked
 * (holders_missing). */
#define LOCKSTALL_MAX_HOLDERS 8
/* The long holds each address space remembers (a ring; a power of two): the holds a wait
 * names are those released during it, found here when it ends. */
#define LOCKSTALL_RECENT_HOLDS 16

/* A hold of an mmap_lock long enough to be kept (min_hold_ns): who held it, how, from when to
 * when, and the kernel stack that released it (what it was doing). */
struct lockstall_hold {
    __u64 acquired_ns;
    __u64 released_ns;
    /* Of the hold, the time its thread spent in direct or memory-cgroup reclaim, and in
     * compaction: a holder that stalls on memory makes its waiters wait for that too. */
    __u64 reclaim_ns;
    __u64 compact_ns;
    __u32 pid;
    __u32 tid;
    __s32 stack_id;
    __u8 write;
    __u8 pad[3];
    char comm[LOCKSTALL_COMM_LEN];
};

/* What an address space keeps: its last long holds. `next` counts the holds ever kept. */
struct lockstall_mm_holds {
    __u64 next;
    struct lockstall_hold recent[LOCKSTALL_RECENT_HOLDS];
};

/* A wait for an mmap_lock of at least min_wait_ns, with the holds released while it waited. */
struct lockstall_wait {
    __u64 ts_ns;   /* bpf_ktime_get_ns() when it got the lock (or gave up) */
    __u64 wait_ns; /* from mmap_lock_start_locking to mmap_lock_acquire_returned */
    __u64 cgroup_id;
    __u64 mm;     /* the address space, for user space to group waits by */
    __u32 mm_pid; /* the process whose address space it is (mm->owner), 0 if unknown */
    __u32 pid;
    __u32 tid;
    __s32 stack_id; /* the waiter's kernel stack: what it waited for the lock to do */
    __u8 write;
    __u8 success; /* 0: a killable wait that gave up (a fatal signal) */
    __u8 nr_holders;
    __u8 holders_missing; /* the ring was overwritten during the wait, or a slot was being
                           * written: others may be missing */
    __u32 pad;
    char comm[LOCKSTALL_COMM_LEN];
    struct lockstall_hold holders[LOCKSTALL_MAX_HOLDERS];
};

/* Per process (the waiter's) and lock mode: the waits of at least min_wait_ns. */
struct lockstall_proc_key {
    __u32 pid;
    __u32 write;
};

struct lockstall_summary {
    __u64 waits;
    __u64 total_ns;
    __u64 max_ns;
    char comm[LOCKSTALL_COMM_LEN];
};

/* --prometheus: the waits of at least min_wait_ns by what the waiter did (its kernel stack)
 * and the hold it queued behind, its root (the earliest kept), and their time. */
enum lockstall_root_kind { LOCKSTALL_ROOT_NONE, LOCKSTALL_ROOT_OWN, LOCKSTALL_ROOT_OTHER };

struct lockstall_cause_key {
    __u64 cgroup_id; /* the waiter's, when counted by cgroup; else 0 */
    __s32 stack_id;
    __s32 root_stack_id;
    __u8 write;
    __u8 root_kind; /* enum lockstall_root_kind: the root's process the waiter's, or another */
    __u8 pad[6];
    char root_comm[LOCKSTALL_COMM_LEN];
};

struct lockstall_cause {
    __u64 waits;
    __u64 total_ns;
};

/* Every wait since load, by mode, whatever its length: counters and log2 histograms (us). */
struct lockstall_totals {
    __u64 waits;
    __u64 total_ns;
    __u64 slow_waits; /* those of at least min_wait_ns */
    __u64 slow_ns;
};

#endif
