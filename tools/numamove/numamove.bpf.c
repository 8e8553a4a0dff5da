// SPDX-License-Identifier: GPL-2.0
/* numamove: page migrations by reason (NUMA balancing's misplaced pages, compaction, mbind,
 * demotion, ...), timed per migrate_pages() call, from the migrate:mm_migrate_pages_start /
 * mm_migrate_pages tracepoint pair; optionally timed per call of migrate_misplaced_folio (or
 * migrate_misplaced_page on older kernels) with fentry/fexit or kprobes, and the task moves of
 * NUMA balancing (sched_move_numa, sched_swap_numa, sched_stick_numa). */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "common.bpf.h"
#include "compat.bpf.h"
#include "kernel_args.bpf.h"
#include "numamove.h"

/* Array indexes are masked with SIZE - 1 (the verifier needs a bound it can see). */
_Static_assert((NUMAMOVE_MAX_REASONS & (NUMAMOVE_MAX_REASONS - 1)) == 0,
               "NUMAMOVE_MAX_REASONS must be a power of two");
_Static_assert((NUMAMOVE_MAX_DEPTH & (NUMAMOVE_MAX_DEPTH - 1)) == 0,
               "NUMAMOVE_MAX_DEPTH must be a power of two");

char LICENSE[] SEC("license") = "GPL";

/* Options, set by user space before load. */
const volatile __u32 filter_pid = 0;
const volatile bool per_process = false;
const volatile bool hist_mode = false;

/* Positions of mm_migrate_pages' arguments for tp_btf and raw_tp, where the arguments are
 * positional u64s and no field name can be relocated. The prototype changed over time
 * (thp_succeeded, thp_failed, thp_split came in 5.9, large_folio_split in 6.x), so user space
 * reads the running kernel's BTF (typedef btf_trace_mm_migrate_pages -> FUNC_PROTO, whose
 * parameters have types but no names) and sets these before load; NUMAMOVE_NO_ARG marks an
 * argument the kernel does not have. The defaults are never used: when user space cannot
 * recognize the prototype it does not load these programs, and the classic tracepoint
 * (trace_event_raw_mm_migrate_pages, read with CO-RE field relocations) is used instead. */
const volatile __u8 arg_succeeded = NUMAMOVE_NO_ARG;
const volatile __u8 arg_failed = NUMAMOVE_NO_ARG;
const volatile __u8 arg_thp_succeeded = NUMAMOVE_NO_ARG;
const volatile __u8 arg_thp_failed = NUMAMOVE_NO_ARG;
const volatile __u8 arg_thp_split = NUMAMOVE_NO_ARG;
const volatile __u8 arg_large_split = NUMAMOVE_NO_ARG;
const volatile __u8 arg_reason = NUMAMOVE_NO_ARG;

/* Counters, read by user space through the mmap'ed .bss. Migrations run on every CPU, so the
 * adds are atomic; one migrate_pages() call costs microseconds, far more than the add. */
/* By epoch of the per-process table under -P (on_end()); otherwise every count is epoch 0's. */
struct numamove_count counts[2][NUMAMOVE_MAX_REASONS] = {};
__u32 table_epoch = 0; /* written by user space: see struct numamove_proc_key */
__u64 hist[NUMAMOVE_MAX_REASONS][MEMLAT_HIST_SLOTS] = {};
struct numamove_call_count call_count = {};
__u64 call_hist[MEMLAT_HIST_SLOTS] = {};
__u64 task_moves[NUMAMOVE_TASK_MOVES] = {};
__u64 table_full = 0;     /* per-process hash map full */
__u64 unpaired_ends = 0;  /* an end whose start was not seen (in flight at attach): not timed */
__u64 depth_overflow = 0; /* migrate_pages() nested deeper than NUMAMOVE_MAX_DEPTH: not timed */

/* Per thread: the starts of its open migrate_pages() calls (a stack: a migration can nest
 * inside another through the allocation of its target page) and of its open per-call hook, in
 * a hash map keyed by TID whose entry goes when the thread exits (compat.bpf.h). */
struct task_migration {
    __u64 start[NUMAMOVE_MAX_DEPTH];
    __u32 depth;
    __u32 pad;
    __u64 call_start;
};

MEMLAT_THREAD_STATE_MAPS(starts, struct task_migration);

/* A zeroed state, to create entries of the hash map from (static: not in the skeleton). */
static const volatile struct task_migration no_migration;

