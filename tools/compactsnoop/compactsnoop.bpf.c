// SPDX-License-Identifier: GPL-2.0
/* compactsnoop: every memory-compaction run (mm_compaction_begin .. mm_compaction_end) with its
 * node, zone, order, mode, kind, latency and status. The begin is kept in the thread's entry of
 * a hash map keyed by TID (a task runs one compact_zone() at a time: compaction allocates its
 * target pages itself and direct compaction runs with PF_MEMALLOC, so runs never nest), which
 * the thread-exit program removes (compat.bpf.h, thread_state()).
 *
 * With tp_btf or raw_tp the begin carries struct compact_control *, read through CO-RE: zone
 * (node and zone index), order, mode, direct/proactive/whole-zone. The classic tracepoints
 * carry none of it; there the node, zone and order come from mm_compaction_finished, which
 * compact_zone() emits at least once per run (also for order -1, unlike
 * mm_compaction_suitable), and the kind is inferred from the task and the order. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "common.bpf.h"
#include "compactsnoop.h"
#include "compat.bpf.h"
#include "stacks.bpf.h"

/* Array indexes are masked with KINDS - 1 (the verifier needs a bound it can see). */
_Static_assert((COMPACTSNOOP_KINDS & (COMPACTSNOOP_KINDS - 1)) == 0,
               "COMPACTSNOOP_KINDS must be a power of two");

char LICENSE[] SEC("license") = "GPL";

/* task_comm() stores the name as two 8-byte words. */
_Static_assert(__builtin_offsetof(struct compactsnoop_event, comm) % 8 == 0,
               "comm must be 8-byte aligned");

/* Options, set by user space before load. */
const volatile __u32 filter_pid = 0;
const volatile __u32 kind_mask = (1u << COMPACTSNOOP_KINDS) - 1;
const volatile bool extended = false;
const volatile bool collect_stacks = false;
const volatile bool trace_events = true;
const volatile bool hist_mode = false;
const volatile __u64 wakeup_bytes = 16 * 1024;

/* Counters, read by user space through the mmap'ed .bss. */
struct compactsnoop_summary summary[COMPACTSNOOP_KINDS][COMPACTSNOOP_MAX_STATUS] = {};
__u64 hist[COMPACTSNOOP_KINDS][COMPACTSNOOP_ORDER_ROWS][MEMLAT_HIST_SLOTS] = {};
/* The sum of each histogram's values in ns (--prometheus's histogram _sum). */
__u64 hist_sum_ns[COMPACTSNOOP_KINDS][COMPACTSNOOP_ORDER_ROWS] = {};
__u64 deferred[COMPACTSNOOP_KINDS] = {}; /* mm_compaction_deferred: a zone skipped, deferred */
__u64 kcompactd_wakes = 0;               /* mm_compaction_kcompactd_wake */
__u64 direct_entries = 0;                /* mm_compaction_try_to_compact_pages */
__u64 direct_entries_run = 0;            /* entries that ran compaction in at least one zone */
__u64 dropped_events = 0;
__u64 table_full = 0;
__u64 unpaired_ends = 0;

struct run_start {
    __u64 ts;
    __u64 gfp;
    __u64 migrated;
    __u64 failed;
    __u64 free_pages;
    __u64 wmark_min, wmark_low, wmark_high, wmark_boost;
    __u64 nr_free[COMPACTSNOOP_MAX_ORDERS];
    __u32 nr_orders;
    __u32 flags;
    __s32 nid;
    __s32 zone;
    __s32 order;
    __s32 mode;
    __s32 kind; /* -1: infer at the end */
    __s32 stack;
    __u8 sync;
    __u8 whole_zone;
};

struct task_compaction {
    struct run_start run;
    /* The last direct-compaction entry of this task. */
    __u64 entry_gfp;
    __s32 entry_order;
    __s32 entry_prio;
    bool entry_seen;
    bool entry_pending; /* no run yet since the entry */
};

MEMLAT_THREAD_STATE_MAPS(tasks, struct task_compaction);

