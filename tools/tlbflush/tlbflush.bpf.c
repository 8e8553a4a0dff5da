// SPDX-License-Identifier: GPL-2.0
/* tlbflush: TLB flushes by CPU and reason, who sends the remote shootdown IPIs, and how long
 * the victim CPUs spend handling them. Every view has a tp_btf, a raw_tp and a classic
 * tracepoint program; user space attaches the first the kernel accepts.
 *
 * -L times two intervals on the victim CPU: the call-function IPI handler, from the
 * irq_vectors entry tracepoint to the exit one, for handler runs that did a TLB flush; and,
 * where the csd tracepoints exist (6.3+), the flush_tlb_func callback inside it. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "common.bpf.h"
#include "compat.bpf.h"
#include "stacks.bpf.h"
#include "tlbflush.h"

char LICENSE[] SEC("license") = "GPL";

_Static_assert(__builtin_offsetof(struct tlbflush_event, comm) % 8 == 0,
               "task_comm() stores comm as two 8-byte words: it must be 8-byte aligned");

#define TLB_FLUSH_ALL_PAGES (~0UL)

/* Options, set by user space before load. */
const volatile bool filter_cpus = false;
const volatile __u64 cpu_mask[TLBFLUSH_CPU_WORDS] = {};
const volatile __u32 filter_pid = 0;
const volatile __u32 reason_mask = ~0u;
const volatile bool per_process = false;
const volatile bool trace_events = false;
const volatile bool collect_stacks = false;
/* The TLB-flush IPI callback (flush_tlb_func) from kallsyms: the csd tracepoints see every
 * cross-CPU function call, and only this one is a TLB shootdown. */
const volatile __u64 tlb_flush_func = 0;
/* --culprits: who sends remote flush requests (below), and with the csd tracepoints who
 * queues flush IPIs. */
const volatile bool count_culprits = false;
/* Where this CPU's flush_tlb_info is, the per-CPU variable that flush_tlb_mm_range() fills in
 * before it asks the other CPUs to flush: its distance in bytes from this CPU's runqueue,
 * which the current task's cfs_rq points to (CONFIG_FAIR_GROUP_SCHED). Both are per-CPU
 * variables of one section, so the distance is the same on every CPU; user space reads their
 * offsets from the kernel's BTF (DATASEC .data..percpu) and leaves read_flush_info false when
 * it cannot. A typed ksym would be simpler, but the kernel resolves one through kallsyms,
 * which lists no data without CONFIG_KALLSYMS_ALL (this project's 6.18 test bed). */
const volatile bool read_flush_info = false;
const volatile __s64 flush_info_from_rq = 0;
/* Without the csd tracepoints (before 6.3), a handler run is a TLB shootdown when tlb_flush
 * reports a remote flush inside it. */
const volatile bool tlb_marks_from_tlb_flush = false;
const volatile __u64 wakeup_bytes = 64 * 1024;
const volatile __u32 reason_remote_shootdown = 1;
const volatile __u32 reason_remote_wrong_cpu = 5;
const volatile __u32 reason_remote_send_ipi = 4;

/* The CPUs this machine can have (possible CPUs), set by user space before load. Every per-CPU
 * array below is declared with one row and sized for nr_cpus rows at open: each is the only
 * variable of its own .data.* section, which libbpf resizes (bpf_map__set_value_size(); the
 * skeleton generator of bookworm's bpftool skips .bss.* sections). The verifier knows this
 * read-only value, so a CPU checked against it indexes within; rows are reached through
 * cpu_row(), as the compiler may assume that an index into a one-row array is 0. */
const volatile __u32 nr_cpus = TLBFLUSH_MAX_CPUS;

/* Counters, read by user space through the mmap'ed sections. Each CPU writes only its own row,
 * and the kernel never nests one program inside itself on a CPU, so plain adds are exact. */
/* With -P, 2 * nr_cpus rows: one set per epoch of the per-process table (on_tlb_flush()). */
struct tlbflush_count counts[1][TLBFLUSH_MAX_REASONS] SEC(".data.counts") = {};
/* -L: the IPI handler's time in ns and, for the JSON "latency" of earlier versions, in us;
 * the flush callback's time in ns; and how the TLB flushes reached each CPU. */