static __always_inline struct task_migration *migration_state(bool create) {
    return thread_state(&starts, &starts_overflow, (const void *)&no_migration, create,
                        &table_full);
}

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 8192);
    __type(key, struct numamove_proc_key);
    __type(value, struct numamove_proc_value);
} proc_counts SEC(".maps");

/* Whether the current process is selected (-p). The helper is called only with -p: a call
 * whose result goes unused still runs. */
static __always_inline bool pid_selected(void) {
    return filter_pid == 0 || (__u32)(bpf_get_current_pid_tgid() >> 32) == filter_pid;
}

static __always_inline __u32 reason_slot(int reason) {
    __u32 slot = reason >= 0 && reason < NUMAMOVE_MAX_REASONS ? reason : NUMAMOVE_MAX_REASONS - 1;

    /* clang proves the clamp and drops the mask unless the value is hidden from it; the
     * verifier needs the mask to bound the array index. */
    barrier_var(slot);
    return slot & (NUMAMOVE_MAX_REASONS - 1);
}

static __always_inline void on_start(void) {
    struct task_migration *state;

    if (!pid_selected())
        return;
    state = migration_state(true);
    if (!state)
        return; /* no memory or full: the end counts the call, untimed */
    if (state->depth >= NUMAMOVE_MAX_DEPTH) {
        /* Too deep to time. Its depth is still counted, so that its end pops nothing
         * and the ends of the calls around it find their own starts. */
        __sync_fetch_and_add(&depth_overflow, 1);
        if (state->depth < NUMAMOVE_DEPTH_LIMIT)
            state->depth++;
        return;
    }
    state->start[state->depth & (NUMAMOVE_MAX_DEPTH - 1)] = bpf_ktime_get_ns();
    state->depth++;
}

struct migration {
    __u64 succeeded, failed, thp_succeeded, thp_failed, thp_split, large_split;
    int reason;
};

/* An atomic add (a locked instruction) only of what is not zero: most calls move base pages
 * and fail none. */
static __always_inline void add_any(__u64 *counter, __u64 n) {
    if (n)
        __sync_fetch_and_add(counter, n);
}

static __always_inline void add_count(struct numamove_count *c, const struct migration *m,
                                      __u64 lat, bool paired) {
    __sync_fetch_and_add(&c->calls, 1);
    add_any(&c->succeeded, m->succeeded);
    add_any(&c->failed, m->failed);
    add_any(&c->thp_succeeded, m->thp_succeeded);
    add_any(&c->thp_failed, m->thp_failed);
    add_any(&c->thp_split, m->thp_split);
    add_any(&c->large_split, m->large_split);
    if (paired) {
        __sync_fetch_and_add(&c->paired, 1);
        __sync_fetch_and_add(&c->total_ns, lat);
    }
}

static __always_inline void count_per_process(__u64 pid_tgid, __u32 slot, const struct migration *m,
                                              __u64 lat, bool paired, __u32 epoch) {
    struct numamove_proc_key key = {.pid = pid_tgid >> 32, .reason = slot, .epoch = epoch};
    struct numamove_proc_value *v =
        MEMLAT_PROCESS_ENTRY(&proc_counts, &key, struct numamove_proc_value, &table_full);

    if (!v)
        return;
    add_count(&v->c, m, lat, paired);
}

static __always_inline int on_end(const struct migration *m) {
    __u64 now = bpf_ktime_get_ns(), lat = 0;
    struct task_migration *state;
    __u32 slot = reason_slot(m->reason), epoch = 0;
    bool paired = false;

    if (!pid_selected())
        return 0;
    /* The pages are counted whether or not the start was seen, so the sums stay exact. */
    state = migration_state(false);
    if (state && state->depth > 0) {
        state->depth--;
        /* A call that nested too deep had no start recorded: untimed. */
        if (state->depth < NUMAMOVE_MAX_DEPTH) {
            __u64 start = state->start[state->depth & (NUMAMOVE_MAX_DEPTH - 1)];

            if (start && now >= start) {
                lat = now - start;
                paired = true;
            }
        }
    }
    if (!paired)
        __sync_fetch_and_add(&unpaired_ends, 1);
    /* -P: the epoch read once, for the totals and the process's row alike. */
    if (per_process)
        epoch = *(volatile __u32 *)&table_epoch & 1;
    add_count(&counts[epoch][slot], m, lat, paired);
    if (hist_mode && paired)
        __sync_fetch_and_add(&hist[slot][log2_slot(lat / 1000)], 1);
    if (per_process)
        count_per_process(bpf_get_current_pid_tgid(), slot, m, lat, paired, epoch);
    return 0;
}

