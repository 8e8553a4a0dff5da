// SPDX-License-Identifier: GPL-2.0
/* oomwhy: every OOM kill with what led to it, from tracepoints only. oom:mark_victim runs in
 * the task that ran the OOM killer (the trigger): its record carries the victim (its task and
 * memory), the trigger, the trigger's reclaim up to the kill (mm_vmscan_direct_reclaim and
 * mm_vmscan_memcg_reclaim rounds, oom:reclaim_retry_zone, oom:compact_retry) and the usage and
 * limits of the trigger's memory cgroup and its ancestors at that moment. The victim's exit
 * (sched_process_exit) and the OOM reaper's steps follow as short records. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "cgroup.bpf.h"
#include "common.bpf.h"
#include "compat.bpf.h"
#include "kernel_args.bpf.h"
#include "oomwhy.h"

char LICENSE[] SEC("license") = "GPL";

/* Options, set by user space before load. */
const volatile bool memcg_on_v1 = false; /* the memory controller is mounted as cgroup v1 */
/* Records to user space (off in `memlat exporter`, which reads the counters only). */
const volatile bool emit_records = true;
/* The nodes with memory (node_states[N_MEMORY], of the first 64), from user space: a policy
 * or cpuset that allows fewer constrains an allocation. */
const volatile __u64 memory_nodes = 1;
/* Kilobytes in a page: mark_victim's fields are kilobytes, the records' pages. */
const volatile __u32 page_kb = 4;

/* Counters, read by user space through the mmap'ed .bss. */
__u64 kills = 0; /* mark_victim events seen */
/* Kills by constraint (enum oomwhy_constraint). */
__u64 kills_by_constraint[OOMWHY_CONSTRAINTS] = {};
__u64 dropped_events = 0; /* records the ring buffer had no room for */
__u64 dropped_kills = 0;  /* of which kill records: kills that will not be reported */
__u64 table_full = 0;     /* per-thread reclaim state that could not be kept */
__u64 victims_full = 0;   /* victims whose exit could not be watched */
/* Victims being watched (an upper bound: the LRU map may have dropped some): while 0, an
 * exiting thread skips the map lookup, which every thread exit would pay otherwise. */
__u64 victims_watched = 0;
__u64 unpaired_ends = 0; /* a reclaim round's end whose begin was not seen */

/* Per thread: its reclaim rounds, for the lead-up of a kill it triggers. */
struct task_reclaim {
    struct oomwhy_reclaim r;
    __u64 begin_ns;      /* of the open round; 0 when none is open */
    __u32 checked_round; /* r.rounds at the last retry check counted */
    __u32 pad;
};

MEMLAT_THREAD_STATE_MAPS(starts, struct task_reclaim);

static const volatile struct task_reclaim no_reclaim;

/* Victims whose exit is watched, by thread id: the kill's time. An LRU map: in an OOM storm
 * the oldest victims, long gone, make room. */
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, 1024);
    __type(key, __u32);
    __type(value, __u64);
} victims SEC(".maps");

/* The perf-buffer fall-back (kernels before 5.8) builds records in the largest one's space. */
MEMLAT_EVENT_MAPS(struct oomwhy_kill, 256 * 1024);

/* Without records (the exporter): memcg kills by the cgroup whose limit fired (its kernfs id;
 * 0 when no level has a limit), which user space names. Sized by user space; a kill whose
 * cgroup finds it full is counted in memcg_kills_unkeyed (kills_by_constraint has it). */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 1);
    __type(key, __u64);
    __type(value, __u64);
} memcg_kills SEC(".maps");
__u64 memcg_kills_unkeyed = 0;

static __always_inline struct task_reclaim *reclaim_state(bool create) {
    return thread_state(&starts, &starts_overflow, (const void *)&no_reclaim, create, &table_full);
}

/* Every record wakes user space at once: a kill is reported within a second, and kills are
 * rare (a storm of hundreds a second is still a few hundred wake-ups). */