__u64 handler_hist_ns[1][MEMLAT_HIST_SLOTS] SEC(".data.handler_ns") = {};
__u64 handler_hist_us[1][MEMLAT_HIST_SLOTS] SEC(".data.handler_us") = {};
__u64 callback_hist_ns[1][MEMLAT_HIST_SLOTS] SEC(".data.callback_ns") = {};
struct tlbflush_ipi_counts ipi_counts[1] SEC(".data.ipi_counts") = {};
/* -L: the sums of the two histograms' values in ns (--prometheus's histogram _sum). */
__u64 handler_sum_ns[1] SEC(".data.handler_sum") = {};
__u64 callback_sum_ns[1] SEC(".data.callback_sum") = {};
/* Flush IPIs each CPU handled: flush_tlb_func run for another CPU's flush, from the csd
 * tracepoints (6.3+). The kernel counts exactly these in the /proc/interrupts TLB row
 * (inc_irq_stat(irq_tlb_count) when the CPU is not the initiator), before it returns early
 * for a CPU in lazy TLB mode or already up to date; tlb_flush fires only after those returns,
 * so its remote reasons fall short of the row (83-86% under madvise or thread churn). */
__u64 flush_ipis[1] SEC(".data.flush_ipis") = {};
/* Remote flush requests that named each CPU: at tlb_flush(remote_send_ipi) the sender asks the
 * CPUs of a CPU mask to flush, and the kernel then sends them IPIs (native_flush_tlb_multi(),
 * which skips CPUs in lazy TLB mode) or hands the mask to the hypervisor (KVM flushes its
 * preempted vCPUs, PVM and Hyper-V every one, without an IPI). Written by the senders, so
 * added atomically. */
__u64 flush_requests[1] SEC(".data.flush_requests") = {};
/* Requests by where their CPU mask was read (enum tlbflush_target_source), or not. */
__u64 request_sources[TLBFLUSH_TARGET_SOURCES] = {};
__u64 dropped_events = 0;      /* ring buffer full */
__u64 table_full = 0;          /* hash map full (culprits) */
__u64 proc_table_full[2] = {}; /* -P's, by epoch like its rows: what they left out, exactly */
__u32 proc_epoch = 0;          /* written by user space: see struct tlbflush_proc_key */

/* What each CPU is handling now (see struct tlbflush_ipi_state). */
struct tlbflush_ipi_state ipi_state[1] SEC(".data.ipi_state") = {};

/* The rows of the per-CPU arrays (cpu < nr_cpus, checked by the caller). */
static __always_inline struct tlbflush_count *counts_of(__u32 cpu) {
    return cpu_row(counts, cpu, sizeof(counts[0]));
}

static __always_inline struct tlbflush_ipi_state *ipi_state_of(__u32 cpu) {
    return cpu_row(ipi_state, cpu, sizeof(ipi_state[0]));
}

static __always_inline struct tlbflush_ipi_counts *ipi_counts_of(__u32 cpu) {
    return cpu_row(ipi_counts, cpu, sizeof(ipi_counts[0]));
}

static __always_inline __u64 *u64_of(__u64 *array, __u32 cpu, __u32 row_bytes) {
    return cpu_row(array, cpu, row_bytes);
}

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 16384);
    __type(key, struct tlbflush_proc_key);
    __type(value, struct tlbflush_proc_value);
} proc_counts SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 16384);
    __type(key, struct tlbflush_culprit_key);
    __type(value, struct tlbflush_culprit_value);
} culprits SEC(".maps");

MEMLAT_STACK_TRACE_MAP(stacks);

/* -s with --culprits: the stacks of the last remote flush request sent on each CPU. The flush
 * IPIs that request then queues (csd_queue_cpu, same task, preemption off since the request)
 * are counted under the same stacks: one culprit row per sender and target for its requests
 * and its IPIs, and one pair of stack walks per request instead of one per IPI. */
struct request_stacks {
    __u64 pid_tgid;
    __s32 kernel_stack;
    __s32 user_stack;
};

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct request_stacks);
} last_request_stacks SEC(".maps");

MEMLAT_EVENT_MAPS(struct tlbflush_event, 4096);

static __always_inline bool pid_selected(__u64 pid_tgid) {
    return filter_pid == 0 || (__u32)(pid_tgid >> 32) == filter_pid;
}

static __always_inline bool cpu_selected(__u32 cpu) {
    return !filter_cpus || bitmap_test(cpu_mask, TLBFLUSH_CPU_WORDS, cpu);
}

