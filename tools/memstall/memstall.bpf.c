// SPDX-License-Identifier: GPL-2.0
/* memstall: how long each thread is stalled on memory, and why. Causes with a begin/end
 * tracepoint pair (direct and memcg reclaim, direct compaction) are timed between the two;
 * a balance_dirty_pages pause from the tracepoint to the moment the task runs again. The rest
 * is what PSI counts as a memory stall (task_struct->in_memstall) with no tracepoint of its own:
 * the off-CPU intervals of a task in a memstall, seen at sched_switch, charged to a cause by
 * the kernel functions it sleeps under (address ranges user space resolves once). A swap-in
 * is a memstall only for a workingset page; the others wait for their read in an I/O sleep
 * (task_struct->in_iowait), so a user task's I/O sleep under the swap-in functions is a
 * swap-in stall too (and any other I/O sleep is none of memstall's business). The functions
 * are known by their address ranges, or (kallsyms hidden from the user, 5.17+) by the names
 * the kernel gives the frames. Without PSI (without_psi) what else the kernel marks stands in
 * for in_memstall: in_thrashing on an I/O sleep, a killable sleep under memory.high's throttle.
 *
 * Time is summed per thread and cause in the kernel; user space reads the table per interval.
 * sched_switch runs on every context switch: for tasks not in a memory stall it reads two
 * bits and one global and returns. Per-thread state (an open window or sleep) is a hash map
 * keyed by thread id, which works with every hook kind (task storage needs tp_btf's trusted
 * pointers for the task being switched in); its entry goes when nothing is open, and with
 * the thread at exit. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "cgroup.bpf.h"
#include "common.bpf.h"
#include "kernel_args.bpf.h"
#include "memlat/memstall.h"
#include "memlat/stack.h"
#include "stacks.bpf.h"

_Static_assert((MEMSTALL_CAUSES & (MEMSTALL_CAUSES - 1)) == 0,
               "MEMSTALL_CAUSES must be a power of two");

char LICENSE[] SEC("license") = "GPL";

/* The tracepoint windows, indexes into thread_stall.window_start. */
#define WINDOWS 3

/* Options, set by user space before load. */
const volatile __u32 filter_pid = 0;
const volatile __u32 filter_tid = 0;
const volatile bool filter_cgroup_on = false;
const volatile __u64 filter_cgroup_id = 0;
const volatile __s32 filter_cgroup_level = 0;
const volatile bool filter_on_v1 = false;
const volatile bool memcg_on_v1 = false;
/* Function ranges of the frame-classified causes, sorted by nothing: the innermost frame that
 * falls in one decides. Set by user space before load, never written here; in .bss and not
 * .rodata on purpose: the verifier reads frozen .rodata as constants, and each comparison of
 * a return address with a known bound narrowed the address's range, so that every frame of
 * the stack walk, every range and every call of the walk made new states to check (6,079
 * instructions, 5.4 ms of memstall's start-up on 6.18); compared with unknown bounds, the
 * paths are the same each time. */
struct memstall_range ranges[MEMSTALL_MAX_RANGES] = {};
const volatile __u32 nr_ranges = 0;
/* The swap-in functions' ranges come first: ranges[0, nr_swapin_ranges). */
const volatile __u32 nr_swapin_ranges = 0;
/* Where kallsyms hides the addresses from the user (no CAP_SYSLOG): the same functions by the
 * hash of their names, which the kernel gives for a frame without any capability (in .bss
 * for the same reason as the ranges). Only the bpf_loop() walk (5.17) does this. */
struct memstall_named_cause named[MEMSTALL_MAX_RANGES] = {};
const volatile __u32 nr_named = 0;
const volatile bool classify_by_name = false;
/* PSI disabled (psi=0; Debian's default, CONFIG_PSI_DEFAULT_DISABLED) or compiled out: no task
 * is ever in a memstall. Then what else the kernel marks tells the stalls: a thrashing wait is
 * an I/O sleep with task_struct->in_thrashing set (the workingset wait sets it for delay
 * accounting, 6.1+, only while kernel.task_delayacct is 1), and the memory.high throttle a
 * killable sleep (TASK_KILLABLE) under its functions. Other memstalls are not seen. */
const volatile bool without_psi = false;
/* --stacks: the kernel and user stacks of each stall, taken where the stalled task runs (at
 * a window's end, a dirty pause's tracepoint, a memstall sleep's switch-out). */
const volatile bool collect_stacks = false;
/* With collect_stacks: no stacks are taken or counted while this is set (`memlat exporter`
 * between the profiles it is asked for, /debug/pprof/memstall). */
__u32 stacks_paused = 0;

struct memstall_totals totals[MEMSTALL_CAUSES] = {};
__u64 table_full = 0;
/* Ends without a begin (the tool started inside a window). */
__u64 unpaired_ends = 0;
/* Off-CPU memstall intervals whose kernel stack could not be read (charged to "other"). */
__u64 stack_failures = 0;
/* Threads in a balance_dirty_pages pause: while there are none, sched_switch does not look
 * at the task being switched in unless it is in a memstall. */
__u64 dirty_sleepers = 0;
/* Threads asleep in a stall outside a memstall (a swap-in's I/O wait; without PSI also a
 * thrashing wait or the memory.high throttle): while there are none, the switch-in of a task
 * in an I/O wait (without PSI: of any task) is not looked at. */
__u64 unmarked_sleepers = 0;
/* Threads switched out inside a memstall or a swap-in's I/O wait and not yet seen switched in:
 * while there are none, sched_switch does not look up a task leaving the CPU outside a stall. */