/* A zeroed state, to create entries of the hash map from (static: not in the skeleton). */
static const volatile struct task_compaction no_compaction;

MEMLAT_STACK_TRACE_MAP(stacks);

MEMLAT_EVENT_MAPS(struct compactsnoop_event, 256 * 1024);

static __always_inline bool pid_selected(void) {
    return filter_pid == 0 || (bpf_get_current_pid_tgid() >> 32) == filter_pid;
}

static __always_inline struct task_compaction *state_of(bool create) {
    return thread_state(&tasks, &tasks_overflow, (const void *)&no_compaction, create, &table_full);
}

/* zone_position() and read_zone_state(), which fill a struct run_start. */
#include "compactsnoop_zone.bpf.h"

static __always_inline struct task_compaction *start_run(void *ctx) {
    struct task_compaction *s;

    if (!pid_selected())
        return NULL;
    s = state_of(true);
    if (!s)
        return NULL;
    s->run.gfp = 0;
    s->run.migrated = 0;
    s->run.failed = 0;
    s->run.flags = 0;
    s->run.nr_orders = 0;
    s->run.nid = -1;
    s->run.zone = -1;
    s->run.order = -1;
    s->run.mode = -1;
    s->run.kind = -1;
    s->run.whole_zone = 0;
    s->run.stack = collect_stacks ? stack_id(ctx, &stacks, 0) : -1;
    return s;
}

/* tp_btf and raw_tp: everything from struct compact_control, its numbers read with plain loads
 * from tp_btf (`loads`), through helpers from raw_tp. The zone pointer is read through a helper
 * in both: a plain load of a pointer field makes the verifier check the pointer's type by name
 * in the kernel's BTF (btf_nested_type_is_trusted(), linear scans), about 1 ms of start-up.
 * Counting (-H, --prometheus) needs only the run's kind and order: the zone (three helper
 * reads), mode, gfp and flags are read only for the events that print them. */
static __always_inline int on_begin_cc(void *ctx, struct compact_control *cc, bool sync,
                                       bool loads) {
    struct task_compaction *s = start_run(ctx);
    struct zone *zone = NULL;
    bool direct, proactive = false;

    if (!s)
        return 0;
    if (trace_events) {
        zone = BPF_CORE_READ(cc, zone);
        zone_position(zone, &s->run.nid, &s->run.zone);
        s->run.mode = KERNEL_FIELD(loads, cc, mode);
        s->run.gfp = KERNEL_FIELD(loads, cc, gfp_mask);
        s->run.whole_zone = KERNEL_FIELD(loads, cc, whole_zone);
        s->run.sync = sync;
    }
    s->run.order = KERNEL_FIELD(loads, cc, order);
    direct = KERNEL_FIELD(loads, cc, direct_compaction);
    if (bpf_core_field_exists(cc->proactive_compaction))
        proactive = KERNEL_FIELD(loads, cc, proactive_compaction);
    if (direct)
        s->run.kind = COMPACTSNOOP_DIRECT;
    else if (proactive)
        s->run.kind = COMPACTSNOOP_PROACTIVE;
    else if (s->run.order < 0)
        s->run.kind = COMPACTSNOOP_MANUAL;
    else
        s->run.kind = COMPACTSNOOP_KCOMPACTD;
    s->run.flags |= COMPACTSNOOP_HAVE_CC;
    if (extended && zone)
        read_zone_state(zone, &s->run);
    /* Last, so the run excludes the time spent reading the zone. */
    s->run.ts = bpf_ktime_get_ns();
    return 0;
}

/* Classic tracepoint: only the mode (sync or not) is known at the begin. */
static __always_inline int on_begin_plain(void *ctx, bool sync) {
    struct task_compaction *s = start_run(ctx);

    if (!s)
        return 0;
    s->run.sync = sync;
    s->run.ts = bpf_ktime_get_ns();
    return 0;
}