static __always_inline void add_count(struct tlbflush_count *c, unsigned long pages, bool atomic) {
    bool full = pages == TLB_FLUSH_ALL_PAGES;

    if (atomic) {
        __sync_fetch_and_add(&c->count, 1);
        if (full)
            __sync_fetch_and_add(&c->full, 1);
        else
            __sync_fetch_and_add(&c->pages, pages);
        return;
    }
    c->count++;
    if (full)
        c->full++;
    else
        c->pages += pages;
}

static __always_inline void count_per_process(__u64 pid_tgid, __u32 cpu, __u32 reason,
                                              unsigned long pages, __u32 epoch) {
    struct tlbflush_proc_key key = {
        .pid = pid_tgid >> 32, .cpu = cpu, .reason = reason, .epoch = epoch};
    struct tlbflush_proc_value *v = MEMLAT_PROCESS_ENTRY(
        &proc_counts, &key, struct tlbflush_proc_value, &proc_table_full[epoch & 1]);

    if (!v)
        return;
    add_count(&v->c, pages, true);
}

/* The sender's part of a culprit key: who, and with -s from where. */
static __always_inline struct tlbflush_culprit_key culprit_of(void *ctx, __u64 pid_tgid) {
    struct tlbflush_culprit_key key = {
        .pid = pid_tgid >> 32,
        .tid = (__u32)pid_tgid,
        .cpu = TLBFLUSH_ANY_CPU,
        .kernel_stack = -1,
        .user_stack = -1,
    };

    if (collect_stacks) {
        key.kernel_stack = stack_id(ctx, &stacks, 0);
        key.user_stack = stack_id(ctx, &stacks, BPF_F_USER_STACK);
    }
    return key;
}

/* Counts one flush IPI queued (`request` false) or one flush request (true) of the sender in
 * `key` for its target CPU. */
static __always_inline void count_culprit(struct tlbflush_culprit_key *key, bool request) {
    struct tlbflush_culprit_value *v =
        MEMLAT_PROCESS_ENTRY(&culprits, key, struct tlbflush_culprit_value, &table_full);

    if (!v)
        return;
    if (request)
        __sync_fetch_and_add(&v->requests, 1);
    else
        __sync_fetch_and_add(&v->count, 1);
}

static __always_inline void trace_event(void *ctx, struct task_struct *task, __u64 pid_tgid,
                                        __u32 cpu, int reason, unsigned long pages) {
    struct tlbflush_event *e = event_reserve(&events, &event_scratch, sizeof(*e), &dropped_events);

    if (!e)
        return;
    e->ts_ns = bpf_ktime_get_ns();
    e->pages = pages;
    e->cpu = cpu;
    e->pid = pid_tgid >> 32;
    e->tid = (__u32)pid_tgid;
    e->reason = reason;
    task_comm(task, e->comm);
    event_submit(ctx, &events, e, sizeof(*e), wakeup_bytes, &dropped_events);
}

static __always_inline void hist_add(__u64 hist[MEMLAT_HIST_SLOTS], __u64 value) {
    hist[log2_slot(value)]++;
}

/* A TLB flush ran on this CPU: inside a call-function IPI handler it makes that run a TLB
 * stall, however many flushes share it; outside one, the idle loop drained the queue (or the
 * flush came without an IPI), which is no IPI stall and is only counted. */
static __always_inline void note_tlb_flush(__u32 cpu) {
    struct tlbflush_ipi_state *st;

    if (cpu >= nr_cpus)
        return;
    st = ipi_state_of(cpu);
    if (st->handler_since) {
        st->tlb_flushes++;
        return;
    }
    if (cpu_selected(cpu))
        ipi_counts_of(cpu)->without_ipi++;
}

/* The bit number of `low`, a 64-bit word with one bit set, without branches (which would
 * multiply the paths the verifier walks in the loop below): a de Bruijn sequence puts a
 * distinct 6-bit pattern in the top bits of its product with each power of two. */
static const __u8 bit_of_power[64] = {
    0,  1,  56, 2,  57, 49, 28, 3,  61, 58, 42, 50, 38, 29, 17, 4,  62, 47, 59, 36, 45, 43,
    51, 22, 53, 39, 33, 30, 24, 18, 12, 5,  63, 55, 48, 27, 60, 41, 37, 16, 46, 35, 44, 21,
    52, 32, 23, 11, 54, 26, 40, 15, 34, 20, 31, 10, 25, 14, 19, 9,  13, 8,  7,  6};