__u64 off_sleepers = 0;
/* The same per slot of thread ids (tid % OFF_SLOTS): a task leaving the CPU outside a stall is
 * looked up only while its slot counts an open stall. With a reader stalled in reclaim, every
 * switch of the machine took that lookup: sched_switch +28 ns over an empty program against
 * +13 with no stall open (bench/run_bench.py, "memstall steady"). Tasks sharing a slot cost a
 * lookup, never a missed stall. */
#define OFF_SLOTS 1024
__u32 off_by_slot[OFF_SLOTS] = {};
/* Off-CPU stalls whose switch-in no sched_switch showed (see stall_switch_in_unseen()). */
__u64 unseen_switch_ins = 0;
/* classify_by_name: return addresses the kernel could not name (their sleeps charged to no
 * function's cause). */
__u64 frames_unnamed = 0;

/* A stall's stacks (--stacks), or -1 each. */
struct stall_stacks {
    __s32 kernel;
    __s32 user;
};

struct thread_stall {
    __u64 window_start[WINDOWS]; /* begin of an open tracepoint window; 0: none */
    __u64 off_start;             /* switched out inside a memstall; 0: not */
    __u64 dirty_start;           /* balance_dirty_pages pause began; 0: none */
    __u64 off_runtime;           /* the task's se.sum_exec_runtime at off_start */
    __u64 dirty_runtime;         /* the same, at the dirty pause's sleep (dirty_asleep) */
    __u32 off_cause;
    __u32 dirty_asleep; /* switched out (not preempted) since the pause began */
    __u32 off_unmarked; /* the off-CPU interval is outside a memstall (unmarked_sleepers) */
    __u32 pad;
    struct stall_stacks off_stacks, dirty_stacks;
};

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 4096);
    __type(key, __u32);
    __type(value, struct thread_stall);
} threads SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 16384);
    __type(key, struct memstall_key);
    __type(value, struct memstall_value);
} stalls SEC(".maps");

/* Sized by user space: one entry without --stacks. */
MEMLAT_STACK_TRACE_MAP(stack_traces);

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 1);
    __type(key, struct memstall_stack_key);
    __type(value, struct memstall_stack_value);
} stack_totals SEC(".maps");

/* The current task's stacks, with --stacks. */
static __always_inline struct stall_stacks current_stacks(void *ctx) {
    struct stall_stacks stacks = {-1, -1};

    if (collect_stacks && !stacks_paused) {
        stacks.kernel = stack_id(ctx, &stack_traces, 0);
        stacks.user = stack_id(ctx, &stack_traces, BPF_F_USER_STACK);
    }
    return stacks;
}

static __always_inline bool task_selected(struct task_struct *task) {
    if (filter_pid && BPF_CORE_READ(task, tgid) != filter_pid)
        return false;
    if (filter_tid && BPF_CORE_READ(task, pid) != filter_tid)
        return false;
    return !filter_cgroup_on ||
           cgroup_is_under(task_cgroup(task, filter_on_v1), filter_cgroup_id, filter_cgroup_level);
}

/* --stacks: one stall of `ns` under its pair of stacks, per process and cause. */
static __noinline void account_stacks(struct task_struct *task, __u32 cause, __u64 ns,
                                      __s32 kernel_stack, __s32 user_stack) {
    struct memstall_stack_key key = {
        .cause = cause, .kernel_stack = kernel_stack, .user_stack = user_stack};
    struct memstall_stack_value *v;

    key.pid = BPF_CORE_READ(task, tgid);
    v = bpf_map_lookup_elem(&stack_totals, &key);
    if (!v) {
        struct memstall_stack_value zero = {};

        bpf_core_read(&zero.comm, sizeof(zero.comm), &task->comm);
        zero.cgroup_id = cgroup_id(task_cgroup(task, memcg_on_v1));
        v = map_insert_lookup(&stack_totals, &key, &zero, &table_full);
        if (!v)
            return;
    }
    __sync_fetch_and_add(&v->stalls, 1);
    __sync_fetch_and_add(&v->total_ns, ns);
}

/* Adds one stall of `ns` to the cause's total and the thread's. A global subprogram, so that
 * the verifier checks it once rather than again at every call site and path of every program
 * that ends a stall (in sched_switch's program that was 1481 of 4595 instructions verified).
 * Its arguments are therefore plain numbers (five at most): the task's address
 * (task_address()), the thread id and cause in one (tid_cause()), the stall's two stack ids,
 * kernel's in the high half, and the pages a reclaim window freed. It returns 0: a global
 * subprogram returns a number. */
__noinline int account_stall(__u64 task_address, __u64 tid_cause, __u64 ns, __u64 stacks,
                             __u64 pages) {
    struct task_struct *task = (struct task_struct *)task_address;
    const __u32 cause = (__u32)tid_cause;
    struct memstall_key key = {.tid = (__u32)(tid_cause >> 32),
                               .cause = cause & (MEMSTALL_CAUSES - 1)};
    struct memstall_value *v = bpf_map_lookup_elem(&stalls, &key);

    __sync_fetch_and_add(&totals[cause & (MEMSTALL_CAUSES - 1)].stalls, 1);
    __sync_fetch_and_add(&totals[cause & (MEMSTALL_CAUSES - 1)].total_ns, ns);
    if (!v) {
        struct memstall_value zero = {};

        zero.pid = BPF_CORE_READ(task, tgid);
        zero.cgroup_id = cgroup_id(task_cgroup(task, memcg_on_v1));
        bpf_core_read(&zero.comm, sizeof(zero.comm), &task->comm);
        v = map_insert_lookup(&stalls, &key, &zero, &table_full);
        if (!v)
            return 0;
    }
    __sync_fetch_and_add(&v->stalls, 1);
    __sync_fetch_and_add(&v->total_ns, ns);
    if (pages)
        __sync_fetch_and_add(&v->reclaimed_pages, pages);
    if (ns > v->max_ns)
        v->max_ns = ns; /* a rare lost race only understates the maximum */
    if (collect_stacks && !stacks_paused)
        account_stacks(task, key.cause, ns, (__s32)(stacks >> 32), (__s32)stacks);
    return 0;
}