static __always_inline void submit(void *ctx, void *record, __u64 size) {
    event_submit(ctx, &events, record, size, 1, &dropped_events);
}

/* ------------------------------------------------------------------ reclaim: the lead-up */

static __always_inline void on_reclaim_begin(__u32 kind, int order, __u64 gfp) {
    struct task_reclaim *t = reclaim_state(true);
    __u64 now = bpf_ktime_get_ns();

    if (!t)
        return;
    /* A new episode when the thread's last round ended long ago. */
    if (t->r.rounds == 0 ||
        (t->r.last_end_ns != 0 && now - t->r.last_end_ns > OOMWHY_EPISODE_GAP_NS)) {
        __builtin_memset(&t->r, 0, sizeof(t->r));
        t->r.first_ns = now;
    }
    t->r.kind = kind;
    t->r.order = order;
    t->r.gfp = gfp;
    t->begin_ns = now;
}

static __always_inline void on_reclaim_end(void *ctx, __u32 kind, __u64 reclaimed) {
    struct task_reclaim *t = reclaim_state(false);
    __u64 now = bpf_ktime_get_ns();

    if (!t || t->begin_ns == 0) {
        __sync_fetch_and_add(&unpaired_ends, 1);
        return;
    }
    t->r.rounds++;
    if (t->r.kind == OOMWHY_RECLAIM_MEMCG)
        t->r.memcg_rounds++;
    else
        t->r.direct_rounds++;
    t->r.total_ns += now - t->begin_ns;
    t->r.reclaimed += reclaimed;
    t->r.last_end_ns = now;
    t->begin_ns = 0;
}

/* The page allocator's retry decisions, in the allocating thread: they belong to the episode
 * of its direct reclaim. should_reclaim_retry() runs once after each reclaim round and traces
 * each zone it weighs: the first zone of a round counts the check. */
static __always_inline void on_retry_check(int no_progress_loops) {
    struct task_reclaim *t = reclaim_state(false);

    if (!t)
        return;
    if (t->r.retry_checks == 0 || t->checked_round != t->r.rounds) {
        t->r.retry_checks++;
        t->checked_round = t->r.rounds;
    }
    t->r.no_progress_loops = no_progress_loops;
}

static __always_inline void on_compact_retry(int retries) {
    struct task_reclaim *t = reclaim_state(false);

    if (t)
        t->r.compact_retries = retries;
}

/* Three ways into each reclaim begin and end (kernel_args.bpf.h). */
MEMLAT_RECLAIM_PROGRAMS(direct_reclaim, OOMWHY_RECLAIM_DIRECT, on_reclaim_begin, on_reclaim_end)
MEMLAT_RECLAIM_PROGRAMS(memcg_reclaim, OOMWHY_RECLAIM_MEMCG, on_reclaim_begin, on_reclaim_end)

/* Rare (only when reclaim fails to make progress): classic tracepoints, read by name. */
SEC("tracepoint/oom/reclaim_retry_zone")
int retry_zone_tp(struct trace_event_raw_reclaim_retry_zone *ctx) {
    on_retry_check(ctx->no_progress_loops);
    return KEEP_EVENT;
}

SEC("tracepoint/oom/compact_retry")
int compact_retry_tp(struct trace_event_raw_compact_retry *ctx) {
    on_compact_retry(ctx->retries);
    return KEEP_EVENT;
}

/* ------------------------------------------------------------------ the kill */

/* The memory cgroup of a css of the memory controller (css is struct mem_cgroup's first
 * member; the offset is relocated anyway). */
static __always_inline struct mem_cgroup *memcg_of(struct cgroup_subsys_state *css) {
    if (!css)
        return NULL;
    return (struct mem_cgroup *)((void *)css - bpf_core_field_offset(struct mem_cgroup, css));
}

