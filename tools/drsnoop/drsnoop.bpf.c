// SPDX-License-Identifier: GPL-2.0
/* drsnoop: stalls in direct, memory-cgroup, soft-limit and node reclaim, per thread. Each kind
 * is a begin/end tracepoint pair; the begin is kept in the thread's entry of a hash map keyed
 * by TID, which the thread-exit program removes (compat.bpf.h, thread_state()). */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "cgroup.bpf.h"
#include "common.bpf.h"
#include "compat.bpf.h"
#include "drsnoop.h"
#include "kernel_args.bpf.h"

/* Array indexes are masked with KINDS - 1 (the verifier needs a bound it can see). */
_Static_assert((DRSNOOP_KINDS & (DRSNOOP_KINDS - 1)) == 0, "DRSNOOP_KINDS must be a power of two");

char LICENSE[] SEC("license") = "GPL";

/* task_comm() stores the name as two 8-byte words. */
_Static_assert(__builtin_offsetof(struct drsnoop_event, comm) % 8 == 0,
               "comm must be 8-byte aligned");

/* Options, set by user space before load. */
const volatile __u32 filter_pid = 0;
const volatile __u32 filter_tid = 0;
/* Whether the events carry the user id (-U, -j), read through the helper: read through
 * task->cred, a pointer load the verifier checks by looking type names up in the kernel's
 * BTF, linear scans of its 126k types (btf_nested_type_is_trusted(), 6.18), the four end
 * programs took 11-15 ms to load instead of 3. */
const volatile bool read_uid = true;
/* Whether the events carry the task's cgroup id (-e, -j: the only outputs that print it): five
 * dependent helper reads (task, css_set, css, cgroup, kernfs node) that the default lines do
 * without. */
const volatile bool read_cgroup = true;
const volatile bool filter_uid_on = false;
const volatile __u32 filter_uid = 0;
const volatile char filter_comm[DRSNOOP_COMM_LEN] = {};
const volatile bool filter_cgroup_on = false;
const volatile __u64 filter_cgroup_id = 0;
const volatile __s32 filter_cgroup_level = 0;
/* Which cgroup a task is in, for -G and the CGROUP column: the memory controller's cgroup on
 * a cgroup v1 hierarchy, else the task's cgroup v2 cgroup. */
const volatile bool memcg_on_v1 = false;
const volatile bool filter_on_v1 = false;
const volatile bool extended = false;
const volatile bool trace_events = true;
const volatile bool hist_mode = false;
const volatile bool hist_per_process = false;
const volatile __u32 nr_nodes = 1;
const volatile bool count_cgroups = false;
const volatile bool count_processes = true; /* the per-process summaries */
const volatile __u64 wakeup_bytes = 16 * 1024;

__u64 hist[DRSNOOP_KINDS][MEMLAT_HIST_SLOTS] = {};
struct drsnoop_totals totals[DRSNOOP_KINDS] = {};
__u64 dropped_events = 0;
__u64 table_full = 0;
__u32 hist_epoch = 0; /* written by user space: see struct drsnoop_hist_key */
__u64 unpaired_ends = 0;

struct reclaim_start {
    __u64 ts;
    __u64 gfp;
    __s64 free_pages;
    __s32 order;
    __s32 nid;
};

struct task_reclaim {
    /* One slot per kind: soft-limit reclaim runs nested inside direct reclaim. */
    struct reclaim_start kinds[DRSNOOP_KINDS];
};

/* Per thread, until it exits (compat.bpf.h). */
MEMLAT_THREAD_STATE_MAPS(starts, struct task_reclaim);

/* A zeroed state, to create entries of the hash map from (static: not in the skeleton). */
static const volatile struct task_reclaim no_reclaim;

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 8192);
    __type(key, struct drsnoop_proc_key);
    __type(value, struct drsnoop_summary);
} summaries SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 1);
    __type(key, struct drsnoop_hist_key);
    __type(value, struct drsnoop_proc_hist);
} proc_hists SEC(".maps");