/* A task pointer as a number. tp_btf's task pointers are typed and a global subprogram takes
 * no typed pointer before Linux 6.8; a copy read back through a helper is untyped. */
static __always_inline __u64 task_address(struct task_struct *task) {
    __u64 address = 0;

    bpf_probe_read_kernel(&address, sizeof(address), &task);
    return address;
}

/* The thread and the cause in one number, as account_stall() takes them. */
static __always_inline __u64 tid_cause(__u32 tid, __u32 cause) {
    return (__u64)tid << 32 | cause;
}

/* The stall's two stack ids in one number, as account_stall() takes them. */
static __always_inline __u64 packed_stacks(const struct stall_stacks *stacks) {
    return (__u64)(__u32)stacks->kernel << 32 | (__u32)stacks->user;
}

static __always_inline void account(struct task_struct *task, __u32 tid, __u32 cause, __u64 ns,
                                    struct stall_stacks *stacks) {
    account_stall(task_address(task), tid_cause(tid, cause), ns, packed_stacks(stacks), 0);
}

static __always_inline struct thread_stall *thread_get(__u32 tid, bool create) {
    static const struct thread_stall idle = {};
    struct thread_stall *state = bpf_map_lookup_elem(&threads, &tid);

    if (state || !create)
        return state;
    return map_insert_lookup(&threads, &tid, &idle, &table_full);
}

/* Nothing open any more: the entry goes, so the table holds only threads inside a stall. */
static __always_inline void thread_put(__u32 tid, struct thread_stall *state) {
    for (int w = 0; w < WINDOWS; w++)
        if (state->window_start[w])
            return;
    if (!state->off_start && !state->dirty_start)
        bpf_map_delete_elem(&threads, &tid);
}

/* ---- tracepoint windows ---- */

static __always_inline int window_begin(void *ctx, __u32 window) {
    /* First: the window starts when the tracepoint fires, not after the filters and the
     * thread table below (a few us with cold caches inside reclaim, which window_end, reading
     * its clock first, does not pay). */
    __u64 now = bpf_ktime_get_ns();
    struct task_struct *task = (struct task_struct *)bpf_get_current_task();
    __u32 tid = (__u32)bpf_get_current_pid_tgid();
    struct thread_stall *state;

    if (window >= WINDOWS)
        return 0;
    /* Compaction by kcompactd or proactive compaction stalls no task. */
    if (window == MEMSTALL_COMPACTION && (BPF_CORE_READ(task, flags) & PF_KTHREAD))
        return 0;
    if (!task_selected(task))
        return 0;
    state = thread_get(tid, true);
    if (state)
        state->window_start[window] = now;
    return 0;
}

/* A window's end; `pages`: what a reclaim window freed (its tracepoint's nr_reclaimed). */
static __always_inline int window_end_freed(void *ctx, __u32 window, __u64 pages) {
    __u64 now = bpf_ktime_get_ns(), start;
    __u32 tid = (__u32)bpf_get_current_pid_tgid();
    struct thread_stall *state;

    if (window >= WINDOWS)
        return 0;
    state = thread_get(tid, false);
    if (!state) {
        /* A selected thread's end without its begin, as drsnoop and compactsnoop count
         * them: a window open when the tool started, or a begin the full table had no room
         * for. */
        struct task_struct *task = (struct task_struct *)bpf_get_current_task();

        if (!(window == MEMSTALL_COMPACTION && (BPF_CORE_READ(task, flags) & PF_KTHREAD)) &&
            task_selected(task))
            __sync_fetch_and_add(&unpaired_ends, 1);
        return 0;
    }
    start = state->window_start[window];
    state->window_start[window] = 0;
    thread_put(tid, state);
    if (!start || now < start) {
        if (!start)
            __sync_fetch_and_add(&unpaired_ends, 1);
        return 0;
    }
    struct stall_stacks stacks = current_stacks(ctx);

    /* bpf_get_current_task() gives a number already: no copy through a helper (at every
     * window's end). */
    account_stall(bpf_get_current_task(), tid_cause(tid, window), now - start,
                  packed_stacks(&stacks), pages);
    return 0;
}

static __always_inline int window_end(void *ctx, __u32 window) {
    return window_end_freed(ctx, window, 0);
}

/* Three ways into each tracepoint; user space attaches the first the kernel accepts. None
 * reads an argument. */
#define WINDOW_PROGRAMS(name, group, tracepoint, handler, window)                                  \
    SEC("tp_btf/" #tracepoint)                                                                     \
    int name##_btf(void *ctx) {                                                                    \
        return handler(ctx, window);                                                               \
    }                                                                                              \
    SEC("raw_tp/" #tracepoint)                                                                     \
    int name##_raw(void *ctx) {                                                                    \
        return handler(ctx, window);                                                               \
    }                                                                                              \
    SEC("tracepoint/" #group "/" #tracepoint)                                                      \
    int name##_tp(void *ctx) {                                                                     \
        handler(ctx, window);                                                                      \
        return KEEP_EVENT;                                                                         \
    }