static __always_inline struct cgroup_subsys_state *memory_css(struct task_struct *task) {
    int id = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);

    if (!task || id < 0 || id >= CGROUP_SUBSYS_COUNT)
        return NULL;
    return BPF_CORE_READ(task, cgroups, subsys[id]);
}

static __always_inline __u64 counter_usage(struct page_counter *c) {
    return (__u64)BPF_CORE_READ(c, usage.counter);
}

/* struct mem_cgroup's OOM lock: only with CONFIG_MEMCG_V1 on 6.12+ (the arm64 build's
 * vmlinux.h lacks it), always before. */
struct mem_cgroup___v1 {
    bool oom_lock;
} __attribute__((preserve_access_index));

/* Before 5.15 the policy's nodes were in a union with the preferred node. */
struct mempolicy___old {
    union {
        short preferred_node;
        nodemask_t nodes;
    } v;
} __attribute__((preserve_access_index));

/* MPOL_BIND in enum mempolicy_mode (include/uapi/linux/mempolicy.h), unchanged since 2.6. */
#define OOMWHY_MPOL_BIND 2

/* What limits `task`'s allocations to some nodes (enum oomwhy_node_constraint), as
 * constrained_alloc() would see it for an allocation under the task's own policy (a VMA's
 * mbind() policy is not seen here); the nodes allowed in *allowed. */
static __always_inline __u16 node_constraint(struct task_struct *task, __u64 *allowed) {
    struct mempolicy *policy = BPF_CORE_READ(task, mempolicy);
    __u64 nodes = 0;

    if (policy && BPF_CORE_READ(policy, mode) == OOMWHY_MPOL_BIND) {
        if (bpf_core_field_exists(policy->nodes))
            nodes = BPF_CORE_READ(policy, nodes.bits[0]);
        else
            nodes = BPF_CORE_READ((struct mempolicy___old *)policy, v.nodes.bits[0]);
        if ((nodes & memory_nodes) != memory_nodes) {
            *allowed = nodes & memory_nodes;
            return OOMWHY_NODES_MEMPOLICY;
        }
    }
    if (bpf_core_field_exists(task->mems_allowed)) {
        nodes = BPF_CORE_READ(task, mems_allowed.bits[0]);
        if ((nodes & memory_nodes) != memory_nodes) {
            *allowed = nodes & memory_nodes;
            return OOMWHY_NODES_CPUSET;
        }
    }
    return OOMWHY_NODES_ANY;
}

/* The kill's constraint: a memory cgroup's limit when the trigger reclaimed its cgroup last,
 * the page allocator's (limited to some nodes or not) when it ran direct reclaim last. */
static __always_inline __u32 kill_constraint(const struct task_reclaim *t, __u16 nodes) {
    if (!t || !t->r.rounds)
        return OOMWHY_CONSTRAINT_UNKNOWN;
    if (t->r.kind == OOMWHY_RECLAIM_MEMCG)
        return OOMWHY_CONSTRAINT_MEMCG;
    if (t->r.kind != OOMWHY_RECLAIM_DIRECT)
        return OOMWHY_CONSTRAINT_UNKNOWN;
    if (nodes == OOMWHY_NODES_MEMPOLICY)
        return OOMWHY_CONSTRAINT_MEMPOLICY;
    if (nodes == OOMWHY_NODES_CPUSET)
        return OOMWHY_CONSTRAINT_CPUSET;
    return OOMWHY_CONSTRAINT_GLOBAL;
}

