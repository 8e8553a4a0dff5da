/* What the running kernel offers, set by user space before load (lib/kernel/features.h,
 * set_compat()). Every program that needs one of these has a fall-back behind the flag; the
 * verifier never looks at the branch a flag rules out (and root's loads have that dead code
 * removed before helpers are resolved), so helpers and map types an old kernel lacks may
 * appear there. Include once per BPF object, after vmlinux.h, the libbpf headers and
 * common.bpf.h. */
#ifndef MEMLAT_COMPAT_BPF_H
#define MEMLAT_COMPAT_BPF_H

/* bpf_get_current_task_btf() (5.11; user space probes for task-local storage in tracing
 * programs, which came with it); else CO-RE reads through helpers. */
const volatile bool memlat_task_btf = true;
/* BPF_MAP_TYPE_RINGBUF (5.8); else a perf event array. */
const volatile bool memlat_ringbuf = true;
/* The kernel's own BTF: tp_btf/fentry programs (bpf_get_current_task_btf() needs 5.11 too:
 * see current_task()). */
const volatile bool memlat_kernel_btf = true;

/* Per-thread state: entries created, and entries removed by the thread-exit program. User space
 * reports them with -v, with the entries left whose thread no longer exists (leaks: none). */
__u64 memlat_thread_entries_created = 0;
__u64 memlat_thread_entries_exit_deleted = 0;
/* Set once a per-thread hash map has been full: from then on a thread it lacks is looked for
 * in, and given an entry of, the overflow map (thread_state()). */
bool memlat_thread_overflow = false;

/* The current task, as a pointer only CO-RE reads may follow. bpf_get_current_task_btf()
 * came in 5.11 (user space enables it only with the kernel's own BTF): 5.10 has BTF but not
 * the helper. */
static __always_inline struct task_struct *current_task(void) {
    if (memlat_task_btf)
        return bpf_get_current_task_btf();
    return (struct task_struct *)bpf_get_current_task();
}

/* The current task as a pointer the program may read directly (tp_btf, raw_tp and tracepoint
 * programs alike), where the kernel has bpf_get_current_task_btf() (5.11); NULL before, where
 * task_pid_tgid() and task_comm() call the helpers instead. Reading the fields costs two loads
 * where bpf_get_current_comm() is a call through strscpy_pad(): on a kernel with return-thunk
 * mitigations (AMD's SRSO "safe RET") every call and return is expensive, and a 6.18 guest
 * measured 80 ns per event for the helper against 15 for the loads (bench/). */
static __always_inline struct task_struct *current_task_readable(void) {
    return memlat_task_btf ? bpf_get_current_task_btf() : NULL;
}

/* As bpf_get_current_pid_tgid(): the process id (tgid) in the upper half, the thread id in the
 * lower, of `task` from current_task_readable(). */
static __always_inline __u64 task_pid_tgid(struct task_struct *task) {
    if (task)
        return (__u64)(__u32)task->tgid << 32 | (__u32)task->pid;
    return bpf_get_current_pid_tgid();
}

/* As bpf_get_current_comm(): the name of `task` from current_task_readable(), 16 bytes, NUL
 * padded, into `comm`, which must be 8-byte aligned (the tools assert it of their records'
 * comm fields). Two 8-byte loads, which the verifier allows within the array, and two
 * stores (a byte-wise copy would be 16 stores and 30 shifts). The kernel keeps task->comm
 * NUL-terminated while it rewrites it (exec), as the helper relies on too. */
static __always_inline void task_comm(struct task_struct *task, char comm[16]) {
    if (task) {
        __u64 words[2];

        words[0] = *(__u64 *)&task->comm[0];
        words[1] = *(__u64 *)&task->comm[8];
        __builtin_memcpy(__builtin_assume_aligned(comm, 8), words, sizeof(words));
        return;
    }
    bpf_get_current_comm(comm, 16);
}

/* Entries of a per-thread state map: threads alive that have stalled while the tool ran (a larger
 * --max-entries raises it; MEMLAT_THREAD_STATES in the environment sets it and the overflow map's,
 * for the tests: user space's size_thread_state_map()). The map is preallocated, at load: 16384
 * entries took 1-2.7 ms of start-up on a 6.18 guest. */
