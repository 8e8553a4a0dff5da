// SPDX-License-Identifier: GPL-2.0
/* The floor for bench/: tp_btf programs that do nothing, one per tracepoint the tools hook on
 * this kind of kernel. bench_empty attaches those it is asked for, so that a tool's cost can
 * be compared with empty programs on the same hooks, loaded the same way. With -b, programs on
 * the same hooks run one primitive the tools are built of (a clock read, a lookup in a per-thread
 * hash map, an atomic add), so that what each costs where the tools run it (inside reclaim or
 * compaction, with cold caches) is measured beside the floor: the least a begin/end pair can
 * cost (bench/run_bench.py --primitives). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "common.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* The primitives -b selects (bench_empty.cpp's names for them). Set before load. */
enum {
    BODY_CLOCK = 1,  /* bpf_ktime_get_ns() */
    BODY_LOOKUP = 2, /* the current thread's entry in a preallocated hash map keyed by TID */
    BODY_ATOMIC = 4, /* the result added atomically (a locked add) instead of stored */
};
const volatile __u32 body = 0;
/* Where every body writes its result: what every tool does at least is read its read-only
 * options and write a counter, one line of each. */
__u64 body_sink = 0;

/* As the tools' per-thread state maps (compat.bpf.h). */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 4096);
    __type(key, __u32);
    __type(value, __u64);
} body_threads SEC(".maps");

static __always_inline int run_body(void) {
    __u64 value = 1, zero = 0, *entry;
    __u32 tid;

    if (body & BODY_CLOCK)
        value = bpf_ktime_get_ns();
    if (body & BODY_LOOKUP) {
        tid = (__u32)bpf_get_current_pid_tgid();
        entry = bpf_map_lookup_elem(&body_threads, &tid);
        if (!entry) {
            bpf_map_update_elem(&body_threads, &tid, &zero, BPF_NOEXIST);
            entry = bpf_map_lookup_elem(&body_threads, &tid);
        }
        if (entry) {
            *entry = value;
            return 0;
        }
    }
    if (body & BODY_ATOMIC)
        __sync_fetch_and_add(&body_sink, value);
    else
        body_sink = value;
    return 0;
}

/* Each program is named after its tracepoint (b_: with the body); bench_empty.cpp lists the
 * same names. The empty ones stay empty: a read of `body` there would cost the floor a line. */
#define EMPTY(tracepoint)                                                                          \
    SEC("tp_btf/" #tracepoint)                                                                     \
    int BPF_PROG(e_##tracepoint) {                                                                 \
        return 0;                                                                                  \
    }                                                                                              \
    SEC("tp_btf/" #tracepoint)                                                                     \
    int BPF_PROG(b_##tracepoint) {                                                                 \
        return run_body();                                                                         \
    }

EMPTY(tlb_flush)
EMPTY(csd_function_entry)
EMPTY(csd_function_exit)
EMPTY(mm_vmscan_direct_reclaim_begin)
EMPTY(mm_vmscan_direct_reclaim_end)
EMPTY(mm_vmscan_memcg_reclaim_begin)
EMPTY(mm_vmscan_memcg_reclaim_end)
EMPTY(mm_vmscan_memcg_softlimit_reclaim_begin)
EMPTY(mm_vmscan_memcg_softlimit_reclaim_end)
EMPTY(mm_vmscan_node_reclaim_begin)
EMPTY(mm_vmscan_node_reclaim_end)
EMPTY(mm_compaction_begin)
EMPTY(mm_compaction_end)
EMPTY(mm_compaction_migratepages)
EMPTY(mm_compaction_try_to_compact_pages)
EMPTY(mm_compaction_deferred)
EMPTY(mm_compaction_kcompactd_wake)
EMPTY(mm_migrate_pages_start)
EMPTY(mm_migrate_pages)
EMPTY(mm_filemap_add_to_page_cache)
EMPTY(writeback_dirty_folio)
EMPTY(mm_filemap_get_pages)
EMPTY(mm_filemap_map_pages)
EMPTY(mm_filemap_fault)
EMPTY(sched_switch)
EMPTY(balance_dirty_pages)
EMPTY(sched_process_exit)

/* compactsnoop reads mm_compaction_migratepages through the classic tracepoint (its raw
 * arguments changed meaning in 6.0), so its floor is an empty classic tracepoint program. */
SEC("tracepoint/compaction/mm_compaction_migratepages")
int e_tp_mm_compaction_migratepages(void *ctx) {
    return KEEP_EVENT;
}