/* The trigger's memory cgroup and its ancestors below the root, innermost first. */
static __always_inline void read_levels(struct oomwhy_kill *e, struct task_struct *task) {
    struct cgroup_subsys_state *css = memory_css(task);
    __u32 n = 0;

    e->cgroup_v1 = memcg_on_v1;
    for (int i = 0; i < OOMWHY_LEVELS; i++) {
        struct cgroup_subsys_state *parent;
        struct mem_cgroup *memcg;
        struct oomwhy_level *l;

        if (!css)
            break;
        parent = BPF_CORE_READ(css, parent);
        if (!parent)
            break; /* the root: no limit of its own */
        memcg = memcg_of(css);
        l = &e->level[i];
        l->cgroup_id = cgroup_id(BPF_CORE_READ(css, cgroup));
        l->usage = counter_usage(&memcg->memory);
        l->max = BPF_CORE_READ(memcg, memory.max);
        if (bpf_core_field_exists(memcg->memory.high))
            l->high = BPF_CORE_READ(memcg, memory.high);
        if (bpf_core_field_exists(((struct mem_cgroup___v1 *)memcg)->oom_lock))
            l->oom_lock = BPF_CORE_READ((struct mem_cgroup___v1 *)memcg, oom_lock);
        else
            l->oom_lock = OOMWHY_NO_OOM_LOCK;
        if (memcg_on_v1 && bpf_core_field_exists(memcg->memsw)) {
            l->memsw_usage = counter_usage(&memcg->memsw);
            l->memsw_max = BPF_CORE_READ(memcg, memsw.max);
        }
        n++;
        css = parent;
    }
    e->levels = n;
}

/* Before 6.2 the mm's counters were atomics (struct mm_rss_stat); since, per-CPU counters
 * whose `count` is what get_mm_counter() returns (percpu_counter_read_positive()). */
struct mm_rss_stat___old {
    atomic_long_t count[4];
} __attribute__((preserve_access_index));

struct mm_struct___old {
    struct mm_rss_stat___old rss_stat;
} __attribute__((preserve_access_index));

static __always_inline __u64 mm_counter(struct mm_struct *mm, int member) {
    long v;

    if (member < 0 || member >= 4)
        return 0;
    if (bpf_core_type_exists(struct mm_rss_stat___old)) {
        struct mm_struct___old *old = (void *)mm;

        v = BPF_CORE_READ(old, rss_stat.count[member].counter);
    } else {
        v = BPF_CORE_READ(mm, rss_stat[member].count);
    }
    return v > 0 ? v : 0;
}

/* The victim's task and memory, read as the kernel's own report reads them. */
static __always_inline void read_victim(struct oomwhy_kill *e, struct task_struct *victim) {
    struct mm_struct *mm = BPF_CORE_READ(victim, mm);

    e->victim_pid = BPF_CORE_READ(victim, pid);
    e->victim_tgid = BPF_CORE_READ(victim, tgid);
    BPF_CORE_READ_STR_INTO(&e->victim_comm, victim, comm);
    e->victim_uid = BPF_CORE_READ(victim, cred, uid.val);
    e->oom_score_adj = BPF_CORE_READ(victim, signal, oom_score_adj);
    e->victim_cgroup_id = cgroup_id(BPF_CORE_READ(memory_css(victim), cgroup));
    e->known = OOMWHY_KNOWN_TASK | OOMWHY_KNOWN_COMM;
    if (!mm)
        return;
    e->total_vm = BPF_CORE_READ(mm, total_vm);
    /* MM_FILEPAGES, MM_ANONPAGES, MM_SWAPENTS, MM_SHMEMPAGES: an anonymous enum (no BTF name
     * to relocate by), unchanged since Linux 4.5. */
    e->file_rss = mm_counter(mm, 0);
    e->anon_rss = mm_counter(mm, 1);
    e->swapents = mm_counter(mm, 2);
    e->shmem_rss = mm_counter(mm, 3);
    e->pgtables_kb = (__u64)BPF_CORE_READ(mm, pgtables_bytes.counter) >> 10;
    e->known |= OOMWHY_KNOWN_MEMORY;
}

/* A memcg kill without records: counted by the cgroup whose limit fired, found from the
 * trigger's levels as the reports find it (oomwhy.h), in the per-CPU scratch record. */