static __always_inline __u32 bit_number(__u64 low) {
    return bit_of_power[((low * 0x03f79d71b4ca8b09ULL) >> 58) & 63];
}

#if defined(__TARGET_ARCH_x86)
/* Linux 7.2 renamed mm_struct's trailing array, whose first bits are mm_cpumask(). */
struct mm_struct___flexible_array {
    unsigned long flexible_array[0];
} __attribute__((preserve_access_index));

static __always_inline const void *mm_cpu_mask(struct mm_struct *mm) {
    struct mm_struct___flexible_array *renamed = (void *)mm;

    if (bpf_core_field_exists(mm->cpu_bitmap))
        return &mm->cpu_bitmap[0];
    if (bpf_core_field_exists(renamed->flexible_array))
        return &renamed->flexible_array[0];
    return NULL;
}
#endif

/* Reads into `words` the mask of the CPUs a remote flush request names, at
 * tlb_flush(remote_send_ipi) in the sender's context, and says where it came from.
 * - Reclaim and migration unmap pages of many mms and flush once for all of them
 *   (try_to_unmap_flush()): the CPUs are the task's tlb_ubc.arch.cpumask, and the flush is
 *   a full one while tlb_ubc.flush_required is set. Checked first, as Linux 5.10 passes a
 *   static flush_tlb_info there and leaves the per-CPU one as the last mm flush left it.
 * - Every other remote flush (flush_tlb_mm_range()) names mm_cpumask(info->mm), the first
 *   bits of mm->cpu_bitmap.
 * A full flush of one mm while the task has a batch pending is taken for the batch's: the
 *   kernel defers every remote flush of a reclaim pass into the batch, so that is rare. */
static __always_inline int read_flush_targets(__u64 *words, __u32 nwords, __u32 cpu,
                                              unsigned long pages) {
#if defined(__TARGET_ARCH_x86)
    struct task_struct *task = (struct task_struct *)bpf_get_current_task();
    const void *mask = NULL;
    int source = TLBFLUSH_TARGETS_UNKNOWN;

    if (bpf_core_field_exists(task->tlb_ubc) && pages == TLB_FLUSH_ALL_PAGES &&
        BPF_CORE_READ(task, tlb_ubc.flush_required)) {
        mask = &task->tlb_ubc.arch.cpumask;
        source = TLBFLUSH_TARGETS_BATCH;
    } else if (read_flush_info && bpf_core_field_exists(task->se.cfs_rq) &&
               bpf_core_field_exists(struct cfs_rq, rq)) {
        struct rq *rq = BPF_CORE_READ(task, se.cfs_rq, rq);
        struct flush_tlb_info *info;
        struct mm_struct *mm = NULL;

        /* The runqueue must be this CPU's, or the distance leads elsewhere. */
        if (rq && BPF_CORE_READ(rq, cpu) == cpu) {
            info = (void *)rq + flush_info_from_rq;
            mm = BPF_CORE_READ(info, mm);
        }
        if (mm) {
            mask = mm_cpu_mask(mm);
            source = mask ? TLBFLUSH_TARGETS_MM : TLBFLUSH_TARGETS_UNKNOWN;
        }
    }
    if (!mask || nwords == 0 || nwords > TLBFLUSH_CPU_WORDS ||
        bpf_probe_read_kernel(words, nwords * sizeof(__u64), mask))
        return TLBFLUSH_TARGETS_UNKNOWN;
    return source;
#else
    return TLBFLUSH_TARGETS_UNKNOWN;
#endif
}

/* One remote flush request sent from `cpu`: counted for each CPU it names but the sender's own
 * (flush_tlb_mm_range() flushes that one locally), and with --culprits for its sender. */
