// numamove's Prometheus metrics (--prometheus), apart from the tool for the unit tests.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "numamove.h"
#include "prometheus/exporter.h"
#include "prometheus/prometheus.h"

namespace memlat::numamove {

// One read of the BPF side.
struct Counts {
    std::array<numamove_count, NUMAMOVE_MAX_REASONS> by_reason{};
    std::array<std::array<uint64_t, MEMLAT_HIST_SLOTS>, NUMAMOVE_MAX_REASONS> hist_us{};
    bool timed = false; // mm_migrate_pages_start (or an entry hook) was attached
    bool per_call = false;
    numamove_call_count calls{};
    std::array<uint64_t, MEMLAT_HIST_SLOTS> call_hist_us{};
    std::array<uint64_t, NUMAMOVE_TASK_MOVES> task_moves{};
    std::vector<std::pair<numamove_proc_key, numamove_proc_value>> procs; // comm label
};

class Metrics {
  public:
    // `numa_reason`: the value of numa_misplaced (-1: none), whose series exist from the start.
    Metrics(const PrometheusOptions &options, std::function<std::string(uint32_t)> reason_name,
            int64_t numa_reason, long page_bytes);
    void collect(const Counts &counts, prometheus::Exposition &out);

  private:
    bool by_comm_;
    std::function<std::string(uint32_t)> reason_name_;
    int64_t numa_reason_;
    long page_bytes_;
    prometheus::BoundedCounters by_comm_counts_;
};

} // namespace memlat::numamove