WINDOW_PROGRAMS(direct_reclaim_begin, vmscan, mm_vmscan_direct_reclaim_begin, window_begin,
                MEMSTALL_DIRECT_RECLAIM)
MEMLAT_RECLAIM_END_PROGRAMS(direct_reclaim, MEMSTALL_DIRECT_RECLAIM, window_end_freed)
WINDOW_PROGRAMS(memcg_reclaim_begin, vmscan, mm_vmscan_memcg_reclaim_begin, window_begin,
                MEMSTALL_MEMCG_RECLAIM)
MEMLAT_RECLAIM_END_PROGRAMS(memcg_reclaim, MEMSTALL_MEMCG_RECLAIM, window_end_freed)
WINDOW_PROGRAMS(compact_begin, compaction, mm_compaction_begin, window_begin, MEMSTALL_COMPACTION)
WINDOW_PROGRAMS(compact_end, compaction, mm_compaction_end, window_end, MEMSTALL_COMPACTION)

/* ---- dirty throttling ---- */

/* The task's last pause ended without a sleep: its timer fired before the task left the CPU
 * (a pause of one jiffy ends at the next tick, which may come microseconds after the
 * tracepoint; 1 of 24-85 pauses in a run on 6.18 at HZ=250). One stall of no measurable
 * length, so that the stalls are the kernel's pauses. */
static __always_inline void dirty_pause_unslept(struct task_struct *task, __u32 tid,
                                                struct thread_stall *state) {
    account(task, tid, MEMSTALL_DIRTY, 0, &state->dirty_stacks);
}

static __noinline void dirty_switch_in_unseen(struct task_struct *task, __u32 tid,
                                              struct thread_stall *state, __u64 now);

/* balance_dirty_pages traced a decision; a positive pause is followed by a sleep of that many
 * jiffies (a pause of 0 or less, the tracepoint's other use, sleeps not). */
static __always_inline int dirty_pause(void *ctx, long pause) {
    /* First, as window_begin() does: the pause starts at the tracepoint, not after the filters
     * and the thread table (in the VMs ftrace's pauses were up to 1.1 ms longer). */
    __u64 now = bpf_ktime_get_ns();
    struct task_struct *task = (struct task_struct *)bpf_get_current_task();
    __u32 tid = (__u32)bpf_get_current_pid_tgid();
    struct thread_stall *state;

    if (pause <= 0 || !task_selected(task))
        return 0;
    state = thread_get(tid, true);
    if (!state)
        return 0;
    if (state->dirty_start && state->dirty_asleep)
        dirty_switch_in_unseen(task, tid, state, now);
    if (!state->dirty_start)
        __sync_fetch_and_add(&dirty_sleepers, 1);
    else
        dirty_pause_unslept(task, tid, state);
    state->dirty_stacks = current_stacks(ctx);
    state->dirty_start = now;
    state->dirty_asleep = 0;
    return 0;
}

/* The pause's position: kernel_args.bpf.h (dirty_pause_arg). */
SEC("tp_btf/balance_dirty_pages")
int dirty_btf(void *ctx) {
    return dirty_pause(ctx, (long)tracepoint_arg(ctx, dirty_pause_arg));
}

SEC("raw_tp/balance_dirty_pages")
int dirty_raw(void *ctx) {
    return dirty_pause(ctx, (long)tracepoint_arg(ctx, dirty_pause_arg));
}

/* The classic tracepoint has the pause in milliseconds; only its sign matters here. */
SEC("tracepoint/writeback/balance_dirty_pages")
int dirty_tp(struct trace_event_raw_balance_dirty_pages *ctx) {
    dirty_pause(ctx, BPF_CORE_READ(ctx, pause));
    return KEEP_EVENT;
}

/* ---- sched_switch: memstall sleeps, and the end of dirty pauses ---- */

/* The stack of a sleep being classified, and the cause found: in a per-CPU map, as a
 * bpf_loop() callback cannot index its caller's stack. */
struct classify_state {
    __u64 frames[MEMSTALL_STACK_DEPTH];
    __u32 frames_taken;
    __u32 cause;
    char name[MEMSTALL_NAME_LEN]; /* classify_by_name: the frame's function */
};

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct classify_state);
} classify_scratch SEC(".maps");

/* Whether the return address `pc` lies in range r. A return address is past its call: inside
 * (start, end]. One unsigned comparison (pc - start - 1 wraps above any range for pc <=
 * start): one branch per range where two made the verifier walk twice the paths. */
static __always_inline bool frame_in(__u64 pc, int r) {
    return pc - ranges[r].start - 1 < ranges[r].end - ranges[r].start;
}

/* The cause of the range a return address falls in, else "other". */
static __always_inline __u32 range_cause(__u64 pc) {
    for (int r = 0; r < MEMSTALL_MAX_RANGES; r++) {
        if (r >= nr_ranges)
            break;
        if (frame_in(pc, r))
            return ranges[r].cause;
    }
    return MEMSTALL_OTHER;
}

/* Whether a return address lies in a swap-in function: ranges[0, nr_swapin_ranges). */
static __always_inline bool in_swapin(__u64 pc) {
    for (int r = 0; r < MEMSTALL_MAX_RANGES; r++) {
        if (r >= nr_swapin_ranges)
            break;
        if (frame_in(pc, r))
            return true;
    }
    return false;
}

struct classify_loop {
    struct classify_state *state;
};

