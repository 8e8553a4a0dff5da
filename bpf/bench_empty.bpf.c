// SPDX-License-Identifier: GPL-2.0
/* The floor for bench/: tp_btf programs that do nothing, one per tracepoint the tools hook on
 * this kind of kernel. bench_empty attaches those it is asked for, so that a tool's cost can
 * be compared with empty programs on the same hooks, loaded the same way. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "common.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Each program is named after its tracepoint; bench_empty.cpp lists the same names. */
#define EMPTY(tracepoint)                                                                          \
	SEC("tp_btf/" #tracepoint)                                                                 \
	int BPF_PROG(e_##tracepoint)                                                               \
	{                                                                                          \
		return 0;                                                                          \
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
int e_tp_mm_compaction_migratepages(void *ctx)
{
	return KEEP_EVENT;
}
