/* Data shared by oomwhy.bpf.c and oomwhy.cpp. */
#ifndef MEMLAT_OOMWHY_H
#define MEMLAT_OOMWHY_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define OOMWHY_COMM_LEN 16
/* Memory cgroups read from the triggering task's up to the root (the root itself excluded):
 * deeper hierarchies keep their 8 innermost levels. */
#define OOMWHY_LEVELS 8
/* Reclaim rounds of one thread closer than this belong to one episode (the lead-up of an
 * allocation or a charge that ends in the OOM killer): the kernel retries reclaim back to
 * back, MAX_RECLAIM_RETRIES (16) times without progress, before it gives up. */
#define OOMWHY_EPISODE_GAP_NS 1000000000ULL

/* What a record is. */
enum oomwhy_record_type {
    OOMWHY_KILL = 1,        /* oom:mark_victim: one OOM kill */
    OOMWHY_VICTIM_EXIT = 2, /* a victim's thread passed sched_process_exit */
    OOMWHY_REAPER = 3,      /* the OOM reaper woke for, reaped or skipped a victim */
};

/* The kind of reclaim a thread ran last: what the kernel did just before it chose a victim. */
enum oomwhy_reclaim_kind {
    OOMWHY_RECLAIM_NONE = 0,   /* none seen since the tool started */
    OOMWHY_RECLAIM_DIRECT = 1, /* mm_vmscan_direct_reclaim: the page allocator's (global) */
    OOMWHY_RECLAIM_MEMCG = 2,  /* mm_vmscan_memcg_reclaim: a memory cgroup's limit */
};

/* The OOM reaper's steps (oom:wake_reaper, start_task_reaping, finish_task_reaping,
 * skip_task_reaping). */
enum oomwhy_reaper_step {
    OOMWHY_REAPER_WAKE = 0,
    OOMWHY_REAPER_START = 1,
    OOMWHY_REAPER_FINISH = 2,
    OOMWHY_REAPER_SKIP = 3,
};

/* What limited the trigger's allocation to some NUMA nodes, as the kernel's
 * constrained_alloc() decides CONSTRAINT_MEMORY_POLICY and CONSTRAINT_CPUSET: a task memory
 * policy binding it to fewer than the nodes with memory, else a cpuset's mems_allowed that
 * lacks some of them. */
enum oomwhy_node_constraint {
    OOMWHY_NODES_ANY = 0,
    OOMWHY_NODES_CPUSET = 1,
    OOMWHY_NODES_MEMPOLICY = 2,
};

/* A kill's constraint as the BPF side counts it (the exporter's memlat_oom_kills_total):
 * from the trigger's last reclaim (memcg or direct) and, for direct, its node limits. */
enum oomwhy_constraint {
    OOMWHY_CONSTRAINT_UNKNOWN = 0, /* no reclaim before the kill (sysrq-f, a kernel thread) */
    OOMWHY_CONSTRAINT_GLOBAL = 1,
    OOMWHY_CONSTRAINT_MEMCG = 2,
    OOMWHY_CONSTRAINT_CPUSET = 3,
    OOMWHY_CONSTRAINT_MEMPOLICY = 4,
    OOMWHY_CONSTRAINTS = 8, /* the counters' size, a power of two */
};

/* What a kill record knows about its victim, by the hook that saw it. */
enum oomwhy_victim_known {
    OOMWHY_KNOWN_TASK = 1,   /* the victim's task: tgid, comm, cgroup, uid, oom_score_adj */
    OOMWHY_KNOWN_MEMORY = 2, /* its memory at the kill: total_vm, rss by kind, page tables */
    OOMWHY_KNOWN_COMM = 4,   /* its comm (from the tracepoint's fields) */
};

/* One memory cgroup above (or at) the triggering task's, in pages as the kernel counts them.
 * A limit the cgroup does not have is the kernel's PAGE_COUNTER_MAX. */