/* Classic tracepoint fall-back: mm_compaction_finished names the run's zone and order. */
static __always_inline int on_finished(int nid, int idx, int order) {
    struct task_compaction *s = state_of(false);

    if (!s || !s->run.ts || s->run.nid >= 0)
        return 0;
    s->run.nid = nid;
    s->run.zone = idx;
    s->run.order = order;
    return 0;
}

static __always_inline bool is_kcompactd(void) {
    struct task_struct *task = current_task();
    char comm[COMPACTSNOOP_COMM_LEN] = {};

    if (!(BPF_CORE_READ(task, flags) & PF_KTHREAD))
        return false;
    bpf_get_current_comm(comm, sizeof(comm));
    return comm[0] == 'k' && comm[1] == 'c' && comm[2] == 'o' && comm[3] == 'm' && comm[4] == 'p' &&
           comm[5] == 'a' && comm[6] == 'c' && comm[7] == 't' && comm[8] == 'd';
}

static __always_inline void add_summary(__u32 kind, __u32 status, __u64 lat, __u64 migrated,
                                        __u64 failed) {
    __u32 k = kind, st = status < COMPACTSNOOP_MAX_STATUS ? status : COMPACTSNOOP_MAX_STATUS - 1;
    struct compactsnoop_summary *sum;

    /* clang proves the clamps and drops the masks unless the values are hidden from it; the
     * verifier needs the masks to bound the array indexes. */
    barrier_var(k);
    k &= COMPACTSNOOP_KINDS - 1;
    barrier_var(st);
    st &= COMPACTSNOOP_MAX_STATUS - 1;
    sum = &summary[k][st];
    __sync_fetch_and_add(&sum->runs, 1);
    __sync_fetch_and_add(&sum->total_ns, lat);
    __sync_fetch_and_add(&sum->migrated, migrated);
    __sync_fetch_and_add(&sum->failed, failed);
    if (lat > sum->max_ns)
        sum->max_ns = lat; /* a rare lost race only understates the maximum */
}

static __always_inline void add_hist(__u32 kind, int order, __u64 lat) {
    __u32 k = kind, row = order < 0 ? 0 : order + 1, slot = log2_slot(lat / 1000);

    if (row >= COMPACTSNOOP_ORDER_ROWS)
        row = COMPACTSNOOP_ORDER_ROWS - 1;
    barrier_var(k);
    k &= COMPACTSNOOP_KINDS - 1;
    barrier_var(row);
    row &= COMPACTSNOOP_ORDER_ROWS - 1;
    barrier_var(slot);
    slot &= MEMLAT_HIST_SLOTS - 1;
    __sync_fetch_and_add(&hist[k][row][slot], 1);
    __sync_fetch_and_add(&hist_sum_ns[k][row], lat);
}

