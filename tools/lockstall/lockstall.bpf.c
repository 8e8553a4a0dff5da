// SPDX-License-Identifier: GPL-2.0
/* lockstall: waits for an address space's mmap_lock, and who held it meanwhile.
 *
 * The kernel traces every mmap_lock operation: start_locking before it blocks (or not),
 * acquire_returned once it holds the lock (or a killable wait gave up), released. A thread's
 * wait is start to acquire, its hold acquire to release, both kept in its entry of a per-thread
 * map. A hold of at least min_hold_ns is written, with the kernel stack that ended it, into a
 * small ring kept per address space; a wait of at least min_wait_ns is a record that names the
 * holds of that address space released while it waited: the holders it waited behind (the
 * writer, the readers a queued writer waited for). A holder that still holds the lock when the
 * wait ends shares it with the waiter (readers) and did not make it wait.
 *
 * A thread that holds a lock and enters direct or memory-cgroup reclaim, or compaction, has
 * that time added to its hold: the holder's own memory stall, which its waiters waited for. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "cgroup.bpf.h"
#include "common.bpf.h"
#include "compat.bpf.h"
#include "kernel_args.bpf.h"
#include "lockstall.h"
#include "memlat/stack.h"
#include "stacks.bpf.h"

char LICENSE[] SEC("license") = "GPL";

_Static_assert((LOCKSTALL_RECENT_HOLDS & (LOCKSTALL_RECENT_HOLDS - 1)) == 0,
               "LOCKSTALL_RECENT_HOLDS must be a power of two");
/* task_comm() stores the name as two 8-byte words. */
_Static_assert(__builtin_offsetof(struct lockstall_wait, comm) % 8 == 0, "comm must be aligned");
_Static_assert(__builtin_offsetof(struct lockstall_hold, comm) % 8 == 0, "comm must be aligned");

/* Options, set by user space before load. */
const volatile __u32 filter_pid = 0; /* waiters of this process only (holders: any) */
const volatile __u64 min_wait_ns = 1000000;
const volatile __u64 min_hold_ns = 100000;
const volatile bool take_stacks = true;
const volatile bool memcg_on_v1 = false;
const volatile bool filter_cgroup_on = false;
const volatile bool filter_on_v1 = false;
const volatile __u64 filter_cgroup_id = 0;
const volatile __s32 filter_cgroup_level = 0;
const volatile bool trace_events = true;
const volatile bool count_processes = true;
const volatile bool count_causes = false;     /* --prometheus: slow waits by op and root */
const volatile bool causes_by_cgroup = false; /* ... and by the waiter's cgroup */
const volatile __u64 wakeup_bytes = 16 * 1024;

/* [0] read, [1] write: every wait, and log2 histograms of them in microseconds. */
struct lockstall_totals totals[2] = {};
__u64 hist[2][MEMLAT_HIST_SLOTS] = {};
__u64 dropped_events = 0;
__u64 table_full = 0;

/* A thread's state: the wait it is in, and the locks it holds (two: fork holds the parent's and
 * the child's, for writing). */
struct held_lock {
    __u64 mm;
    __u64 since_ns;
    __u64 reclaim_ns;
    __u64 compact_ns;
    __u8 write;
};

/* The memory stall a thread holding a lock is in. */
enum holder_stall { STALL_NONE, STALL_RECLAIM, STALL_COMPACT };

struct thread_locks {
    __u64 wait_mm;
    __u64 wait_start_ns;
    struct held_lock held[2];
    __u64 stall_since_ns;
    __u8 stall; /* enum holder_stall */
    /* Made while the thread exits (PF_EXITING): after sched_process_exit removed its entry
     * (exit_mm() takes the lock after it since 6.16 or so), so it goes once nothing is held. */
    __u8 exiting;
    __u8 made; /* 0 in a new entry */
};

MEMLAT_THREAD_STATE_MAPS(threads, struct thread_locks);

static const volatile struct thread_locks no_locks;

#define PF_EXITING 0x00000004 /* include/linux/sched.h, unchanged since 2.6 */

