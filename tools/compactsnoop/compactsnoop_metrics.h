// compactsnoop's Prometheus metrics (--prometheus), apart from the tool for the unit tests.
#pragma once

#include <array>
#include <functional>
#include <string>

#include "compactsnoop.h"
#include "prometheus/prometheus.h"

namespace memlat::compactsnoop {

// One read of the BPF side.
struct Counts {
    std::array<bool, COMPACTSNOOP_KINDS> kinds{}; // the kinds traced
    std::array<std::array<compactsnoop_summary, COMPACTSNOOP_MAX_STATUS>, COMPACTSNOOP_KINDS>
        summary{};
    // Per kind and order row (row 0: order -1, the whole zone; row r: order r - 1; the last
    // row: that order and above), and the sums of their values.
    std::array<std::array<std::array<uint64_t, MEMLAT_HIST_SLOTS>, COMPACTSNOOP_ORDER_ROWS>,
               COMPACTSNOOP_KINDS>
        hist_us{};
    std::array<std::array<uint64_t, COMPACTSNOOP_ORDER_ROWS>, COMPACTSNOOP_KINDS> hist_sum_ns{};
    std::array<uint64_t, COMPACTSNOOP_KINDS> deferred{};
    uint64_t kcompactd_wakes = 0;
};

// `status_name(value)`: the kernel's name of a compaction result.
void collect_metrics(const Counts &counts, const std::function<std::string(int32_t)> &status_name,
                     long page_bytes, prometheus::Exposition &out);

} // namespace memlat::compactsnoop