struct oomwhy_level {
    __u64 cgroup_id; /* kernfs id of the cgroup the memory controller's css belongs to */
    __u64 usage, max, high;
    __u64 memsw_usage, memsw_max; /* cgroup v1's memory+swap counter (0 when absent) */
    /* The memory controller's OOM lock (struct mem_cgroup's oom_lock): set on the OOM memcg
     * and its descendants while the OOM killer runs for it, on 5.10 to 6.11 and on cgroup
     * v1 (6.12+ takes it for cgroup v1 only); OOMWHY_NO_OOM_LOCK where the kernel has none. */
    __u32 oom_lock;
    __u32 pad;
};

#define OOMWHY_NO_OOM_LOCK 2

/* The triggering thread's reclaim up to the kill: the rounds of its last episode. */
struct oomwhy_reclaim {
    __u64 first_ns;    /* start of the episode's first round */
    __u64 last_end_ns; /* end of its last round (0: still in it) */
    __u64 total_ns;    /* time in the episode's rounds */
    __u64 reclaimed;   /* pages the rounds reclaimed */
    __u64 gfp;         /* gfp flags of the last round */
    __u32 rounds;
    __u32 kind; /* enum oomwhy_reclaim_kind of the last round */
    __s32 order;
    __u32 direct_rounds, memcg_rounds;
    /* oom:reclaim_retry_zone and oom:compact_retry in the episode (the page allocator's
     * decisions to retry; global OOMs only). */
    __u32 retry_checks;
    __s32 no_progress_loops; /* the last retry check's */
    __u32 compact_retries;   /* the last compact_retry's `retries` */
    __u32 pad;
};

struct oomwhy_kill {
    __u32 type;  /* OOMWHY_KILL */
    __u32 known; /* enum oomwhy_victim_known bits */
    __u64 ts_ns; /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
    /* The victim, as oom:mark_victim names it. */
    __u32 victim_pid, victim_tgid, victim_uid;
    __s16 oom_score_adj;
    __u16 node_constraint; /* enum oomwhy_node_constraint: the trigger's node limits */
    char victim_comm[OOMWHY_COMM_LEN];
    __u64 victim_cgroup_id;
    __u64 total_vm, anon_rss, file_rss, shmem_rss, swapents; /* pages */
    __u64 pgtables_kb;
    /* The task that ran the OOM killer (mark_victim runs in its context). */
    __u32 trigger_pid, trigger_tgid;
    char trigger_comm[OOMWHY_COMM_LEN];
    __u64 trigger_cgroup_id;
    struct oomwhy_reclaim reclaim;
    /* The nodes the trigger may allocate from when node_constraint is set: its memory
     * policy's (MPOL_BIND) or its cpuset's, of the first 64. */
    __u64 allowed_nodes;
    /* The triggering task's memory cgroup and its ancestors, innermost first. */
    __u32 levels, cgroup_v1;
    struct oomwhy_level level[OOMWHY_LEVELS];
};

struct oomwhy_note {
    __u32 type; /* OOMWHY_VICTIM_EXIT or OOMWHY_REAPER */
    __u32 step; /* enum oomwhy_reaper_step */
    __u64 ts_ns;
    __u32 pid, pad;
};

/* The fired limit's search (oomwhy_limit_that_fired()): a counter within this many pages of
 * its limit is at it. The OOM killer runs only for charges of at most 8 pages (order <=
 * PAGE_ALLOC_COSTLY_ORDER) that reclaim left no room for (oomwhy_format.h). */
#define OOMWHY_CHARGE_PAGES 8
/* A limit at or above this (2^48 pages, 1 EiB) is none: PAGE_COUNTER_MAX is LONG_MAX / PAGE_SIZE.
 */
#define OOMWHY_NO_LIMIT (1ULL << 48)
#define OOMWHY_NO_ROOM (~0ULL)

/* How the fired level was found. */
enum oomwhy_found_by {
    OOMWHY_FOUND_NONE = 0,     /* no level has a limit */
    OOMWHY_FOUND_OOM_LOCK = 1, /* the kernel's memcg OOM lock (the outermost level holding it) */
    OOMWHY_FOUND_USAGE = 2,    /* the innermost counter within a charge of its limit */
    OOMWHY_FOUND_NEAREST = 3,  /* none was: the counter with the least room */
};