/* The current thread's entry, made when missing; a new entry notes whether the thread exits. */
static __always_inline struct thread_locks *thread_locks_made(void) {
    struct thread_locks *t =
        thread_state(&threads, &threads_overflow, (const void *)&no_locks, true, &table_full);

    if (t && !t->made) {
        t->made = 1;
        t->exiting = (BPF_CORE_READ(current_task(), flags) & PF_EXITING) != 0;
    }
    return t;
}

/* Per address space, its last long holds. LRU: an address space that stopped holding long goes
 * first. Sized by user space. */
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, 1024);
    __type(key, __u64);
    __type(value, struct lockstall_mm_holds);
} mm_holds SEC(".maps");

static const volatile struct lockstall_mm_holds no_holds;

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 8192);
    __type(key, struct lockstall_proc_key);
    __type(value, struct lockstall_summary);
} summaries SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 4096);
    __type(key, struct lockstall_cause_key);
    __type(value, struct lockstall_cause);
} causes SEC(".maps");

MEMLAT_STACK_TRACE_MAP(stacks);

/* One record is built at a time per CPU: it is larger than a BPF stack holds. */
MEMLAT_EVENT_MAPS(struct lockstall_wait, 256 * 1024);

/* The kernel stack of the current thread, in `stacks`. A stack whose bucket holds another one
 * (-EEXIST) is taken again less its innermost frame or two (the BPF program and the
 * tracepoint's machinery, which the views drop), which hash elsewhere: with one try, a run in
 * the 7.3 guest named a reader's holds '?' 20 times in 147. */
static __always_inline __s32 lock_stack(void *ctx) {
    long id = bpf_get_stackid(ctx, &stacks, 0);

    for (__u64 skip = 1; skip <= 2 && id == MEMLAT_STACK_NO_ROOM; skip++)
        id = bpf_get_stackid(ctx, &stacks, skip & BPF_F_SKIP_FIELD_MASK);
    if (id == MEMLAT_STACK_NO_ROOM || id == MEMLAT_STACK_MAP_FULL)
        __sync_fetch_and_add(&stacks_lost, 1);
    return id;
}

static __always_inline bool waiter_selected(void) {
    if (filter_pid && (bpf_get_current_pid_tgid() >> 32) != filter_pid)
        return false;
    return !filter_cgroup_on || cgroup_is_under(task_cgroup(current_task(), filter_on_v1),
                                                filter_cgroup_id, filter_cgroup_level);
}

static __always_inline void on_start(struct mm_struct *mm, bool write) {
    struct thread_locks *t = thread_locks_made();

    if (!t)
        return;
    t->wait_mm = (__u64)mm;
    t->wait_start_ns = bpf_ktime_get_ns();
}

/* The holds of `mm` released after `start`, into the record. */
static __always_inline void add_holders(struct lockstall_wait *e, __u64 mm, __u64 start) {
    struct lockstall_mm_holds *h = bpf_map_lookup_elem(&mm_holds, &mm);
    __u32 n = 0;

    e->nr_holders = 0;
    e->holders_missing = 0;
    if (!h)
        return;
    __u64 next = h->next;
    /* Newest first, so that a convoy of more than the record holds keeps the holds nearest
     * the wait's end; every slot, since slots are taken in the order of the releases' ends,
     * not of the times they read (a CPU, or a vCPU its hypervisor stopped, between the two
     * puts an older hold after a newer one). */
    for (int i = 1; i <= LOCKSTALL_RECENT_HOLDS; i++) {
        if (i > next)
            break;
        struct lockstall_hold *hold = &h->recent[(next - i) & (LOCKSTALL_RECENT_HOLDS - 1)];
        __u64 released = *(volatile __u64 *)&hold->released_ns;

        if (!released) {
            /* Being written by another CPU (or by a vCPU its hypervisor stopped halfway): it
             * may be a hold of this wait. */
            e->holders_missing = 1;
            continue;
        }
        if (released < start)
            continue;
        if (i == LOCKSTALL_RECENT_HOLDS && next > LOCKSTALL_RECENT_HOLDS)
            e->holders_missing = 1; /* the oldest kept was still within the wait */
        if (n >= LOCKSTALL_MAX_HOLDERS) {
            e->holders_missing = 1;
            break;
        }
        e->holders[n & (LOCKSTALL_MAX_HOLDERS - 1)] = *hold;
        n++;
    }
    e->nr_holders = n;
}

