// drsnoop's Prometheus metrics (--prometheus): what the BPF side counted, as metric families.
// Apart from the tool so that the unit tests and the metric list of docs/exporter.md can check
// them.
#pragma once

#include <array>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "drsnoop.h"
#include "prometheus/exporter.h"
#include "prometheus/prometheus.h"

namespace memlat::drsnoop {

// One read of the BPF side.
struct Counts {
    std::array<bool, DRSNOOP_KINDS> kinds{}; // the kinds traced
    std::array<drsnoop_totals, DRSNOOP_KINDS> totals{};
    std::array<std::array<uint64_t, MEMLAT_HIST_SLOTS>, DRSNOOP_KINDS> hist_us{};
    // Per process and kind, with --prometheus-labels comm.
    std::vector<std::pair<drsnoop_proc_key, drsnoop_summary>> summaries;
    // Per cgroup and kind, with --prometheus-labels cgroup; and the cgroups that exist now,
    // by id (entries of others are left out, and their series removed).
    std::vector<std::pair<drsnoop_cgroup_key, drsnoop_totals>> cgroups;
    std::map<uint64_t, std::string> cgroup_paths;
    std::map<uint64_t, Workload> cgroup_workloads; // what runs in them (kernel/workloads.h)
    uint64_t table_full = 0;
};

class Metrics {
  public:
    // `cgroup`: the -G path, a label of every series when given.
    Metrics(const PrometheusOptions &options, std::string cgroup, long page_bytes);
    void collect(const Counts &counts, prometheus::Exposition &out);

  private:
    bool by_comm_, by_cgroup_;
    prometheus::Labels base_;
    long page_bytes_;
    prometheus::BoundedCounters by_comm_counts_, by_cgroup_counts_;
};

} // namespace memlat::drsnoop