#define MEMLAT_THREAD_STATES 4096
/* Entries of the overflow map, an LRU hash map for the threads beyond those: the ones that
 * stalled least recently give theirs to new ones, so it needs to hold only the threads stalling
 * at about the same time. */
#define MEMLAT_THREAD_OVERFLOW 1024

/* The current thread's state: its entry in `map`, a preallocated hash map keyed by TID with
 * MEMLAT_THREAD_STATES entries, on every kernel, or, once `map` has been full, in `overflow`, a
 * BPF_MAP_TYPE_LRU_HASH (4.10+) of the same key and value. Measured on a 6.18 guest (bench/,
 * issue 22): task-local storage costs the first event of each thread 45-70 us to create its
 * storage (allocations and their caches' refill), which short-lived threads pay every time, and
 * no less than the hash map's lookup after that; removing the entry at the end of each stall and
 * inserting it again at the next cost 100-200 ns a stall more than keeping it. So an entry stays
 * until its thread exits (thread_state_exit(), on sched_process_exit). An LRU hash map alone would
 * never refuse a thread, but its entries cost more to make (issue 22: +120 to +300 ns a stall of
 * a short-lived thread, the LRU lists' locks and rotation), so it takes only the threads the
 * hash map has no room for, whose stalls a full hash map would leave untimed for as long as the
 * older threads live. One LRU list for the whole map (not BPF_F_NO_COMMON_LRU, whose per-CPU
 * lists split the entries among the possible CPUs: a few each on a large host). An overflow entry
 * evicted while its stall is open makes that stall's end find no entry: the tools count such an
 * end of a selected thread in unpaired_ends, never time it. A per-CPU slot is no choice here:
 * the stalls timed (reclaim, compaction, migration) sleep and may end on another CPU. With
 * `create`, a missing entry is made from `zero` (a zeroed value of the maps' value size in
 * read-only data); an entry that cannot be made (the LRU map's -ENOMEM: all its entries in use
 * on other CPUs) is counted in *full. */
static __always_inline void *thread_state(void *map, void *overflow, const void *zero, bool create,
                                          __u64 *full) {
    __u32 tid = (__u32)bpf_get_current_pid_tgid();
    void *state = bpf_map_lookup_elem(map, &tid);

    if (state)
        return state;
    if (*(volatile bool *)&memlat_thread_overflow) {
        state = bpf_map_lookup_elem(overflow, &tid);
        if (state)
            return state;
    }
    if (!create)
        return NULL;
    /* A new thread, or one whose overflow entry another thread took. */
    if (bpf_map_update_elem(map, &tid, zero, BPF_NOEXIST) == 0) {
        __sync_fetch_and_add(&memlat_thread_entries_created, 1);
        return bpf_map_lookup_elem(map, &tid);
    }
    memlat_thread_overflow = true;
    if (bpf_map_update_elem(overflow, &tid, zero, BPF_NOEXIST) != 0) {
        __sync_fetch_and_add(full, 1);
        return NULL;
    }
    __sync_fetch_and_add(&memlat_thread_entries_created, 1);
    return bpf_map_lookup_elem(overflow, &tid);
}

/* sched_process_exit, which every exiting thread passes: its entry in `map` or `overflow` goes. */
static __always_inline void thread_state_exit(void *map, void *overflow) {
    __u32 tid = (__u32)bpf_get_current_pid_tgid();

    if (bpf_map_delete_elem(map, &tid) == 0 ||
        (*(volatile bool *)&memlat_thread_overflow && bpf_map_delete_elem(overflow, &tid) == 0))
        __sync_fetch_and_add(&memlat_thread_entries_exit_deleted, 1);
}

/* A per-thread state map of `value_type`, `name`, and its overflow map, `name`_overflow, for
 * thread_state() and thread_state_exit(). User space sizes both (size_thread_state_map()). */