static __always_inline int on_end_args(__u64 *ctx) {
    struct migration m = {
        .succeeded = tracepoint_arg(ctx, arg_succeeded),
        .failed = tracepoint_arg(ctx, arg_failed),
        .thp_succeeded = tracepoint_arg(ctx, arg_thp_succeeded),
        .thp_failed = tracepoint_arg(ctx, arg_thp_failed),
        .thp_split = tracepoint_arg(ctx, arg_thp_split),
        .large_split = tracepoint_arg(ctx, arg_large_split),
        .reason = (int)tracepoint_arg(ctx, arg_reason),
    };

    return on_end(&m);
}

SEC("tp_btf/mm_migrate_pages_start")
int migrate_start_btf(__u64 *ctx) {
    on_start();
    return 0;
}

SEC("tp_btf/mm_migrate_pages")
int migrate_end_btf(__u64 *ctx) {
    return on_end_args(ctx);
}

SEC("raw_tp/mm_migrate_pages_start")
int migrate_start_raw(__u64 *ctx) {
    on_start();
    return 0;
}

SEC("raw_tp/mm_migrate_pages")
int migrate_end_raw(__u64 *ctx) {
    return on_end_args(ctx);
}

SEC("tracepoint/migrate/mm_migrate_pages_start")
int migrate_start_tp(void *ctx) {
    on_start();
    return KEEP_EVENT;
}

/* Kernels before 5.16 have no mm_migrate_pages_start: the entry of migrate_pages(), where that
 * tracepoint sits, is the same moment (mm_migrate_pages is at its return on every kernel). */
SEC("fentry/migrate_pages")
int BPF_PROG(migrate_start_fentry) {
    on_start();
    return 0;
}

SEC("kprobe/migrate_pages")
int BPF_KPROBE(migrate_start_kprobe) {
    on_start();
    return KEEP_EVENT;
}

/* Linux 7.3 declares the record's reason as enum migrate_reason, not int: CO-RE does not
 * match an int field against an enum, so this flavor reads it there. */
struct trace_event_raw_mm_migrate_pages___enum_reason {
    enum migrate_reason reason;
} __attribute__((preserve_access_index));

/* The classic tracepoint's record has named fields: CO-RE finds them at the running kernel's
 * offsets, and those a kernel lacks read as 0. */
SEC("tracepoint/migrate/mm_migrate_pages")
int migrate_end_tp(struct trace_event_raw_mm_migrate_pages *ctx) {
    struct trace_event_raw_mm_migrate_pages___enum_reason *with_enum = (void *)ctx;
    struct migration m = {
        .succeeded = ctx->succeeded,
        .failed = ctx->failed,
    };

    if (bpf_core_field_exists(ctx->reason))
        m.reason = ctx->reason;
    else if (bpf_core_field_exists(with_enum->reason))
        /* A helper read: two direct loads at CO-RE offsets let clang merge them into one
         * load through a computed context pointer, which the verifier refuses. */
        bpf_core_read(&m.reason, sizeof(m.reason), &with_enum->reason);

    if (bpf_core_field_exists(ctx->thp_succeeded)) {
        m.thp_succeeded = ctx->thp_succeeded;
        m.thp_failed = ctx->thp_failed;
    }
    if (bpf_core_field_exists(ctx->thp_split))
        m.thp_split = ctx->thp_split;
    if (bpf_core_field_exists(ctx->large_folio_split))
        m.large_split = ctx->large_folio_split;
    on_end(&m);
    return KEEP_EVENT;
}

/* The per-call view: entry to return of migrate_misplaced_folio (migrate_misplaced_page on
 * older kernels), the function NUMA balancing's hinting fault calls for one misplaced page.
 * On kernels that isolate the page from the LRU inside it (6.1 does; 6.18 does it before, in
 * migrate_misplaced_folio_prepare), its time includes the isolation, which the tracepoint
 * pair does not see; it also counts calls that never reach migrate_pages(). */
static __always_inline void on_call_entry(void) {
    struct task_migration *state;

    if (!pid_selected())
        return;
    state = migration_state(true);
    if (state)
        state->call_start = bpf_ktime_get_ns();
}

