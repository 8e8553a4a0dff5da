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

} // namespace memlat::compactsnoop