/* bpf_loop() callback of the first pass: frame `f`; stops at a frame in a swap-in function. */
static long swapin_frame(__u64 f, void *data) {
    struct classify_state *st = ((struct classify_loop *)data)->state;

    if (f >= MEMSTALL_STACK_DEPTH || f >= st->frames_taken)
        return 1;
    if (!in_swapin(st->frames[f]))
        return 0;
    st->cause = MEMSTALL_SWAPIN;
    return 1;
}

/* classify_by_name: the cause of each return address, as its function's name decided when it
 * was first seen. A stalled task sleeps under a few hundred distinct return addresses; the
 * kernel's name lookup (a binary search of kallsyms, and a string to hash) is paid once each. */
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, 1); /* sized by user space with classify_by_name */
    __type(key, __u64);
    __type(value, __u32);
} frame_causes SEC(".maps");

/* The hash of st->name, as memstall.h says. */
static __always_inline __u64 name_hash(const struct classify_state *st) {
    __u64 hash = MEMSTALL_NAME_HASH_START;

    for (int i = 0; i < MEMSTALL_NAME_LEN; i++) {
        char c = st->name[i];

        if (c == 0 || c == '.')
            break;
        hash ^= (unsigned char)c;
        hash *= MEMSTALL_NAME_HASH_PRIME;
    }
    return hash;
}

/* The cause of the function a return address lies in, by its name. */
static __always_inline __u32 named_frame_cause(struct classify_state *st, __u64 pc) {
    /* A return address is past its call, which may have been the function's last
     * instruction: the call is at pc - 1 (as frame_in()'s (start, end]). */
    static const char format[] = "%ps";
    __u64 args[1] = {pc - 1};
    __u32 *known = bpf_map_lookup_elem(&frame_causes, &pc);
    __u32 cause = MEMSTALL_OTHER;
    __u64 hash;

    if (known)
        return *known;
    if (bpf_snprintf(st->name, sizeof(st->name), format, args, sizeof(args)) <= 0) {
        __sync_fetch_and_add(&frames_unnamed, 1);
        return MEMSTALL_OTHER;
    }
    hash = name_hash(st);
    for (int r = 0; r < MEMSTALL_MAX_RANGES; r++) {
        if (r >= nr_named)
            break;
        if (named[r].name_hash == hash) {
            cause = named[r].cause;
            break;
        }
    }
    bpf_map_update_elem(&frame_causes, &pc, &cause, BPF_ANY);
    return cause;
}

/* bpf_loop() callback of the walk by name: frame `f`; one pass, as each frame costs a map
 * lookup here. A swap-in frame anywhere wins (see classify()) and stops the walk; otherwise
 * the innermost frame with a cause. */
static long named_frame(__u64 f, void *data) {
    struct classify_state *st = ((struct classify_loop *)data)->state;
    __u32 cause;

    if (f >= MEMSTALL_STACK_DEPTH || f >= st->frames_taken)
        return 1;
    cause = named_frame_cause(st, st->frames[f]);
    if (cause == MEMSTALL_SWAPIN) {
        st->cause = MEMSTALL_SWAPIN;
        return 1;
    }
    if (st->cause == MEMSTALL_OTHER)
        st->cause = cause;
    return 0;
}

/* bpf_loop() callback of the second pass: frame `f`; stops at the first frame in a range. */
static long classify_frame(__u64 f, void *data) {
    struct classify_state *st = ((struct classify_loop *)data)->state;
    __u32 cause;

    if (f >= MEMSTALL_STACK_DEPTH || f >= st->frames_taken)
        return 1;
    cause = range_cause(st->frames[f]);
    if (cause == MEMSTALL_OTHER)
        return 0;
    st->cause = cause;
    return 1;
}

/* How a task leaving the CPU sleeps, as far as memstall cares: in a memstall (PSI's mark); in
 * an I/O wait; without PSI, in a killable sleep (the memory.high throttle's kind). */
enum sleep_kind { SLEEP_MEMSTALL, SLEEP_IO, SLEEP_KILLABLE };

/* The cause a sleep's innermost classified frame gives it: any, in a memstall; in a killable
 * sleep only the memory.high throttle (a killable sleep elsewhere is no stall). */
static __always_inline __u32 unmarked_cause(__u32 sleep, __u32 cause) {
    if (sleep == SLEEP_MEMSTALL)
        return cause;
    return cause == MEMSTALL_MEMORY_HIGH ? cause : MEMSTALL_CAUSES;
}

/* 1 when the return address `pc` lies in (start, end], else 0, without a branch. Kernel text
 * lies within 2 GiB, so pc - start - 1 is below 2^31, or wrapped above 2^63 when pc <= start
 * (masked out); an unused range (start == end) holds nothing. */
static __always_inline __u64 in_range(__u64 pc, __u64 start, __u64 end) {
    __u64 distance = pc - start - 1;

    return ((distance - (end - start)) >> 63) & ~(distance >> 63) & 1;
}

/* The walk of kernels without bpf_loop() (before 5.17), unrolled and without a branch: every
 * frame against every range, the results combined arithmetically (a swap-in frame anywhere;
 * else the innermost frame with a cause). With a branch per frame and range to leave early,
 * the verifier walked 231,425 instructions of sched_switch's program and took 0.32 s of
 * memstall's start-up (6.18); straight, a few thousand, once. It costs the run the whole
 * walk, 24 x 16 range tests (some microseconds), for a stalled task's switch-out only. */