/* --prometheus: a slow wait counted by its stack and its root hold, found as the per-wait
 * record finds its holders (in this CPU's scratch record: no event is sent). */
static __always_inline void count_cause(void *ctx, struct task_struct *task, __u64 mm, __u64 start,
                                        __u32 pid, __u32 write, __u64 wait) {
    __u32 zero = 0;
    struct lockstall_wait *e = bpf_map_lookup_elem(&event_scratch, &zero);

    if (!e)
        return;
    add_holders(e, mm, start);
    struct lockstall_cause_key key = {};
    __u64 earliest = ~0ULL;
    int root = -1;

    for (int i = 0; i < LOCKSTALL_MAX_HOLDERS; i++) {
        struct lockstall_hold *h = &e->holders[i];

        if (i >= e->nr_holders)
            break;
        if (h->tid && h->acquired_ns && h->released_ns >= h->acquired_ns &&
            h->acquired_ns < earliest) {
            earliest = h->acquired_ns;
            root = i;
        }
    }
    key.write = write;
    key.stack_id = lock_stack(ctx);
    key.cgroup_id = causes_by_cgroup ? cgroup_id(task_cgroup(task, memcg_on_v1)) : 0;
    key.root_stack_id = -1;
    if (root >= 0) {
        struct lockstall_hold *h = &e->holders[root & (LOCKSTALL_MAX_HOLDERS - 1)];

        key.root_stack_id = h->stack_id;
        key.root_kind = h->pid == pid ? LOCKSTALL_ROOT_OWN : LOCKSTALL_ROOT_OTHER;
        __builtin_memcpy(key.root_comm, h->comm, sizeof(key.root_comm));
    }
    struct lockstall_cause *c = bpf_map_lookup_elem(&causes, &key);

    if (!c) {
        struct lockstall_cause none = {};

        c = map_insert_lookup(&causes, &key, &none, &table_full);
        if (!c)
            return;
    }
    __sync_fetch_and_add(&c->waits, 1);
    __sync_fetch_and_add(&c->total_ns, wait);
}

static __always_inline void add_summary(__u32 pid, bool write, __u64 wait) {
    struct lockstall_proc_key key = {.pid = pid, .write = write};
    struct lockstall_summary *s =
        MEMLAT_PROCESS_ENTRY(&summaries, &key, struct lockstall_summary, &table_full);

    if (!s)
        return;
    __sync_fetch_and_add(&s->waits, 1);
    __sync_fetch_and_add(&s->total_ns, wait);
    if (wait > s->max_ns)
        s->max_ns = wait; /* a rare lost race only understates the maximum */
}