static __always_inline int end_run(void *ctx, int status) {
    struct task_compaction *s = state_of(false);
    struct task_struct *me;
    struct run_start *r;
    __u64 now = bpf_ktime_get_ns(), pid_tgid, lat;
    __u32 kind;

    if (!s || !s->run.ts) {
        if (pid_selected())
            __sync_fetch_and_add(&unpaired_ends, 1);
        return 0;
    }
    r = &s->run;
    if (now < r->ts) {
        r->ts = 0;
        return 0;
    }
    lat = now - r->ts;
    r->ts = 0;
    if (r->kind >= 0) {
        kind = r->kind;
    } else {
        bool kthread = is_kcompactd();

        if (r->order < 0)
            kind = kthread ? COMPACTSNOOP_PROACTIVE : COMPACTSNOOP_MANUAL;
        else
            kind = kthread ? COMPACTSNOOP_KCOMPACTD : COMPACTSNOOP_DIRECT;
    }
    if (kind >= COMPACTSNOOP_KINDS || !((kind_mask >> kind) & 1))
        return 0;
    if (kind == COMPACTSNOOP_DIRECT && s->entry_pending) {
        s->entry_pending = false;
        __sync_fetch_and_add(&direct_entries_run, 1);
    }
    add_summary(kind, status, lat, r->migrated, r->failed);
    if (hist_mode)
        add_hist(kind, r->order, lat);
    if (!trace_events)
        return 0;

    struct compactsnoop_event *e =
        event_reserve(&events, &event_scratch, sizeof(*e), &dropped_events);

    if (!e)
        return 0;
    me = current_task_readable();
    pid_tgid = task_pid_tgid(me);
    e->ts_ns = now;
    e->lat_ns = lat;
    e->gfp = r->gfp;
    e->migrated = r->migrated;
    e->failed = r->failed;
    e->free_pages = r->free_pages;
    e->wmark_min = r->wmark_min;
    e->wmark_low = r->wmark_low;
    e->wmark_high = r->wmark_high;
    e->wmark_boost = r->wmark_boost;
    __builtin_memcpy(e->nr_free, r->nr_free, sizeof(e->nr_free));
    e->nr_orders = r->nr_orders;
    e->pid = pid_tgid >> 32;
    e->tid = (__u32)pid_tgid;
    e->kind = kind;
    e->flags = r->flags;
    e->nid = r->nid;
    e->zone = r->zone;
    e->order = r->order;
    e->mode = r->mode;
    e->status = status;
    e->prio = -1;
    if (kind == COMPACTSNOOP_DIRECT && s->entry_seen) {
        e->prio = s->entry_prio;
        e->flags |= COMPACTSNOOP_HAVE_ENTRY;
        if (!(r->flags & COMPACTSNOOP_HAVE_CC))
            e->gfp = s->entry_gfp;
    }
    e->kernel_stack = r->stack;
    e->sync = r->sync;
    e->whole_zone = r->whole_zone;
    __builtin_memset(e->pad, 0, sizeof(e->pad));
    task_comm(me, e->comm);
    event_submit(ctx, &events, e, sizeof(*e), wakeup_bytes, &dropped_events);
    return 0;
}

static __always_inline int on_migratepages(__u64 migrated, __u64 failed) {
    struct task_compaction *s = state_of(false);

    if (!s || !s->run.ts)
        return 0;
    s->run.migrated += migrated;
    s->run.failed += failed;
    return 0;
}

static __always_inline int on_try_to_compact(int order, __u64 gfp, int prio) {
    struct task_compaction *s;

    if (!pid_selected() || !((kind_mask >> COMPACTSNOOP_DIRECT) & 1))
        return 0;
    s = state_of(true);
    if (!s)
        return 0;
    s->entry_gfp = gfp;
    s->entry_order = order;
    s->entry_prio = prio;
    s->entry_seen = true;
    s->entry_pending = true;
    __sync_fetch_and_add(&direct_entries, 1);
    return 0;
}

static __always_inline int on_deferred(void) {
    __u32 kind = is_kcompactd() ? COMPACTSNOOP_KCOMPACTD : COMPACTSNOOP_DIRECT;

    if (!pid_selected() || !((kind_mask >> kind) & 1))
        return 0;
    __sync_fetch_and_add(&deferred[kind & (COMPACTSNOOP_KINDS - 1)], 1);
    return 0;
}

static __always_inline int on_kcompactd_wake(void) {
    if (pid_selected())
        __sync_fetch_and_add(&kcompactd_wakes, 1);
    return 0;
}

static __always_inline int on_end(void *ctx, int status) {
    return end_run(ctx, status);
}

/* ---- mm_compaction_begin / mm_compaction_end: three ways in, the first accepted is used. */

SEC("tp_btf/mm_compaction_begin")
int BPF_PROG(begin_btf, struct compact_control *cc, unsigned long zone_start,
             unsigned long zone_end, bool sync) {
    return on_begin_cc(ctx, cc, sync, true);
}

SEC("tp_btf/mm_compaction_end")
int BPF_PROG(end_btf, struct compact_control *cc, unsigned long zone_start, unsigned long zone_end,
             bool sync, int status) {
    return on_end(ctx, status);
}

SEC("raw_tp/mm_compaction_begin")
int BPF_PROG(begin_raw, struct compact_control *cc, unsigned long zone_start,
             unsigned long zone_end, bool sync) {
    return on_begin_cc(ctx, cc, sync, false);
}