static __always_inline __u32 classify_unrolled(struct classify_state *st, __u32 sleep, __u32 none) {
    __u64 swapin = 0, found = 0, chosen = 0;

    for (int f = 0; f < MEMSTALL_STACK_DEPTH; f++) {
        /* Past the frames taken, 0: bpf_get_stack() zeroes the rest of the buffer (and a
         * comparison with frames_taken here would be a branch per frame). */
        __u64 pc = st->frames[f];
        __u64 frame_hit = 0, frame_cause = 0;

        for (int r = 0; r < MEMSTALL_MAX_RANGES; r++) {
            __u64 hit = in_range(pc, ranges[r].start, ranges[r].end);
            __u64 cause = ranges[r].cause;

            frame_hit |= hit;
            frame_cause |= -hit & cause;
            /* (cause ^ SWAPIN) - 1 has its top bit set only for cause == SWAPIN. */
            swapin |= hit & ((((cause ^ MEMSTALL_SWAPIN) - 1) >> 63) & 1);
        }
        chosen |= -(frame_hit & ~found & 1) & frame_cause;
        found |= frame_hit;
    }
    if (swapin)
        return MEMSTALL_SWAPIN;
    if (sleep == SLEEP_IO || !found)
        return none;
    return unmarked_cause(sleep, (__u32)chosen);
}

/* The cause of the current task's sleep: swap-in when any kernel frame lies in a swap-in
 * function (a swap-in waits for its page in folio_wait_bit_common, which is also where a file
 * refault thrashes: the swap-in frames further out tell them apart); else the innermost frame
 * inside one of the ranges; else "other", or MEMSTALL_CAUSES (none) for an I/O sleep. Two
 * passes, each stopping at its first match: one pass keeping the best match so far would
 * carry that state through every frame, and the verifier could not prune its paths.
 * With `looped` the frames are walked by bpf_loop() callbacks (5.17), which the verifier
 * checks once: unrolled, the 24 frames times up to 16 ranges, each with its own way out, took
 * it 11 ms of memstall's start-up (6.18). The programs that walk so (switch_*) come first in
 * the hook choices; older kernels refuse them, even where the call is never reached (5.10
 * refuses the callback's address), and get the unrolled ones (switch_unrolled_*). */
static __always_inline __u32 classify(void *ctx, bool looped, __u32 sleep, bool thrashing) {
    /* The cause when no frame tells one. */
    __u32 none = sleep == SLEEP_MEMSTALL          ? MEMSTALL_OTHER
                 : sleep == SLEEP_IO && thrashing ? MEMSTALL_THRASHING
                                                  : MEMSTALL_CAUSES;
    __u32 zero = 0;
    struct classify_state *st = bpf_map_lookup_elem(&classify_scratch, &zero);
    long bytes;

    if (!st)
        return none;
    bytes = bpf_get_stack(ctx, st->frames, sizeof(st->frames), 0);
    if (bytes <= 0) {
        __sync_fetch_and_add(&stack_failures, 1);
        return none;
    }
    st->frames_taken = bytes / 8;
    st->cause = MEMSTALL_OTHER;
    if (looped && classify_by_name) {
        struct classify_loop loop = {.state = st};

        bpf_loop(MEMSTALL_STACK_DEPTH, named_frame, &loop, 0);
        if (st->cause == MEMSTALL_SWAPIN)
            return MEMSTALL_SWAPIN;
        return sleep == SLEEP_IO ? none : unmarked_cause(sleep, st->cause);
    }
    if (looped) {
        struct classify_loop loop = {.state = st};

        bpf_loop(MEMSTALL_STACK_DEPTH, swapin_frame, &loop, 0);
        if (st->cause == MEMSTALL_SWAPIN)
            return MEMSTALL_SWAPIN;
        if (sleep == SLEEP_IO)
            return none;
        bpf_loop(MEMSTALL_STACK_DEPTH, classify_frame, &loop, 0);
        return unmarked_cause(sleep, st->cause);
    }
    return classify_unrolled(st, sleep, none);
}

/* The off-CPU stall of `task` (now running: it is leaving the CPU, or exiting) ended at a
 * switch-in that no sched_switch showed. On this 6.18 guest a task is now and then back on a
 * CPU without a sched_switch naming it as next: in the thrashing test 0-8 of some 2,000-6,000
 * switch-ins of the reader were missing to memstall's program (recursion_misses 0), to
 * bpftrace's and to the tracefs sched_switch event alike, each time followed by the task's
 * next switch-out. The stall was then lost whole (the next switch-out overwrote it: the
 * thrashing CI failure, 19 of 20 stalls). It is the time since the switch-out less the time
 * the task has run since, which the scheduler keeps (se.sum_exec_runtime, updated at every
 * switch-out and tick; it leaves out the IRQ and steal time of those runs, a few us). */
static __always_inline __u64 unseen_stall_ns(struct task_struct *task, __u64 start,
                                             __u64 runtime_at_sleep, __u64 now) {
    __u64 ran = BPF_CORE_READ(task, se.sum_exec_runtime) - runtime_at_sleep;
    __u64 wall = now - start;

    __sync_fetch_and_add(&unseen_switch_ins, 1);
    return now > start && ran < wall ? wall - ran : 0;
}

/* An off-CPU stall of thread `tid` opened (+1) or ended (-1). */
static __always_inline void off_count(__u32 tid, int delta) {
    __sync_fetch_and_add(&off_sleepers, delta);
    __sync_fetch_and_add(&off_by_slot[tid & (OFF_SLOTS - 1)], delta);
}

static __noinline void stall_switch_in_unseen(struct task_struct *task, __u32 tid,
                                              struct thread_stall *state, __u64 now) {
    __u64 ns = unseen_stall_ns(task, state->off_start, state->off_runtime, now);

    if (ns)
        account(task, tid, state->off_cause, ns, &state->off_stacks);
    state->off_start = 0;
    off_count(tid, -1);
    if (state->off_unmarked) {
        state->off_unmarked = 0;
        __sync_fetch_and_add(&unmarked_sleepers, -1);
    }
}