/* Sized by user space: one entry unless count_cgroups. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 1);
    __type(key, struct drsnoop_cgroup_key);
    __type(value, struct drsnoop_totals);
} cgroup_totals SEC(".maps");

MEMLAT_EVENT_MAPS(struct drsnoop_event, 256 * 1024);

static __always_inline bool cgroup_selected(struct task_struct *task) {
    return !filter_cgroup_on ||
           cgroup_is_under(task_cgroup(task, filter_on_v1), filter_cgroup_id, filter_cgroup_level);
}

static __always_inline bool comm_selected(void) {
    char comm[DRSNOOP_COMM_LEN];

    if (!filter_comm[0])
        return true;
    bpf_get_current_comm(comm, sizeof(comm));
    /* Substring search: the needle and haystack are both at most 15 characters. */
    for (int start = 0; start < DRSNOOP_COMM_LEN; start++) {
        bool match = true;

        for (int i = 0; i < DRSNOOP_COMM_LEN; i++) {
            if (!filter_comm[i])
                break;
            if (start + i >= DRSNOOP_COMM_LEN || comm[start + i] != filter_comm[i]) {
                match = false;
                break;
            }
        }
        if (match)
            return true;
        if (!comm[start])
            break;
    }
    return false;
}

/* Free pages of every zone of every node, read from the nodes reached through the task's
 * memory cgroup (every memcg, the root one too, has per-node info pointing at the node's
 * pglist_data). This needs no kallsyms: vm_zone_stat and node_data are data symbols that
 * kernels without CONFIG_KALLSYMS_ALL do not list. */
static __always_inline __s64 free_pages_now(struct task_struct *task) {
    int memory = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);
    int free_item = bpf_core_enum_value(enum zone_stat_item, NR_FREE_PAGES);
    int zones = bpf_core_enum_value(enum zone_type, __MAX_NR_ZONES);
    struct cgroup_subsys_state *css;
    struct mem_cgroup *memcg;
    __s64 total = 0;

    if (memory < 0 || memory >= CGROUP_SUBSYS_COUNT)
        return -1;
    css = BPF_CORE_READ(task, cgroups, subsys[memory]);
    if (!css)
        return -1;
    memcg = container_of(css, struct mem_cgroup, css);
    for (int nid = 0; nid < DRSNOOP_MAX_NODES; nid++) {
        struct mem_cgroup_per_node *pn = NULL;
        struct pglist_data *pgdat;

        if (nid >= nr_nodes)
            break;
        bpf_core_read(&pn, sizeof(pn), &memcg->nodeinfo[nid]);
        if (!pn)
            continue;
        pgdat = BPF_CORE_READ(pn, lruvec.pgdat);
        if (!pgdat)
            continue;
        /* The stride comes from the running kernel's struct zone, not from vmlinux.h:
         * indexing node_zones[z] would bake in this header's sizeof(struct zone). */
        void *zone0 = (void *)pgdat + bpf_core_field_offset(struct pglist_data, node_zones);
        __u64 zone_size = bpf_core_type_size(struct zone);
        __u64 counter =
            bpf_core_field_offset(struct zone, vm_stat) + free_item * sizeof(atomic_long_t);

        for (int z = 0; z < 8; z++) {
            long count = 0;

            if (z >= zones)
                break;
            bpf_probe_read_kernel(&count, sizeof(count), zone0 + z * zone_size + counter);
            /* Per-CPU deltas can leave the summed counter briefly negative. */
            if (count > 0)
                total += count;
        }
    }
    return total;
}

/* Whether the current thread passes the filters, each helper called only when its filter is
 * on: a call whose result goes unused still runs. `task` is the current task, or NULL unless
 * -G is on. */
static __always_inline bool thread_selected(struct task_struct *task) {
    if (filter_pid && (bpf_get_current_pid_tgid() >> 32) != filter_pid)
        return false;
    if (filter_tid && (__u32)bpf_get_current_pid_tgid() != filter_tid)
        return false;
    if (filter_uid_on && (__u32)bpf_get_current_uid_gid() != filter_uid)
        return false;
    return comm_selected() && cgroup_selected(task);
}