static __always_inline void count_flush_request(void *ctx, __u32 cpu, unsigned long pages) {
    __u64 words[TLBFLUSH_CPU_WORDS] = {};
    __u32 nwords = (nr_cpus + 63) / 64;
    struct tlbflush_culprit_key key = {};
    __u64 pid_tgid = bpf_get_current_pid_tgid();
    int source;

    if (!pid_selected(pid_tgid))
        return;
    source = read_flush_targets(words, nwords, cpu, pages);
    if (source >= 0 && source < TLBFLUSH_TARGET_SOURCES)
        __sync_fetch_and_add(&request_sources[source], 1);
    if (count_culprits) {
        key = culprit_of(ctx, pid_tgid);
        if (collect_stacks) {
            __u32 zero = 0;
            struct request_stacks *last = bpf_map_lookup_elem(&last_request_stacks, &zero);

            if (last) {
                last->pid_tgid = pid_tgid;
                last->kernel_stack = key.kernel_stack;
                last->user_stack = key.user_stack;
            }
        }
    }
    if (source == TLBFLUSH_TARGETS_UNKNOWN) {
        /* Said as such: -c cannot select what names no known CPU. */
        if (count_culprits)
            count_culprit(&key, true);
        return;
    }
    if (cpu / 64 < TLBFLUSH_CPU_WORDS)
        words[cpu / 64] &= ~(1ULL << (cpu % 64));
    for (__u32 w = 0; w < TLBFLUSH_CPU_WORDS && w < nwords; w++) {
        __u64 word = words[w];

        if (filter_cpus)
            word &= cpu_mask[w];
        for (int i = 0; i < 64 && word; i++) {
            __u64 low = word & -word;
            __u32 target = w * 64 + bit_number(low);

            word &= word - 1;
            if (target >= nr_cpus)
                break;
            __sync_fetch_and_add(u64_of(flush_requests, target, sizeof(flush_requests[0])), 1);
            if (count_culprits) {
                key.cpu = target;
                count_culprit(&key, true);
            }
        }
    }
}

static __always_inline int on_tlb_flush(void *ctx, int reason, unsigned long pages) {
    __u32 cpu = bpf_get_smp_processor_id();
    struct task_struct *task;
    __u32 slot, epoch = 0, row;
    __u64 pid_tgid;

    if (cpu >= nr_cpus || reason < 0)
        return 0;
    /* Without the csd tracepoints, a remote flush marks the handler run it happens in as a
     * TLB shootdown; before any filter, as those concern counting, not which IPI this is. */
    if (tlb_marks_from_tlb_flush &&
        (reason == reason_remote_shootdown || reason == reason_remote_wrong_cpu))
        note_tlb_flush(cpu);
    /* The CPUs the request names: -c selects targets and -p the sender; -r selects reasons of
     * the counts table, not these. */
    if (reason == reason_remote_send_ipi)
        count_flush_request(ctx, cpu, pages);
    slot = reason < TLBFLUSH_MAX_REASONS ? reason : TLBFLUSH_MAX_REASONS - 1;
    /* clang proves the clamp and drops the mask unless the value is hidden from it; the
     * verifier needs the mask to bound the array index. */
    barrier_var(slot);
    slot &= TLBFLUSH_MAX_REASONS - 1;
    if (!cpu_selected(cpu) || !((reason_mask >> slot) & 1))
        return 0;
    /* The hot path of count mode ends at add_count(): the task is looked up only when an
     * option needs it. */
    if (!filter_pid && !per_process && !trace_events) {
        add_count(&counts_of(cpu)[slot], pages, false);
        return 0;
    }
    task = current_task_readable();
    pid_tgid = task_pid_tgid(task);
    if (!pid_selected(pid_tgid))
        return 0;

    /* -P: the CPU's counts go by epoch like the process's (rows epoch * nr_cpus + cpu), the
     * epoch read once, so that an interval's rows add up to its totals exactly. The row is
     * checked against the rows there are: 5.10's verifier loses the bound of the sum. */
    if (per_process)
        epoch = *(volatile __u32 *)&proc_epoch & 1;
    row = epoch ? cpu + nr_cpus : cpu;
    if (row >= (per_process ? 2 * nr_cpus : nr_cpus))
        return 0;
    add_count(&counts_of(row)[slot], pages, false);
    if (per_process)
        count_per_process(pid_tgid, cpu, slot, pages, epoch);
    if (trace_events)
        trace_event(ctx, task, pid_tgid, cpu, reason, pages);
    return 0;
}

SEC("tp_btf/tlb_flush")
int BPF_PROG(tlb_flush_btf, int reason, unsigned long pages) {
    return on_tlb_flush(ctx, reason, pages);
}

SEC("raw_tp/tlb_flush")
int BPF_PROG(tlb_flush_raw, int reason, unsigned long pages) {
    return on_tlb_flush(ctx, reason, pages);
}