#define MEMLAT_THREAD_STATE_MAPS(name, value_type)                                                 \
    struct {                                                                                       \
        __uint(type, BPF_MAP_TYPE_HASH);                                                           \
        __uint(max_entries, MEMLAT_THREAD_STATES);                                                 \
        __type(key, __u32);                                                                        \
        __type(value, value_type);                                                                 \
    } name SEC(".maps");                                                                           \
    struct {                                                                                       \
        __uint(type, BPF_MAP_TYPE_LRU_HASH);                                                       \
        __uint(max_entries, MEMLAT_THREAD_OVERFLOW);                                               \
        __type(key, __u32);                                                                        \
        __type(value, value_type);                                                                 \
    } name##_overflow SEC(".maps")

/* The programs that run `on_exit()` (a function of no arguments) when a thread exits, on
 * sched_process_exit: thread_exit_raw on the raw tracepoint and thread_exit_tp on the classic
 * one, whichever the tool's hook plan attaches (thread_exit_probe()). */
#define MEMLAT_THREAD_EXIT_CALLING(on_exit)                                                        \
    SEC("raw_tp/sched_process_exit")                                                               \
    int thread_exit_raw(void *ctx) {                                                               \
        on_exit();                                                                                 \
        return 0;                                                                                  \
    }                                                                                              \
    SEC("tracepoint/sched/sched_process_exit")                                                     \
    int thread_exit_tp(void *ctx) {                                                                \
        on_exit();                                                                                 \
        return KEEP_EVENT;                                                                         \
    }

/* The programs that take an exiting thread's entry out of the maps that
 * MEMLAT_THREAD_STATE_MAPS(`name`, ...) made. */
#define MEMLAT_THREAD_EXIT_PROGRAMS(name)                                                          \
    static __always_inline void name##_thread_exit(void) {                                         \
        thread_state_exit(&name, &name##_overflow);                                                \
    }                                                                                              \
    MEMLAT_THREAD_EXIT_CALLING(name##_thread_exit)

/* A tool's event maps: `events`, a ring buffer of `ring_bytes` (user space makes it a perf event
 * array before 5.8, and may resize it), and `event_scratch`, the per-CPU record of `record_type`
 * that event_reserve() builds an event in when `events` is a perf event array. */
#define MEMLAT_EVENT_MAPS(record_type, ring_bytes)                                                 \
    struct {                                                                                       \
        __uint(type, BPF_MAP_TYPE_RINGBUF);                                                        \
        __uint(max_entries, ring_bytes);                                                           \
    } events SEC(".maps");                                                                         \
    struct {                                                                                       \
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                                                   \
        __uint(max_entries, 1);                                                                    \
        __type(key, __u32);                                                                        \
        __type(value, record_type);                                                                \
    } event_scratch SEC(".maps")

/* Where to write an event record of `size` bytes: a reserved ring-buffer record, or, when the
 * events map is a perf event array, this CPU's record in `scratch` (a one-entry per-CPU array
 * of the record's type), which event_submit() copies out. NULL: nothing reserved, the record
 * counted in *dropped (the ring buffer was full). */
static __always_inline void *event_reserve(void *events, void *scratch, __u64 size,
                                           __u64 *dropped) {
    __u32 zero = 0;
    void *record;

    if (memlat_ringbuf)
        record = bpf_ringbuf_reserve(events, size, 0);
    else
        record = bpf_map_lookup_elem(scratch, &zero);
    if (!record)
        __sync_fetch_and_add(dropped, 1);
    return record;
}

/* Hands a record from event_reserve() to user space. The ring buffer wakes it only in batches
 * (submit_batched()); the perf buffer's wake-up watermark, set by user space, does the same. A
 * perf-buffer record the kernel could not write is counted in *dropped, as a failed ring-buffer
 * reservation is by event_reserve(). */
static __always_inline void event_submit(void *ctx, void *events, void *record, __u64 size,
                                         __u64 batch_bytes, __u64 *dropped) {
    if (memlat_ringbuf) {
        submit_batched(record, events, size, batch_bytes);
        return;
    }
    if (bpf_perf_event_output(ctx, events, BPF_F_CURRENT_CPU, record, size) != 0)
        __sync_fetch_and_add(dropped, 1);
}

#endif