static __always_inline void on_call_return(void) {
    struct task_migration *state;
    __u64 now = bpf_ktime_get_ns(), start, lat;

    if (!pid_selected())
        return;
    state = migration_state(false);
    if (!state)
        return;
    start = state->call_start;
    state->call_start = 0;
    if (!start || now < start)
        return;
    lat = now - start;
    __sync_fetch_and_add(&call_count.calls, 1);
    __sync_fetch_and_add(&call_count.total_ns, lat);
    if (hist_mode)
        __sync_fetch_and_add(&call_hist[log2_slot(lat / 1000)], 1);
}

SEC("fentry/migrate_misplaced_folio")
int BPF_PROG(misplaced_folio_fentry) {
    on_call_entry();
    return 0;
}

SEC("fexit/migrate_misplaced_folio")
int BPF_PROG(misplaced_folio_fexit) {
    on_call_return();
    return 0;
}

SEC("fentry/migrate_misplaced_page")
int BPF_PROG(misplaced_page_fentry) {
    on_call_entry();
    return 0;
}

SEC("fexit/migrate_misplaced_page")
int BPF_PROG(misplaced_page_fexit) {
    on_call_return();
    return 0;
}

SEC("kprobe/migrate_misplaced_folio")
int BPF_KPROBE(misplaced_folio_kprobe) {
    on_call_entry();
    return KEEP_EVENT;
}

SEC("kretprobe/migrate_misplaced_folio")
int BPF_KRETPROBE(misplaced_folio_kretprobe) {
    on_call_return();
    return KEEP_EVENT;
}

SEC("kprobe/migrate_misplaced_page")
int BPF_KPROBE(misplaced_page_kprobe) {
    on_call_entry();
    return KEEP_EVENT;
}

SEC("kretprobe/migrate_misplaced_page")
int BPF_KRETPROBE(misplaced_page_kretprobe) {
    on_call_return();
    return KEEP_EVENT;
}

/* Task moves of NUMA balancing, counted for the task moved (its process for -p). */
static __always_inline int on_task_move(__u32 kind, __u32 tgid) {
    if (filter_pid && tgid != filter_pid)
        return 0;
    if (kind < NUMAMOVE_TASK_MOVES)
        __sync_fetch_and_add(&task_moves[kind], 1);
    return 0;
}

SEC("tp_btf/sched_move_numa")
int BPF_PROG(move_numa_btf, struct task_struct *task) {
    return on_task_move(NUMAMOVE_MOVE, BPF_CORE_READ(task, tgid));
}

SEC("tp_btf/sched_swap_numa")
int BPF_PROG(swap_numa_btf, struct task_struct *task) {
    return on_task_move(NUMAMOVE_SWAP, BPF_CORE_READ(task, tgid));
}

SEC("tp_btf/sched_stick_numa")
int BPF_PROG(stick_numa_btf, struct task_struct *task) {
    return on_task_move(NUMAMOVE_STICK, BPF_CORE_READ(task, tgid));
}

SEC("raw_tp/sched_move_numa")
int BPF_PROG(move_numa_raw, struct task_struct *task) {
    return on_task_move(NUMAMOVE_MOVE, BPF_CORE_READ(task, tgid));
}

SEC("raw_tp/sched_swap_numa")
int BPF_PROG(swap_numa_raw, struct task_struct *task) {
    return on_task_move(NUMAMOVE_SWAP, BPF_CORE_READ(task, tgid));
}

SEC("raw_tp/sched_stick_numa")
int BPF_PROG(stick_numa_raw, struct task_struct *task) {
    return on_task_move(NUMAMOVE_STICK, BPF_CORE_READ(task, tgid));
}

SEC("tracepoint/sched/sched_move_numa")
int move_numa_tp(struct trace_event_raw_sched_move_numa *ctx) {
    on_task_move(NUMAMOVE_MOVE, ctx->tgid);
    return KEEP_EVENT;
}

SEC("tracepoint/sched/sched_swap_numa")
int swap_numa_tp(struct trace_event_raw_sched_numa_pair_template *ctx) {
    on_task_move(NUMAMOVE_SWAP, ctx->src_tgid);
    return KEEP_EVENT;
}

SEC("tracepoint/sched/sched_stick_numa")
int stick_numa_tp(struct trace_event_raw_sched_numa_pair_template *ctx) {
    on_task_move(NUMAMOVE_STICK, ctx->src_tgid);
    return KEEP_EVENT;
}

/* An exiting thread's entry in the per-thread hash map goes with it. */
MEMLAT_THREAD_EXIT_PROGRAMS(starts);