static __always_inline void on_acquired(void *ctx, struct mm_struct *mm, bool write, bool success) {
    struct thread_locks *t = thread_state(&threads, &threads_overflow, NULL, false, NULL);
    __u64 now = bpf_ktime_get_ns(), start = 0;

    if (t && t->wait_mm == (__u64)mm) {
        start = t->wait_start_ns;
        t->wait_mm = 0;
    }
    /* A trylock has no start; a wait that began before the tool has none either. */
    if (success) {
        if (!t)
            t = thread_locks_made();
        if (t) {
            int slot = t->held[0].mm == (__u64)mm || !t->held[0].mm ? 0 : 1;

            /* A downgrade (write to read: munmap, mremap) returns once more for the lock it
             * holds: the hold goes on, in the mode it began with. */
            if (t->held[slot].mm != (__u64)mm) {
                t->held[slot].since_ns = now;
                t->held[slot].reclaim_ns = 0;
                t->held[slot].compact_ns = 0;
                t->held[slot].write = write;
            }
            t->held[slot].mm = (__u64)mm;
        }
    }
    if (!success && t && t->exiting && !t->held[0].mm && !t->held[1].mm)
        thread_state_exit(&threads, &threads_overflow); /* t is not used below */
    if (!start || now < start)
        return;
    __u64 wait = now - start;
    /* An index the verifier sees bounded: a classic tracepoint's bool field is a byte to it,
     * and the compiler, trusting a bool to be 0 or 1, drops the test (6.1 refused it). */
    __u32 w = write;

    barrier_var(w);
    w &= 1;

    __sync_fetch_and_add(&totals[w].waits, 1);
    __sync_fetch_and_add(&totals[w].total_ns, wait);
    __sync_fetch_and_add(&hist[w][log2_slot(wait / 1000)], 1);
    if (wait < min_wait_ns || !waiter_selected())
        return;
    __sync_fetch_and_add(&totals[w].slow_waits, 1);
    __sync_fetch_and_add(&totals[w].slow_ns, wait);

    struct task_struct *me = current_task_readable();
    struct task_struct *task = me ? me : current_task();
    __u64 pid_tgid = task_pid_tgid(me);

    if (count_processes)
        add_summary(pid_tgid >> 32, write, wait);
    if (count_causes)
        count_cause(ctx, task, (__u64)mm, start, pid_tgid >> 32, w, wait);
    if (!trace_events)
        return;
    struct lockstall_wait *e = event_reserve(&events, &event_scratch, sizeof(*e), &dropped_events);

    if (!e)
        return;
    e->ts_ns = now;
    e->wait_ns = wait;
    e->cgroup_id = cgroup_id(task_cgroup(task, memcg_on_v1));
    e->mm = (__u64)mm;
    e->mm_pid = 0;
    if (bpf_core_field_exists(mm->owner))
        e->mm_pid = BPF_CORE_READ(mm, owner, tgid);
    e->pid = pid_tgid >> 32;
    e->tid = (__u32)pid_tgid;
    e->stack_id = take_stacks ? lock_stack(ctx) : -1;
    e->write = write;
    e->success = success;
    e->pad = 0;
    task_comm(me, e->comm);
    add_holders(e, (__u64)mm, start);
    event_submit(ctx, &events, e, sizeof(*e), wakeup_bytes, &dropped_events);
}

/* The part of the stall the thread is in that fell within a hold that began at `since`, up
 * to `now`, added to the hold. */
static __always_inline void add_stall(struct thread_locks *t, struct held_lock *held, __u64 now) {
    __u64 from = t->stall_since_ns > held->since_ns ? t->stall_since_ns : held->since_ns;

    if (!held->mm || now <= from)
        return;
    if (t->stall == STALL_RECLAIM)
        held->reclaim_ns += now - from;
    else if (t->stall == STALL_COMPACT)
        held->compact_ns += now - from;
}

static __always_inline void keep_hold(void *ctx, __u64 mm, const struct held_lock *held,
                                      __u64 now) {
    struct lockstall_mm_holds *h = bpf_map_lookup_elem(&mm_holds, &mm);

    if (!h) {
        bpf_map_update_elem(&mm_holds, &mm, (const void *)&no_holds, BPF_NOEXIST);
        h = bpf_map_lookup_elem(&mm_holds, &mm);
        if (!h)
            return;
    }
    /* Each CPU takes a slot of its own; a reader of the ring may see one half written, which
     * user space drops (released before acquired, or no thread). */
    __u64 at = __sync_fetch_and_add(&h->next, 1);
    struct lockstall_hold *hold = &h->recent[at & (LOCKSTALL_RECENT_HOLDS - 1)];
    __u64 pid_tgid = bpf_get_current_pid_tgid();

    *(volatile __u64 *)&hold->released_ns = 0;
    barrier();
    hold->acquired_ns = held->since_ns;
    hold->reclaim_ns = held->reclaim_ns;
    hold->compact_ns = held->compact_ns;
    hold->pid = pid_tgid >> 32;
    hold->tid = (__u32)pid_tgid;
    hold->write = held->write;
    hold->stack_id = take_stacks ? lock_stack(ctx) : -1;
    bpf_get_current_comm(hold->comm, sizeof(hold->comm));
    barrier();
    *(volatile __u64 *)&hold->released_ns = now;
}

