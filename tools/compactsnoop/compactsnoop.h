/* Data shared by compactsnoop.bpf.c and compactsnoop.cpp. */
#ifndef MEMLAT_COMPACTSNOOP_H
#define MEMLAT_COMPACTSNOOP_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "memlat/hist.h"
#include "memlat/stack.h"

#define COMPACTSNOOP_COMM_LEN 16
/* Free-block counts kept per order; kernels have 11 (NR_PAGE_ORDERS), some configs up to 15. */
#define COMPACTSNOOP_MAX_ORDERS 16
/* Histogram rows per order: row order + 1, so order -1 (whole-zone compaction) is row 0. */
#define COMPACTSNOOP_ORDER_ROWS 16
/* Summary columns per status (enum compact_result has 9 values; room for more). */
#define COMPACTSNOOP_MAX_STATUS 16
#define COMPACTSNOOP_MAX_ZONES 8

/* Who a compaction run is for. */
enum compactsnoop_kind {
    COMPACTSNOOP_DIRECT = 0,    /* an allocation stalled in direct compaction */
    COMPACTSNOOP_KCOMPACTD = 1, /* the per-node kcompactd thread, woken by kswapd */
    COMPACTSNOOP_PROACTIVE = 2, /* kcompactd's proactive compaction (vm.compaction_proactiveness) */
    COMPACTSNOOP_MANUAL = 3,    /* a write to /proc/sys/vm/compact_memory or nodeN/compact */
    COMPACTSNOOP_KINDS = 4,
};

/* How much of the run's context is known. */
#define COMPACTSNOOP_HAVE_CC 1         /* read from struct compact_control (tp_btf, raw_tp) */
#define COMPACTSNOOP_HAVE_ZONE_STATE 2 /* -e: free blocks, watermarks and free pages read */
#define COMPACTSNOOP_HAVE_ENTRY 4      /* direct: mm_compaction_try_to_compact_pages was seen */

/* One compaction run (mm_compaction_begin .. mm_compaction_end), sent at its end. */
struct compactsnoop_event {
    __u64 ts_ns;  /* bpf_ktime_get_ns() at the end of the run */
    __u64 lat_ns; /* end - begin */
    __u64 gfp;    /* cc->gfp_mask, or the direct entry's gfp */
    __u64 migrated;
    __u64 failed;
    /* -e: the zone at the beginning of the run. */
    __u64 free_pages;
    __u64 wmark_min, wmark_low, wmark_high; /* with watermark_boost, as /proc/zoneinfo */
    __u64 wmark_boost; /* zone->watermark_boost, 0 where the kernel has none (before 5.0) */
    __u64 nr_free[COMPACTSNOOP_MAX_ORDERS]; /* free_area[order].nr_free */
    __u32 nr_orders;
    __u32 pid;
    __u32 tid;
    __u32 kind;
    __u32 flags;        /* COMPACTSNOOP_HAVE_* */
    __s32 nid;          /* -1 if unknown */
    __s32 zone;         /* enum zone_type; -1 if unknown */
    __s32 order;        /* -1: the whole zone (manual or proactive compaction) */
    __s32 mode;         /* enum migrate_mode; -1 when only `sync` is known */
    __s32 status;       /* enum compact_result */
    __s32 prio;         /* direct: enum compact_priority of the entry; -1 otherwise */
    __s32 kernel_stack; /* -K: stack id at the beginning; negative if none */
    __u8 sync;
    __u8 whole_zone;
    __u8 pad[6];
    char comm[COMPACTSNOOP_COMM_LEN];
};

/* Per kind and status, kept in the kernel so the exit summary is exact even when trace
 * events were dropped. */
struct compactsnoop_summary {
    __u64 runs;
    __u64 total_ns;
    __u64 max_ns;
    __u64 migrated;
    __u64 failed;
};

#endif