static __always_inline void count_memcg_kill(struct task_struct *me) {
    struct oomwhy_limit_hit hit;
    struct oomwhy_kill *e;
    __u64 one = 1, id = 0, *n;
    __u32 zero = 0;

    e = bpf_map_lookup_elem(&event_scratch, &zero);
    if (!e) {
        __sync_fetch_and_add(&memcg_kills_unkeyed, 1);
        return;
    }
    __builtin_memset(e, 0, sizeof(*e));
    read_levels(e, me);
    hit = oomwhy_limit_that_fired(e);
    if (hit.level >= 0 && hit.level < OOMWHY_LEVELS)
        id = e->level[hit.level].cgroup_id;
    n = bpf_map_lookup_elem(&memcg_kills, &id);
    if (n) {
        __sync_fetch_and_add(n, 1);
        return;
    }
    if (bpf_map_update_elem(&memcg_kills, &id, &one, BPF_NOEXIST) == 0)
        return;
    /* Another CPU made it meanwhile, or the map is full. */
    n = bpf_map_lookup_elem(&memcg_kills, &id);
    if (n)
        __sync_fetch_and_add(n, 1);
    else
        __sync_fetch_and_add(&memcg_kills_unkeyed, 1);
}

/* The record of a kill: the trigger (the current task) and its lead-up, its cgroups' limits;
 * `victim` (NULL for the classic tracepoint, whose fields the caller copies). */
static __always_inline struct oomwhy_kill *begin_kill(struct task_struct *victim) {
    struct task_struct *me = current_task();
    struct task_reclaim *t;
    struct oomwhy_kill *e;
    __u64 allowed = 0;
    __u32 constraint;
    __u16 nodes;
    __u64 pid_tgid = bpf_get_current_pid_tgid();

    __sync_fetch_and_add(&kills, 1);
    t = reclaim_state(false);
    nodes = node_constraint(me, &allowed);
    constraint = kill_constraint(t, nodes);
    __sync_fetch_and_add(&kills_by_constraint[constraint & (OOMWHY_CONSTRAINTS - 1)], 1);
    if (!emit_records) {
        if (constraint == OOMWHY_CONSTRAINT_MEMCG)
            count_memcg_kill(me);
        return NULL;
    }
    e = event_reserve(&events, &event_scratch, sizeof(*e), &dropped_events);
    if (!e) {
        __sync_fetch_and_add(&dropped_kills, 1);
        return NULL;
    }
    __builtin_memset(e, 0, sizeof(*e));
    e->type = OOMWHY_KILL;
    e->ts_ns = bpf_ktime_get_ns();
    e->trigger_pid = (__u32)pid_tgid;
    e->trigger_tgid = pid_tgid >> 32;
    bpf_get_current_comm(&e->trigger_comm, sizeof(e->trigger_comm));
    e->trigger_cgroup_id = cgroup_id(BPF_CORE_READ(memory_css(me), cgroup));
    if (t)
        e->reclaim = t->r;
    read_levels(e, me);
    e->node_constraint = nodes;
    e->allowed_nodes = allowed;
    if (victim)
        read_victim(e, victim);
    return e;
}

static __always_inline void watch_victim(__u32 pid, __u64 ts) {
    if (!pid)
        return;
    if (bpf_map_update_elem(&victims, &pid, &ts, BPF_ANY) != 0)
        __sync_fetch_and_add(&victims_full, 1);
    else
        __sync_fetch_and_add(&victims_watched, 1);
}

static __always_inline void end_kill(void *ctx, struct oomwhy_kill *e) {
    watch_victim(e->victim_pid, e->ts_ns);
    submit(ctx, e, sizeof(*e));
}

SEC("tp_btf/mark_victim")
int BPF_PROG(mark_victim_btf, struct task_struct *victim) {
    struct oomwhy_kill *e = begin_kill(victim);

    if (e)
        end_kill(ctx, e);
    return 0;
}