/* The same for a dirty pause: the task slept in it and is running again (at its next pause, a
 * switch-out, or its exit) without a sched_switch that showed it back on the CPU. Before, the
 * pause was overwritten by the next one, or dropped at exit: one pause short. */
static __noinline void dirty_switch_in_unseen(struct task_struct *task, __u32 tid,
                                              struct thread_stall *state, __u64 now) {
    account(task, tid, MEMSTALL_DIRTY,
            unseen_stall_ns(task, state->dirty_start, state->dirty_runtime, now),
            &state->dirty_stacks);
    state->dirty_start = 0;
    state->dirty_asleep = 0;
    __sync_fetch_and_add(&dirty_sleepers, -1);
}

/* `prev` (the current task) leaves the CPU while in a memstall, or outside one in an I/O wait
 * or (without PSI) a killable sleep: `sleep`. */
static __always_inline void memstall_out(void *ctx, struct task_struct *prev, bool looped,
                                         __u32 sleep) {
    /* Before the stack walk: what follows takes time (a lot of it in an emulated guest) and is
     * not the task's. */
    __u64 now = bpf_ktime_get_ns();
    __u32 tid = BPF_CORE_READ(prev, pid);
    /* Kernel threads' I/O (writeback, journals) is nobody's swap-in. */
    bool kthread_io = sleep != SLEEP_MEMSTALL && (BPF_CORE_READ(prev, flags) & PF_KTHREAD);
    /* Without PSI a thrashing wait is an I/O wait the kernel marks so (6.1+). */
    bool thrashing = false;
    struct thread_stall *state;
    __u32 cause;

    if (kthread_io && !off_sleepers)
        return;
    state = thread_get(tid, false);
    /* Still open: the task ran since without memstall seeing it switched in. */
    if (state && state->off_start)
        stall_switch_in_unseen(prev, tid, state, now);
    if (kthread_io) {
        if (state)
            thread_put(tid, state);
        return;
    }
    if (state) {
        /* Inside a tracepoint window: its time is counted there. */
        for (int w = 0; w < WINDOWS; w++)
            if (state->window_start[w])
                return;
    }
    if (!task_selected(prev))
        return;
    if (without_psi && sleep == SLEEP_IO && bpf_core_field_exists(prev->in_thrashing))
        thrashing = BPF_CORE_READ_BITFIELD_PROBED(prev, in_thrashing);
    cause = classify(ctx, looped, sleep, thrashing);
    /* An I/O wait that is not a swap-in's; a memstall around a dirty pause would be timed
     * twice. */
    if (cause >= MEMSTALL_CAUSES || cause == MEMSTALL_DIRTY) {
        if (state)
            thread_put(tid, state);
        return;
    }
    if (!state)
        state = thread_get(tid, true);
    if (!state)
        return;
    state->off_stacks = current_stacks(ctx);
    state->off_start = now;
    state->off_runtime = BPF_CORE_READ(prev, se.sum_exec_runtime);
    state->off_cause = cause;
    off_count(tid, 1);
    if (sleep != SLEEP_MEMSTALL && !state->off_unmarked) {
        state->off_unmarked = 1;
        __sync_fetch_and_add(&unmarked_sleepers, 1);
    }
}

/* `task` is switched in, or (asleep) a dirty sleeper is switched out. */
static __noinline void thread_switched(struct task_struct *task, bool in, bool asleep,
                                       bool stalls) {
    __u32 tid = BPF_CORE_READ(task, pid);
    struct thread_stall *state = thread_get(tid, false);
    __u64 now;

    if (!state)
        return;
    if (!in) {
        bool ended = false;

        /* Leaving the CPU after the pause's sleep without a switch-in seen in between. */
        if (state->dirty_start && state->dirty_asleep) {
            dirty_switch_in_unseen(task, tid, state, bpf_ktime_get_ns());
            ended = true;
        } else if (state->dirty_start && asleep) {
            state->dirty_asleep = 1;
            state->dirty_runtime = BPF_CORE_READ(task, se.sum_exec_runtime);
        }
        /* Leaving the CPU outside a stall with one still open: its switch-in went unseen
         * (a task going into a stall had it closed by memstall_out()). */
        if (state->off_start && !stalls) {
            stall_switch_in_unseen(task, tid, state, bpf_ktime_get_ns());
            ended = true;
        }
        if (ended)
            thread_put(tid, state);
        return;
    }
    now = bpf_ktime_get_ns();
    if (state->off_start) {
        if (now > state->off_start)
            account(task, tid, state->off_cause, now - state->off_start, &state->off_stacks);
        state->off_start = 0;
        off_count(tid, -1);
    }
    if (state->off_unmarked) {
        state->off_unmarked = 0;
        __sync_fetch_and_add(&unmarked_sleepers, -1);
    }
    if (state->dirty_start && state->dirty_asleep) {
        if (now > state->dirty_start)
            account(task, tid, MEMSTALL_DIRTY, now - state->dirty_start, &state->dirty_stacks);
        state->dirty_start = 0;
        state->dirty_asleep = 0;
        __sync_fetch_and_add(&dirty_sleepers, -1);
    }
    thread_put(tid, state);
}

/* One subprogram each way of walking the stack, for the programs of each. */
static __noinline void memstall_out_looped(void *ctx, struct task_struct *prev, __u32 sleep) {
    memstall_out(ctx, prev, true, sleep);
}

static __noinline void memstall_out_unrolled(void *ctx, struct task_struct *prev, __u32 sleep) {
    memstall_out(ctx, prev, false, sleep);
}