SEC("tracepoint/tlb/tlb_flush")
int tlb_flush_tp(struct trace_event_raw_tlb_flush *ctx) {
    on_tlb_flush(ctx, ctx->reason, ctx->pages);
    return KEEP_EVENT;
}

/* Sender side: one csd queued per target CPU, in the sending task's context. */
static __always_inline int on_csd_queue(void *ctx, __u32 cpu, void *func) {
    struct tlbflush_culprit_key key;
    struct request_stacks *last;
    __u32 zero = 0;
    __u64 pid_tgid;

    if ((__u64)func != tlb_flush_func || !cpu_selected(cpu))
        return 0;
    pid_tgid = bpf_get_current_pid_tgid();
    if (!pid_selected(pid_tgid))
        return 0;
    last = collect_stacks ? bpf_map_lookup_elem(&last_request_stacks, &zero) : NULL;
    if (last && last->pid_tgid == pid_tgid) {
        key = (struct tlbflush_culprit_key){
            .pid = pid_tgid >> 32,
            .tid = (__u32)pid_tgid,
            .kernel_stack = last->kernel_stack,
            .user_stack = last->user_stack,
        };
    } else {
        key = culprit_of(ctx, pid_tgid);
    }
    key.cpu = cpu;
    count_culprit(&key, false);
    return 0;
}

SEC("tp_btf/csd_queue_cpu")
int BPF_PROG(csd_queue_btf, unsigned int cpu, unsigned long callsite, void *func, void *csd) {
    return on_csd_queue(ctx, cpu, func);
}

SEC("raw_tp/csd_queue_cpu")
int BPF_PROG(csd_queue_raw, unsigned int cpu, unsigned long callsite, void *func, void *csd) {
    return on_csd_queue(ctx, cpu, func);
}

SEC("tracepoint/csd/csd_queue_cpu")
int csd_queue_tp(struct trace_event_raw_csd_queue_cpu *ctx) {
    on_csd_queue(ctx, ctx->cpu, ctx->func);
    return KEEP_EVENT;
}

/* Victim side: the callback runs from the IPI (or from the idle loop draining the queue).
 * A NULL csd is the sender running the callback on itself (smp_call_function_many_cond()'s
 * local call): not a remote shootdown. A csd is queued only for CPUs other than the sender's,
 * the initiator of the flush, so csd != NULL is flush_tlb_func's `!local`. */
static __always_inline bool remote_tlb_callback(void *func, void *csd) {
    return (__u64)func == tlb_flush_func && csd;
}

static __always_inline int on_csd_entry(void *func, void *csd) {
    __u32 cpu = bpf_get_smp_processor_id();

    if (!remote_tlb_callback(func, csd) || cpu >= nr_cpus)
        return 0;
    if (cpu_selected(cpu) && (!filter_pid || pid_selected(bpf_get_current_pid_tgid())))
        (*u64_of(flush_ipis, cpu, sizeof(flush_ipis[0])))++;
    note_tlb_flush(cpu);
    /* Only callbacks inside a handler run are timed: the idle loop's are counted above. */
    ipi_state_of(cpu)->callback_since = ipi_state_of(cpu)->handler_since ? bpf_ktime_get_ns() : 0;
    return 0;
}

static __always_inline int on_csd_exit(void *func, void *csd) {
    __u32 cpu = bpf_get_smp_processor_id();
    struct tlbflush_ipi_state *st;
    __u64 now;

    if (!remote_tlb_callback(func, csd) || cpu >= nr_cpus)
        return 0;
    st = ipi_state_of(cpu);
    now = bpf_ktime_get_ns();
    if (st->callback_since && now >= st->callback_since && cpu_selected(cpu)) {
        ipi_counts_of(cpu)->callbacks++;
        hist_add(u64_of(callback_hist_ns[0], cpu, sizeof(callback_hist_ns[0])),
                 now - st->callback_since);
        *u64_of(callback_sum_ns, cpu, sizeof(callback_sum_ns[0])) += now - st->callback_since;
    }
    st->callback_since = 0;
    return 0;
}

SEC("tp_btf/csd_function_entry")
int BPF_PROG(csd_entry_btf, void *func, void *csd) {
    return on_csd_entry(func, csd);
}

SEC("tp_btf/csd_function_exit")
int BPF_PROG(csd_exit_btf, void *func, void *csd) {
    return on_csd_exit(func, csd);
}