SEC("raw_tp/mark_victim")
int BPF_PROG(mark_victim_raw, struct task_struct *victim) {
    struct oomwhy_kill *e = begin_kill(victim);

    if (e)
        end_kill(ctx, e);
    return 0;
}

/* Kernels whose mark_victim passes only the pid: the tracepoint's fields (the comm and memory
 * where the kernel records them; the victim's cgroup and tgid stay unknown). */
SEC("tracepoint/oom/mark_victim")
int mark_victim_tp(struct trace_event_raw_mark_victim *ctx) {
    struct oomwhy_kill *e = begin_kill(NULL);

    if (!e)
        return KEEP_EVENT;
    e->victim_pid = ctx->pid;
    if (bpf_core_field_exists(ctx->__data_loc_comm)) {
        __u32 loc = ctx->__data_loc_comm;

        bpf_probe_read_kernel_str(&e->victim_comm, sizeof(e->victim_comm),
                                  (void *)ctx + (loc & 0xffff));
        e->known |= OOMWHY_KNOWN_COMM;
    }
    if (bpf_core_field_exists(ctx->anon_rss) && page_kb != 0) {
        /* The tracepoint records kilobytes (PG_COUNT_TO_KB), pgtables too. */
        e->total_vm = ctx->total_vm / page_kb;
        e->anon_rss = ctx->anon_rss / page_kb;
        e->file_rss = ctx->file_rss / page_kb;
        e->shmem_rss = ctx->shmem_rss / page_kb;
        e->victim_uid = ctx->uid;
        e->pgtables_kb = ctx->pgtables;
        e->oom_score_adj = ctx->oom_score_adj;
        e->known |= OOMWHY_KNOWN_MEMORY;
    }
    end_kill(ctx, e);
    return KEEP_EVENT;
}

/* ------------------------------------------------------------------ after the kill */

static __always_inline void note(void *ctx, __u32 type, __u32 step, __u32 pid) {
    struct oomwhy_note *n;

    if (!emit_records)
        return;
    n = event_reserve(&events, &event_scratch, sizeof(*n), &dropped_events);
    if (!n)
        return;
    n->type = type;
    n->step = step;
    n->ts_ns = bpf_ktime_get_ns();
    n->pid = pid;
    n->pad = 0;
    submit(ctx, n, sizeof(*n));
}

#define REAPER_STEP(name, step)                                                                    \
    SEC("tracepoint/oom/" #name)                                                                   \
    int name##_tp(struct trace_event_raw_wake_reaper *ctx) {                                       \
        note(ctx, OOMWHY_REAPER, step, ctx->pid);                                                  \
        return KEEP_EVENT;                                                                         \
    }

REAPER_STEP(wake_reaper, OOMWHY_REAPER_WAKE)
REAPER_STEP(start_task_reaping, OOMWHY_REAPER_START)
REAPER_STEP(finish_task_reaping, OOMWHY_REAPER_FINISH)
REAPER_STEP(skip_task_reaping, OOMWHY_REAPER_SKIP)

/* An exiting thread: its reclaim state goes, and a victim's exit is reported. */
static __always_inline void on_exit(void *ctx) {
    __u32 tid = (__u32)bpf_get_current_pid_tgid();

    thread_state_exit(&starts, &starts_overflow);
    if (*(volatile __u64 *)&victims_watched == 0)
        return;
    if (bpf_map_delete_elem(&victims, &tid) == 0) {
        __sync_fetch_and_add(&victims_watched, -1);
        note(ctx, OOMWHY_VICTIM_EXIT, 0, tid);
    }
}

SEC("raw_tp/sched_process_exit")
int thread_exit_raw(void *ctx) {
    on_exit(ctx);
    return 0;
}

SEC("tracepoint/sched/sched_process_exit")
int thread_exit_tp(void *ctx) {
    on_exit(ctx);
    return KEEP_EVENT;
}