/* The scheduler state of a task leaving the CPU: __state from 5.14, state before. */
struct task_struct___pre_5_14 {
    long state;
} __attribute__((preserve_access_index));

/* TASK_UNINTERRUPTIBLE | TASK_WAKEKILL, what schedule_timeout_killable() sleeps in. */
#define TASK_KILLABLE_STATE 0x102

static __always_inline bool killable_sleep(struct task_struct *task) {
    if (bpf_core_field_exists(task->__state))
        return BPF_CORE_READ(task, __state) == TASK_KILLABLE_STATE;
    return BPF_CORE_READ((struct task_struct___pre_5_14 *)task, state) == TASK_KILLABLE_STATE;
}

/* prev_in, next_in: in a memstall; prev_io, next_io: in an I/O wait (io_schedule keeps the
 * bit set until the task runs again). */
static __always_inline int on_switch(void *ctx, bool preempt, struct task_struct *prev,
                                     struct task_struct *next, bool prev_in, bool next_in,
                                     bool prev_io, bool next_io, bool looped, bool direct) {
    /* A task preempted on its way into an I/O sleep (io_schedule_prepare() flushes the plug
     * with in_iowait set) waits for the CPU, not for I/O. */
    bool prev_stalls = prev_in || (prev_io && !preempt);
    __u32 sleep = prev_in ? SLEEP_MEMSTALL : SLEEP_IO;

    /* Without PSI: a user task's killable sleep may be the memory.high throttle. */
    if (without_psi && !prev_stalls && !preempt && killable_sleep(prev)) {
        prev_stalls = true;
        sleep = SLEEP_KILLABLE;
    }
    if (prev_stalls) {
        if (looped)
            memstall_out_looped(ctx, prev, sleep);
        else
            memstall_out_unrolled(ctx, prev, sleep);
    }
    /* A task leaving the CPU outside a stall is looked up only while an off-CPU stall is
     * open in its slot (its switch-in may have gone unseen). tp_btf reads its id directly. */
    if (dirty_sleepers ||
        (off_sleepers && !prev_stalls &&
         off_by_slot[(direct ? prev->pid : BPF_CORE_READ(prev, pid)) & (OFF_SLOTS - 1)]))
        thread_switched(prev, false, !preempt, prev_stalls);
    /* Without PSI a throttled task wakes without a mark: any switch-in is looked at while one
     * sleeps. */
    if (next_in || dirty_sleepers || (unmarked_sleepers && (next_io || without_psi)))
        thread_switched(next, true, false, false);
    return 0;
}

/* The hot path. in_memstall (CONFIG_PSI) and in_iowait are bit fields: a load and a mask
 * each, direct where tp_btf's task pointers allow it, through probe reads on raw_tp. Without
 * in_memstall, or without_psi, the I/O sleeps (and without_psi the killable ones) are told. */
static __always_inline int switch_body(void *ctx, bool preempt, struct task_struct *prev,
                                       struct task_struct *next, bool looped, bool direct) {
    bool prev_io = KERNEL_BITFIELD(direct, prev, in_iowait);
    bool next_io = KERNEL_BITFIELD(direct, next, in_iowait);

    if (without_psi || !bpf_core_field_exists(prev->in_memstall))
        return on_switch(ctx, preempt, prev, next, false, false, prev_io, next_io, looped, direct);
    return on_switch(ctx, preempt, prev, next, KERNEL_BITFIELD(direct, prev, in_memstall),
                     KERNEL_BITFIELD(direct, next, in_memstall), prev_io, next_io, looped, direct);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(switch_btf, bool preempt, struct task_struct *prev, struct task_struct *next) {
    return switch_body(ctx, preempt, prev, next, true, true);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(switch_raw, bool preempt, struct task_struct *prev, struct task_struct *next) {
    return switch_body(ctx, preempt, prev, next, true, false);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(switch_unrolled_btf, bool preempt, struct task_struct *prev,
             struct task_struct *next) {
    return switch_body(ctx, preempt, prev, next, false, true);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(switch_unrolled_raw, bool preempt, struct task_struct *prev,
             struct task_struct *next) {
    return switch_body(ctx, preempt, prev, next, false, false);
}

/* What an exiting thread left open goes with it. */
static __always_inline void thread_exit(void) {
    __u32 tid = (__u32)bpf_get_current_pid_tgid();
    struct thread_stall *state = bpf_map_lookup_elem(&threads, &tid);

    if (!state)
        return;
    if (state->dirty_start && state->dirty_asleep) {
        dirty_switch_in_unseen((struct task_struct *)bpf_get_current_task(), tid, state,
                               bpf_ktime_get_ns());
    } else if (state->dirty_start) {
        dirty_pause_unslept((struct task_struct *)bpf_get_current_task(), tid, state);
        __sync_fetch_and_add(&dirty_sleepers, -1);
    }
    /* Its runtime lacks the part since the last tick: at most one tick too much stall. */
    if (state->off_start)
        stall_switch_in_unseen((struct task_struct *)bpf_get_current_task(), tid, state,
                               bpf_ktime_get_ns());
    else if (state->off_unmarked)
        __sync_fetch_and_add(&unmarked_sleepers, -1);
    bpf_map_delete_elem(&threads, &tid);
}

SEC("raw_tp/sched_process_exit")
int exit_raw(void *ctx) {
    thread_exit();
    return 0;
}

SEC("tracepoint/sched/sched_process_exit")
int exit_tp(void *ctx) {
    thread_exit();
    return KEEP_EVENT;
}