static __always_inline int on_begin(__u32 kind, int order, __u64 gfp, int nid) {
    struct task_struct *task = NULL;
    struct task_reclaim *state;
    struct reclaim_start *start;

    if (kind >= DRSNOOP_KINDS)
        return 0;
    if (filter_cgroup_on || extended)
        task = current_task();
    if (!thread_selected(task))
        return 0;
    state = thread_state(&starts, &starts_overflow, (const void *)&no_reclaim, true, &table_full);
    if (!state)
        return 0;
    start = &state->kinds[kind];
    start->gfp = gfp;
    start->order = order;
    start->nid = nid;
    start->free_pages = extended ? free_pages_now(task) : -1;
    /* Last, so the stall excludes the time spent reading the zones. */
    start->ts = bpf_ktime_get_ns();
    return 0;
}

static __always_inline void add_summary(__u64 pid_tgid, __u32 kind, __u64 lat, __u64 pages) {
    struct drsnoop_proc_key key = {.pid = pid_tgid >> 32, .kind = kind};
    struct drsnoop_summary *s =
        MEMLAT_PROCESS_ENTRY(&summaries, &key, struct drsnoop_summary, &table_full);

    if (!s)
        return;
    __sync_fetch_and_add(&s->stalls, 1);
    __sync_fetch_and_add(&s->total_ns, lat);
    __sync_fetch_and_add(&s->pages, pages);
    if (lat > s->max_ns)
        s->max_ns = lat; /* a rare lost race only understates the maximum */
}

static __always_inline void add_hist(__u64 pid_tgid, __u32 kind, __u64 lat) {
    __u32 slot = log2_slot(lat / 1000);

    if (!hist_per_process) {
        __sync_fetch_and_add(&hist[kind & (DRSNOOP_KINDS - 1)][slot], 1);
        return;
    }
    struct drsnoop_hist_key key = {
        .pid = pid_tgid >> 32, .kind = kind, .epoch = *(volatile __u32 *)&hist_epoch};
    struct drsnoop_proc_hist *h =
        MEMLAT_PROCESS_ENTRY(&proc_hists, &key, struct drsnoop_proc_hist, &table_full);

    if (!h)
        return;
    __sync_fetch_and_add(&h->slots[slot], 1);
}

/* --prometheus-labels cgroup. A subprogram, not inlined: its code is in the object once, not
 * in each of the twelve programs that end a stall. */
static __noinline void add_cgroup_totals(__u64 cgid, __u32 kind, __u64 lat, __u64 pages) {
    struct drsnoop_cgroup_key key = {.cgroup_id = cgid, .kind = kind};
    struct drsnoop_totals zero = {}, *t;

    t = bpf_map_lookup_elem(&cgroup_totals, &key);
    if (!t)
        t = map_insert_lookup(&cgroup_totals, &key, &zero, &table_full);
    if (!t)
        return;
    __sync_fetch_and_add(&t->stalls, 1);
    __sync_fetch_and_add(&t->total_ns, lat);
    __sync_fetch_and_add(&t->pages, pages);
}