static __always_inline void on_released(void *ctx, struct mm_struct *mm, bool write) {
    struct thread_locks *t = thread_state(&threads, &threads_overflow, NULL, false, NULL);

    if (!t)
        return;
    int slot = t->held[0].mm == (__u64)mm ? 0 : t->held[1].mm == (__u64)mm ? 1 : -1;

    if (slot < 0)
        return; /* acquired before the tool started */
    struct held_lock *held = &t->held[slot & 1];
    __u64 now = bpf_ktime_get_ns();

    /* Released within a stall (not seen: reclaim does not drop the lock): its part so far. */
    if (t->stall != STALL_NONE)
        add_stall(t, held, now);
    if (now - held->since_ns >= min_hold_ns)
        keep_hold(ctx, (__u64)mm, held, now);
    held->mm = 0;
    if (!t->held[0].mm && !t->held[1].mm)
        t->stall = STALL_NONE; /* a stall's end missed cannot block the next */
    if (t->exiting && !t->held[0].mm && !t->held[1].mm && !t->wait_mm)
        thread_state_exit(&threads, &threads_overflow);
}

MEMLAT_MMAP_LOCK_PROGRAMS(on_start, on_acquired, on_released)

/* ---- A holder's memory stalls: direct and memory-cgroup reclaim, compaction. Only a thread
 * that holds a lock is followed (one lookup in the per-thread map otherwise). Kernel threads
 * (kswapd, kcompactd) hold no mmap_lock. */
static __always_inline void on_stall_begin(enum holder_stall stall) {
    struct thread_locks *t = thread_state(&threads, &threads_overflow, NULL, false, NULL);

    if (!t || (!t->held[0].mm && !t->held[1].mm) || t->stall != STALL_NONE)
        return;
    t->stall = stall;
    t->stall_since_ns = bpf_ktime_get_ns();
}

static __always_inline void on_stall_end(enum holder_stall stall) {
    struct thread_locks *t = thread_state(&threads, &threads_overflow, NULL, false, NULL);

    if (!t || t->stall != stall)
        return;
    __u64 now = bpf_ktime_get_ns();

    add_stall(t, &t->held[0], now);
    add_stall(t, &t->held[1], now);
    t->stall = STALL_NONE;
}

static __always_inline void on_reclaim_begin(int kind, int order, gfp_t gfp) {
    on_stall_begin(STALL_RECLAIM);
}

static __always_inline void on_reclaim_end(void *ctx, int kind, unsigned long nr_reclaimed) {
    on_stall_end(STALL_RECLAIM);
}

MEMLAT_RECLAIM_PROGRAMS(direct_reclaim, 0, on_reclaim_begin, on_reclaim_end)
MEMLAT_RECLAIM_PROGRAMS(memcg_reclaim, 0, on_reclaim_begin, on_reclaim_end)

/* compaction:mm_compaction_begin/end: a zone's compaction run, in the allocating thread for
 * direct compaction; three ways into each. Their arguments are not read. */
#define COMPACTION_PROGRAMS(edge, call)                                                            \
    SEC("tp_btf/mm_compaction_" #edge)                                                             \
    int BPF_PROG(compaction_##edge##_btf) {                                                        \
        call;                                                                                      \
        return 0;                                                                                  \
    }                                                                                              \
    SEC("raw_tp/mm_compaction_" #edge)                                                             \
    int BPF_PROG(compaction_##edge##_raw) {                                                        \
        call;                                                                                      \
        return 0;                                                                                  \
    }                                                                                              \
    SEC("tracepoint/compaction/mm_compaction_" #edge)                                              \
    int compaction_##edge##_tp(void *ctx) {                                                        \
        call;                                                                                      \
        return KEEP_EVENT;                                                                         \
    }

COMPACTION_PROGRAMS(begin, on_stall_begin(STALL_COMPACT))
COMPACTION_PROGRAMS(end, on_stall_end(STALL_COMPACT))

/* An exiting thread's entry in the per-thread hash map goes with it. */
MEMLAT_THREAD_EXIT_PROGRAMS(threads);