SEC("raw_tp/csd_function_entry")
int BPF_PROG(csd_entry_raw, void *func, void *csd) {
    return on_csd_entry(func, csd);
}

SEC("raw_tp/csd_function_exit")
int BPF_PROG(csd_exit_raw, void *func, void *csd) {
    return on_csd_exit(func, csd);
}

SEC("tracepoint/csd/csd_function_entry")
int csd_entry_tp(struct trace_event_raw_csd_function *ctx) {
    on_csd_entry(ctx->func, ctx->csd);
    return KEEP_EVENT;
}

SEC("tracepoint/csd/csd_function_exit")
int csd_exit_tp(struct trace_event_raw_csd_function *ctx) {
    on_csd_exit(ctx->func, ctx->csd);
    return KEEP_EVENT;
}

/* The handler window: every call-function IPI is timed from its entry tracepoint to its exit
 * tracepoint, and kept when a TLB flush ran inside it (the csd callbacks above, or tlb_flush
 * without them), once per run however many callbacks shared the IPI. */
static __always_inline int on_ipi_entry(void) {
    __u32 cpu = bpf_get_smp_processor_id();

    if (cpu >= nr_cpus)
        return 0;
    ipi_state_of(cpu)->handler_since = bpf_ktime_get_ns();
    ipi_state_of(cpu)->tlb_flushes = 0;
    return 0;
}

static __always_inline int on_ipi_exit(void) {
    __u32 cpu = bpf_get_smp_processor_id();
    struct tlbflush_ipi_state *st;
    __u64 now, since, ns;

    if (cpu >= nr_cpus)
        return 0;
    st = ipi_state_of(cpu);
    since = st->handler_since;
    st->handler_since = 0;
    if (!st->tlb_flushes || !since || !cpu_selected(cpu))
        return 0;
    now = bpf_ktime_get_ns();
    if (now < since)
        return 0;
    ns = now - since;
    ipi_counts_of(cpu)->handler_runs++;
    if (st->tlb_flushes > 1)
        ipi_counts_of(cpu)->shared_runs++;
    hist_add(u64_of(handler_hist_ns[0], cpu, sizeof(handler_hist_ns[0])), ns);
    hist_add(u64_of(handler_hist_us[0], cpu, sizeof(handler_hist_us[0])), ns / 1000);
    *u64_of(handler_sum_ns, cpu, sizeof(handler_sum_ns[0])) += ns;
    return 0;
}

SEC("tp_btf/call_function_entry")
int BPF_PROG(ipi_entry_btf, int vector) {
    return on_ipi_entry();
}
SEC("tp_btf/call_function_exit")
int BPF_PROG(ipi_exit_btf, int vector) {
    return on_ipi_exit();
}
SEC("tp_btf/call_function_single_entry")
int BPF_PROG(ipi1_entry_btf, int vector) {
    return on_ipi_entry();
}
SEC("tp_btf/call_function_single_exit")
int BPF_PROG(ipi1_exit_btf, int vector) {
    return on_ipi_exit();
}

SEC("raw_tp/call_function_entry")
int BPF_PROG(ipi_entry_raw, int vector) {
    return on_ipi_entry();
}
SEC("raw_tp/call_function_exit")
int BPF_PROG(ipi_exit_raw, int vector) {
    return on_ipi_exit();
}
SEC("raw_tp/call_function_single_entry")
int BPF_PROG(ipi1_entry_raw, int vector) {
    return on_ipi_entry();
}
SEC("raw_tp/call_function_single_exit")
int BPF_PROG(ipi1_exit_raw, int vector) {
    return on_ipi_exit();
}

SEC("tracepoint/irq_vectors/call_function_entry")
int ipi_entry_tp(void *ctx) {
    on_ipi_entry();
    return KEEP_EVENT;
}
SEC("tracepoint/irq_vectors/call_function_exit")
int ipi_exit_tp(void *ctx) {
    on_ipi_exit();
    return KEEP_EVENT;
}
SEC("tracepoint/irq_vectors/call_function_single_entry")
int ipi1_entry_tp(void *ctx) {
    on_ipi_entry();
    return KEEP_EVENT;
}
SEC("tracepoint/irq_vectors/call_function_single_exit")
int ipi1_exit_tp(void *ctx) {
    on_ipi_exit();
    return KEEP_EVENT;
}