static __always_inline int on_end(void *ctx, __u32 kind, __u64 nr_reclaimed) {
    /* Read directly where the kernel allows it (5.11), through CO-RE helpers before. */
    struct task_struct *me = current_task_readable();
    struct task_struct *task = me ? me : current_task();
    struct task_reclaim *state;
    struct reclaim_start start;
    __u64 now = bpf_ktime_get_ns(), pid_tgid, lat;

    if (kind >= DRSNOOP_KINDS)
        return 0;
    state = thread_state(&starts, &starts_overflow, NULL, false, NULL);
    if (!state) {
        /* A selected thread's end without its begin: a stall open when the tool started,
         * or whose entry the overflow LRU map gave to another thread while it was open. */
        if (thread_selected(task))
            __sync_fetch_and_add(&unpaired_ends, 1);
        return 0;
    }
    start = state->kinds[kind];
    state->kinds[kind].ts = 0;
    if (!start.ts || now < start.ts) {
        if (!start.ts)
            __sync_fetch_and_add(&unpaired_ends, 1);
        return 0;
    }
    lat = now - start.ts;
    __sync_fetch_and_add(&totals[kind & (DRSNOOP_KINDS - 1)].stalls, 1);
    __sync_fetch_and_add(&totals[kind & (DRSNOOP_KINDS - 1)].total_ns, lat);
    __sync_fetch_and_add(&totals[kind & (DRSNOOP_KINDS - 1)].pages, nr_reclaimed);
    /* The task's cgroup, read once for the per-cgroup totals and the event. */
    __u64 cgid = count_cgroups || (trace_events && read_cgroup)
                     ? cgroup_id(task_cgroup(task, memcg_on_v1))
                     : 0;

    if (count_cgroups)
        add_cgroup_totals(cgid, kind, lat, nr_reclaimed);
    pid_tgid = task_pid_tgid(me);
    if (count_processes)
        add_summary(pid_tgid, kind, lat, nr_reclaimed);
    if (hist_mode)
        add_hist(pid_tgid, kind, lat);
    if (!trace_events)
        return 0;

    struct drsnoop_event *e = event_reserve(&events, &event_scratch, sizeof(*e), &dropped_events);

    if (!e)
        return 0;
    e->ts_ns = now;
    e->lat_ns = lat;
    e->nr_reclaimed = nr_reclaimed;
    e->gfp = start.gfp;
    e->free_pages = start.free_pages;
    e->cgroup_id = cgid;
    e->pid = pid_tgid >> 32;
    e->tid = (__u32)pid_tgid;
    e->uid = read_uid ? (__u32)bpf_get_current_uid_gid() : 0;
    e->kind = kind;
    e->order = start.order;
    e->nid = start.nid;
    task_comm(me, e->comm);
    event_submit(ctx, &events, e, sizeof(*e), wakeup_bytes, &dropped_events);
    return 0;
}

/* The reclaim begins and ends of the three kinds whose begins carry order and gfp, three ways
 * in each (kernel_args.bpf.h); node reclaim's, below, carry its node first. */
static __always_inline void on_reclaim_begin(__u32 kind, int order, gfp_t gfp) {
    on_begin(kind, order, gfp, -1);
}

MEMLAT_RECLAIM_PROGRAMS(direct_reclaim, DRSNOOP_DIRECT, on_reclaim_begin, on_end)
MEMLAT_RECLAIM_PROGRAMS(memcg_reclaim, DRSNOOP_MEMCG, on_reclaim_begin, on_end)
MEMLAT_RECLAIM_PROGRAMS(memcg_softlimit_reclaim, DRSNOOP_SOFTLIMIT, on_reclaim_begin, on_end)

/* Node reclaim's begin carries the node id first. */
SEC("tp_btf/mm_vmscan_node_reclaim_begin")
int BPF_PROG(node_reclaim_begin_btf, int nid, int order, gfp_t gfp) {
    return on_begin(DRSNOOP_NODE, order, gfp, nid);
}

SEC("tp_btf/mm_vmscan_node_reclaim_end")
int BPF_PROG(node_reclaim_end_btf, unsigned long nr_reclaimed) {
    return on_end(ctx, DRSNOOP_NODE, nr_reclaimed);
}

SEC("raw_tp/mm_vmscan_node_reclaim_begin")
int BPF_PROG(node_reclaim_begin_raw, int nid, int order, gfp_t gfp) {
    return on_begin(DRSNOOP_NODE, order, gfp, nid);
}

SEC("raw_tp/mm_vmscan_node_reclaim_end")
int BPF_PROG(node_reclaim_end_raw, unsigned long nr_reclaimed) {
    return on_end(ctx, DRSNOOP_NODE, nr_reclaimed);
}

SEC("tracepoint/vmscan/mm_vmscan_node_reclaim_begin")
int node_reclaim_begin_tp(struct trace_event_raw_mm_vmscan_node_reclaim_begin *ctx) {
    on_begin(DRSNOOP_NODE, ctx->order, ctx->gfp_flags, ctx->nid);
    return KEEP_EVENT;
}

SEC("tracepoint/vmscan/mm_vmscan_node_reclaim_end")
int node_reclaim_end_tp(struct trace_event_raw_mm_vmscan_direct_reclaim_end_template *ctx) {
    on_end(ctx, DRSNOOP_NODE, ctx->nr_reclaimed);
    return KEEP_EVENT;
}

/* An exiting thread's entry in the per-thread hash map goes with it. */
MEMLAT_THREAD_EXIT_PROGRAMS(starts);
