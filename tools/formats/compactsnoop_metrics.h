// compactsnoop's Prometheus metrics (--prometheus), apart from the tool for the unit tests.
#pragma once

#include <array>
#include <functional>
#include <string>

#include "compactsnoop.h"
#include "prometheus.h"

namespace memlat::compactsnoop {

// One read of the BPF side.
struct Counts {
    std::array<bool, COMPACTSNOOP_KINDS> kinds{}; // the kinds traced
    std::array<std::array<compactsnoop_summary, COMPACTSNOOP_MAX_STATUS>, COMPACTSNOOP_KINDS>
        summary{};
    // Per kind, summed over the order rows.
    std::array<std::array<uint64_t, MEMLAT_HIST_SLOTS>, COMPACTSNOOP_KINDS> hist_us{};
    std::array<uint64_t, COMPACTSNOOP_KINDS> deferred{};
    uint64_t kcompactd_wakes = 0;
};

// `status_name(value)`: the kernel's name of a compaction result.
void collect_metrics(const Counts &counts, const std::function<std::string(int32_t)> &status_name,
                     long page_bytes, prometheus::Exposition &out);

} // namespace memlat::compactsnoop
