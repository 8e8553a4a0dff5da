/* Data shared by drsnoop.bpf.c and drsnoop.cpp. */
#ifndef MEMLAT_DRSNOOP_H
#define MEMLAT_DRSNOOP_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "memlat/hist.h"

#define DRSNOOP_COMM_LEN 16
#define DRSNOOP_MAX_NODES 64

/* The kinds of reclaim a task can stall in, each a begin/end tracepoint pair. */
enum drsnoop_kind {
    DRSNOOP_DIRECT = 0,    /* mm_vmscan_direct_reclaim_*: global direct reclaim */
    DRSNOOP_MEMCG = 1,     /* mm_vmscan_memcg_reclaim_*: a memory cgroup hit its limit */
    DRSNOOP_SOFTLIMIT = 2, /* mm_vmscan_memcg_softlimit_reclaim_* (cgroup v1) */
    DRSNOOP_NODE = 3,      /* mm_vmscan_node_reclaim_*: zone_reclaim_mode */
    DRSNOOP_KINDS = 4,
};

struct drsnoop_event {
    __u64 ts_ns; /* bpf_ktime_get_ns() at the end of the stall */
    __u64 lat_ns;
    __u64 nr_reclaimed;
    __u64 gfp;
    __s64 free_pages; /* free pages of all zones at reclaim start; -1 if unknown */
    __u64 cgroup_id;
    __u32 pid;
    __u32 tid;
    __u32 uid;
    __u32 kind;
    __s32 order;
    __s32 nid; /* node reclaim only; -1 otherwise */
    char comm[DRSNOOP_COMM_LEN];
};

struct drsnoop_proc_key {
    __u32 pid;
    __u32 kind;
};

/* Per process and kind, kept in the kernel so the exit summary is exact even when trace
 * events were dropped. */
struct drsnoop_summary {
    __u64 stalls;
    __u64 total_ns;
    __u64 max_ns;
    __u64 pages;
    char comm[DRSNOOP_COMM_LEN];
};

/* Per kind since load, whatever the options: counters that need no table, and the exact sum
 * of the stall times for --prometheus's histogram _sum. */
struct drsnoop_totals {
    __u64 stalls;
    __u64 total_ns;
    __u64 pages;
    __u64 pad;
};

/* --prometheus-labels cgroup: totals per cgroup (the task's, as the CGROUP column) and kind. */
struct drsnoop_cgroup_key {
    __u64 cgroup_id;
    __u32 kind;
    __u32 pad;
};

/* -H -P: a process's histogram of one kind, written under an epoch that user space flips each
 * interval (lib/loading/epoch_table.h): the table holds one interval's processes. */
struct drsnoop_hist_key {
    __u32 pid;
    __u32 kind;
    __u32 epoch;
};

struct drsnoop_proc_hist {
    __u64 slots[MEMLAT_HIST_SLOTS];
    char comm[DRSNOOP_COMM_LEN];
};

#endif
