/* Helpers every memlat BPF program shares. Include after vmlinux.h and the libbpf headers. */
#ifndef MEMLAT_COMMON_BPF_H
#define MEMLAT_COMMON_BPF_H

#include "memlat/hist.h"
#include "memlat/stack.h"

/* errno values BPF helpers return, negated (vmlinux.h has no errno.h). */
#ifndef E2BIG
#define E2BIG 7
#endif

/* include/linux/sched.h: task_struct.flags of a kernel thread. */
#define PF_KTHREAD 0x00200000

/* What every classic tracepoint (SEC("tracepoint/...")) and kprobe/kretprobe program returns.
 * The kernel takes their return value as a filter verdict: 0 drops the event for every perf
 * user of that tracepoint or kprobe event on this CPU (perf_trace_run_bpf_submit(),
 * kprobe_perf_func()), so `perf stat -e compaction:mm_compaction_migratepages` beside the tool
 * would count nothing while ftrace still saw the events. memlat observes and never filters what
 * other tools see, so these programs always return 1. tp_btf, raw_tp and fentry programs'
 * return values are ignored by the kernel. */
enum { KEEP_EVENT = 1 };

/* 1 when x >> k is not zero, for x < 2^(2k): x >> k is then below 2^k, and adding 2^k - 1
 * carries into bit k exactly when it is not zero. Arithmetic, not a branch. */
static __always_inline __u64 any_above(__u64 x, __u32 k) {
    return ((x >> k) + ((1ULL << k) - 1)) >> k;
}

/* floor(log2(v)) for v >= 1, and 0 for v == 0: the slot of a log2 histogram. Without
 * branches: with one per halving step, the verifier followed each combination of the six
 * outcomes with its own slot to index the histogram with, and a program with two histograms
 * (tlbflush -L's handler exit) took it 10-11 ms to load on 6.18. */
static __always_inline __u32 log2_slot(__u64 v) {
    __u64 slot = 0, step;

    step = any_above(v, 32) << 5;
    v >>= step;
    slot += step;
    step = any_above(v, 16) << 4;
    v >>= step;
    slot += step;
    step = any_above(v, 8) << 3;
    v >>= step;
    slot += step;
    step = any_above(v, 4) << 2;
    v >>= step;
    slot += step;
    step = any_above(v, 2) << 1;
    v >>= step;
    slot += step;
    slot += any_above(v, 1);
    return slot < MEMLAT_HIST_SLOTS ? slot : MEMLAT_HIST_SLOTS - 1;
}

/* Field `field` of the kernel object at `ptr`, CO-RE relocated: with `loads` (a constant) a
 * plain load, which tp_btf programs may do on the pointers the kernel's BTF types (the JIT
 * makes it fault-safe), else bpf_probe_read_kernel() (raw_tp, classic tracepoints, kprobes),
 * a helper call: on a kernel with retpolines and return thunks a call and return cost tens of
 * ns each, several per event (bench/). A macro: a function cannot take a field name. */
#define KERNEL_FIELD(loads, ptr, field) ((loads) ? (ptr)->field : BPF_CORE_READ(ptr, field))
/* The same for a bit field: a load and a mask, or probe reads. */
#define KERNEL_BITFIELD(loads, ptr, field)                                                         \
    ((loads) ? BPF_CORE_READ_BITFIELD(ptr, field) : BPF_CORE_READ_BITFIELD_PROBED(ptr, field))

/* Whether bit `bit` is set in a bitmap of 64-bit words held in read-only data. */
static __always_inline bool bitmap_test(const volatile __u64 *map, __u32 words, __u32 bit) {
    __u32 word = bit / 64;

    if (word >= words)
        return false;
    return (map[word] >> (bit % 64)) & 1;
}

/* Inserts `init` under `key` (unless another CPU just did) and returns the map's value, for
 * the first event of a key. A full table is counted in *full and gives NULL, so that what
 * could not be counted is reported rather than lost silently. */
static __always_inline void *map_insert_lookup(void *map, const void *key, const void *init,
                                               __u64 *full) {
    if (bpf_map_update_elem(map, key, init, BPF_NOEXIST) == -E2BIG) {
        __sync_fetch_and_add(full, 1);
        return NULL;
    }
    return bpf_map_lookup_elem(map, key);
}

/* The entry of `key` in the per-process table `map` (values of `value_type`, with a `comm`),
 * made with the current task's name at the key's first event; NULL when the table is full
 * (counted in *full). A macro, not a function: the zero value (a whole histogram for some
 * tables) is built only when the lookup misses, and the name goes to `comm` in any value. */
#define MEMLAT_PROCESS_ENTRY(map, key, value_type, full)                                           \
    ({                                                                                             \
        value_type *__entry = bpf_map_lookup_elem(map, key);                                       \
        if (!__entry) {                                                                            \
            value_type __zero = {};                                                                \
            bpf_get_current_comm(__zero.comm, sizeof(__zero.comm));                                \
            __entry = map_insert_lookup(map, key, &__zero, full);                                  \
        }                                                                                          \
        __entry;                                                                                   \
    })

/* Row `cpu` of `array`, a global array declared with one row of `row_bytes` and sized at open
 * for every possible CPU (user space's size_global_array()), through a pointer the compiler
 * cannot trace back to that declaration: an index into a one-row array it may take for 0. */
static __always_inline void *cpu_row(void *array, __u32 cpu, __u32 row_bytes) {
    barrier_var(array);
    return array + (__u64)cpu * row_bytes;
}

/* Submits a ring-buffer record of `size` bytes without waking user space, except once for
 * every `batch_bytes` (a power of two) of records produced: the record that carries the
 * producer position across a multiple of `batch_bytes` wakes it. A wake-up is an irq_work (in a
 * VM a self-IPI that exits to the hypervisor: several microseconds), so one per event would
 * cost far more than the event. The test is on the position alone, not on the data waiting:
 * "wake when `batch_bytes` are waiting" woke with every event while user space had not yet run
 * to drain them (both CPUs busy with the traced workload), 6 us per event instead of 0.3 on a
 * 6.18 guest (bench/). Two CPUs may both see a crossing (a spare wake-up) or, racing, neither
 * (the next crossing wakes); user space also drains the buffer on a timer, so nothing waits
 * for long. */
static __always_inline void submit_batched(void *record, void *ringbuf, __u64 size,
                                           __u64 batch_bytes) {
    /* What the record takes in the buffer: an 8-byte header, rounded up to 8 bytes. */
    __u64 taken = (size + 8 + 7) & ~7ULL;
    __u64 flags = BPF_RB_NO_WAKEUP;

    if ((bpf_ringbuf_query(ringbuf, BPF_RB_PROD_POS) & (batch_bytes - 1)) < taken)
        flags = BPF_RB_FORCE_WAKEUP;
    bpf_ringbuf_submit(record, flags);
}

#endif