struct oomwhy_limit_hit {
    __s32 level;    /* index into level[]; -1: none */
    __u32 memsw;    /* cgroup v1's memory+swap counter, else memory's */
    __u32 found_by; /* enum oomwhy_found_by */
};

/* Pages below a limit (0 at or over it); OOMWHY_NO_ROOM when there is no limit. */
static inline __u64 oomwhy_room(__u64 usage, __u64 max) {
    if (max >= OOMWHY_NO_LIMIT)
        return OOMWHY_NO_ROOM;
    return usage >= max ? 0 : max - usage;
}

/* The memory cgroup whose limit fired for a kill, from its levels: the outermost holding the
 * kernel's OOM lock (its counter: memory+swap on cgroup v1 if that one is at its limit), else
 * the innermost counter within OOMWHY_CHARGE_PAGES of its limit (memory+swap first), else the
 * one with the least room. Shared by the BPF side (the exporter's kills by cgroup) and the
 * reports. */
static inline struct oomwhy_limit_hit oomwhy_limit_that_fired(const struct oomwhy_kill *k) {
    struct oomwhy_limit_hit hit = {-1, 0, OOMWHY_FOUND_NONE};
    __u32 levels = k->levels < OOMWHY_LEVELS ? k->levels : OOMWHY_LEVELS;
    __u64 least = OOMWHY_NO_ROOM;
    __u32 i;

    for (i = 0; i < OOMWHY_LEVELS && i < levels; i++)
        if (k->level[i].oom_lock == 1)
            hit.level = (__s32)i;
    if (hit.level >= 0) {
        const struct oomwhy_level *l = &k->level[hit.level & (OOMWHY_LEVELS - 1)];
        __u64 memsw = oomwhy_room(l->memsw_usage, l->memsw_max);
        __u64 memory = oomwhy_room(l->usage, l->max);

        /* The level is the kernel's; its counter the one at its limit, memory+swap first
         * (try_charge_memcg charges it first). Memory freed before the kill can leave both
         * further than a charge from their limits: then the one with less room, memory+swap
         * on a tie (a CI run on 6.18: both 42 pages short of equal limits, and memory's failcnt
         * still 0: memory+swap had fired). */
        hit.memsw =
            k->cgroup_v1 && memsw != OOMWHY_NO_ROOM &&
            (memsw < OOMWHY_CHARGE_PAGES || (memory >= OOMWHY_CHARGE_PAGES && memsw <= memory));
        hit.found_by = OOMWHY_FOUND_OOM_LOCK;
        return hit;
    }
    if (k->cgroup_v1)
        for (i = 0; i < OOMWHY_LEVELS && i < levels; i++)
            if (oomwhy_room(k->level[i].memsw_usage, k->level[i].memsw_max) < OOMWHY_CHARGE_PAGES) {
                hit.level = (__s32)i;
                hit.memsw = 1;
                hit.found_by = OOMWHY_FOUND_USAGE;
                return hit;
            }
    for (i = 0; i < OOMWHY_LEVELS && i < levels; i++)
        if (oomwhy_room(k->level[i].usage, k->level[i].max) < OOMWHY_CHARGE_PAGES) {
            hit.level = (__s32)i;
            hit.found_by = OOMWHY_FOUND_USAGE;
            return hit;
        }
    for (i = 0; i < OOMWHY_LEVELS && i < levels; i++) {
        __u64 memsw = k->cgroup_v1 ? oomwhy_room(k->level[i].memsw_usage, k->level[i].memsw_max)
                                   : OOMWHY_NO_ROOM;
        __u64 memory = oomwhy_room(k->level[i].usage, k->level[i].max);

        if (memsw < least) {
            least = memsw;
            hit.level = (__s32)i;
            hit.memsw = 1;
            hit.found_by = OOMWHY_FOUND_NEAREST;
        }
        if (memory < least) {
            least = memory;
            hit.level = (__s32)i;
            hit.memsw = 0;
            hit.found_by = OOMWHY_FOUND_NEAREST;
        }
    }
    return hit;
}

#endif