SEC("raw_tp/mm_compaction_end")
int BPF_PROG(end_raw, struct compact_control *cc, unsigned long zone_start, unsigned long zone_end,
             bool sync, int status) {
    return on_end(ctx, status);
}

SEC("tracepoint/compaction/mm_compaction_begin")
int begin_tp(struct trace_event_raw_mm_compaction_begin *ctx) {
    on_begin_plain(ctx, ctx->sync);
    return KEEP_EVENT;
}

SEC("tracepoint/compaction/mm_compaction_finished")
int finished_tp(struct trace_event_raw_mm_compaction_suitable_template *ctx) {
    on_finished(ctx->nid, ctx->idx, ctx->order);
    return KEEP_EVENT;
}

SEC("tracepoint/compaction/mm_compaction_end")
int end_tp(struct trace_event_raw_mm_compaction_end *ctx) {
    on_end(ctx, ctx->status);
    return KEEP_EVENT;
}

/* ---- Context: pages migrated per run. The classic tracepoint comes first: its fields are
 * nr_migrated and nr_failed on every kernel, while the raw arguments changed in 6.0 (now the
 * pages tried and the pages that succeeded). */

SEC("tracepoint/compaction/mm_compaction_migratepages")
int migratepages_tp(struct trace_event_raw_mm_compaction_migratepages *ctx) {
    on_migratepages(ctx->nr_migrated, ctx->nr_failed);
    return KEEP_EVENT;
}

SEC("tp_btf/mm_compaction_migratepages")
int BPF_PROG(migratepages_btf, unsigned int nr_migratepages, unsigned int nr_succeeded) {
    return on_migratepages(nr_succeeded, nr_migratepages - nr_succeeded);
}

SEC("raw_tp/mm_compaction_migratepages")
int BPF_PROG(migratepages_raw, unsigned int nr_migratepages, unsigned int nr_succeeded) {
    return on_migratepages(nr_succeeded, nr_migratepages - nr_succeeded);
}

/* ---- Context: direct-compaction entry (order, gfp, priority). */

SEC("tp_btf/mm_compaction_try_to_compact_pages")
int BPF_PROG(try_to_compact_btf, int order, gfp_t gfp_mask, int prio) {
    return on_try_to_compact(order, gfp_mask, prio);
}

SEC("raw_tp/mm_compaction_try_to_compact_pages")
int BPF_PROG(try_to_compact_raw, int order, gfp_t gfp_mask, int prio) {
    return on_try_to_compact(order, gfp_mask, prio);
}

SEC("tracepoint/compaction/mm_compaction_try_to_compact_pages")
int try_to_compact_tp(struct trace_event_raw_mm_compaction_try_to_compact_pages *ctx) {
    on_try_to_compact(ctx->order, ctx->gfp_mask, ctx->prio);
    return KEEP_EVENT;
}

/* ---- Context: zones skipped because compaction there is deferred. */

SEC("tp_btf/mm_compaction_deferred")
int BPF_PROG(deferred_btf) {
    return on_deferred();
}

SEC("raw_tp/mm_compaction_deferred")
int BPF_PROG(deferred_raw) {
    return on_deferred();
}

SEC("tracepoint/compaction/mm_compaction_deferred")
int deferred_tp(void *ctx) {
    on_deferred();
    return KEEP_EVENT;
}

/* ---- Context: kcompactd wake-ups. */

SEC("tp_btf/mm_compaction_kcompactd_wake")
int BPF_PROG(kcompactd_wake_btf) {
    return on_kcompactd_wake();
}

SEC("raw_tp/mm_compaction_kcompactd_wake")
int BPF_PROG(kcompactd_wake_raw) {
    return on_kcompactd_wake();
}

SEC("tracepoint/compaction/mm_compaction_kcompactd_wake")
int kcompactd_wake_tp(void *ctx) {
    on_kcompactd_wake();
    return KEEP_EVENT;
}

/* An exiting thread's entry in the per-thread hash map goes with it. */
MEMLAT_THREAD_EXIT_PROGRAMS(tasks);
