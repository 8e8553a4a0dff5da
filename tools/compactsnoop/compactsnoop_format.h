// compactsnoop's output lines and the fragmentation-index arithmetic, apart from the tool so
// the unit tests can check them.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>

#include "compactsnoop.h"
#include "kernel/gfp.h"

namespace memlat::compactsnoop {

// What mm/vmstat.c's fill_contig_page_info() gathers from a zone's free lists for one order.
struct ContigInfo {
    uint64_t free_pages = 0;           // free base pages, all orders
    uint64_t free_blocks_total = 0;    // free blocks of any order
    uint64_t free_blocks_suitable = 0; // free blocks of at least `order`, in units of `order`
};

// The same sums as the kernel, from free_area[order].nr_free of orders 0..N-1.
ContigInfo contig_info(std::span<const uint64_t> nr_free, unsigned suitable_order);

// The kernel's __fragmentation_index(): thousandths, -1000 when a block of the order is free
// (the index is meaningless then), 0 with no free block at all, else between 0 (the request
// would fail for lack of memory) and 1000 (it would fail because memory is fragmented).
int fragmentation_index(unsigned order, const ContigInfo &info);

// The index of a run: nullopt for order -1 (whole-zone compaction) or an order beyond the
// zone's free lists.
std::optional<int> fragmentation_index(std::span<const uint64_t> nr_free, int order);

// "0.912", "-1.000": as /sys/kernel/debug/extfrag/extfrag_index prints it.
std::string fragindex_text(int index);

const char *kind_name(uint32_t kind);

// Names of the kernel's enums, from its BTF (kernel_enum_names) in the tool; tests fill them.
struct Names {
    std::map<int64_t, std::string> zones;    // enum zone_type, "ZONE_" removed: dma32, normal
    std::map<int64_t, std::string> statuses; // enum compact_result, "COMPACT_" removed
    std::map<int64_t, std::string> modes;    // enum migrate_mode, "MIGRATE_" removed
    std::map<int64_t, std::string> prios;    // enum compact_priority, "COMPACT_PRIO_" removed
};

std::string zone_name(const compactsnoop_event &e, const Names &n);
std::string status_name(int32_t status, const Names &n);
std::string mode_name(const compactsnoop_event &e, const Names &n);

struct LineFormat {
    bool timestamp = false; // TIME(s) column: seconds since the first run began
    bool extended = false;  // FRAGIDX MIN LOW HIGH FREE MIGRATED FAILED
};

std::string header(const LineFormat &f);
std::string line(const compactsnoop_event &e, double time_s, const LineFormat &f, const Names &n);
nlohmann::json json_event(const compactsnoop_event &e, double time_s, const LineFormat &f,
                          const Names &n, const GfpNames &gfp);

// What the exit summary shows: the BPF side's counters (its .bss) and the tool's losses.
struct SummaryCounts {
    compactsnoop_summary summary[COMPACTSNOOP_KINDS][COMPACTSNOOP_MAX_STATUS] = {};
    uint64_t deferred[COMPACTSNOOP_KINDS] = {};
    uint64_t direct_entries = 0, direct_entries_run = 0, kcompactd_wakes = 0;
    uint64_t unpaired_ends = 0, table_full = 0;
    uint64_t lost_events = 0;                // records not reserved, or lost by a perf buffer
    std::string events_name = "ring buffer"; // where they were lost
    uint64_t skipped_runs = 0;               // program runs the kernel skipped
    uint32_t kind_mask = (1u << COMPACTSNOOP_KINDS) - 1; // -k: the kinds traced
};

// The summary at exit as text (for stderr): runs by kind and status, with an "(all)" row
// for a kind with several statuses; direct entries and kcompactd wake-ups for the kinds
// traced; what was not counted. Status COMPACTSNOOP_MAX_STATUS - 1 collects the others.
std::string summary_text(const SummaryCounts &c, const Names &n);
// The same as one JSON object (-j).
nlohmann::json summary_json(const SummaryCounts &c, const Names &n);

} // namespace memlat::compactsnoop
