// memstall's Prometheus metrics (--prometheus): what the BPF side counted, as metric families.
// Apart from the tool so that the unit tests can check them.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "memlat/memstall.h"
#include "prometheus/exporter.h"
#include "prometheus/prometheus.h"

namespace memlat::memstall {

// One read of the BPF side.
struct Counts {
    // The causes measured as themselves on this host, which have series: not those that
    // would read 0 (PSI off, no tracepoint) or be counted as other (not told apart).
    std::array<bool, MEMSTALL_CAUSES> causes{};
    std::array<memstall_totals, MEMSTALL_CAUSES> totals{};
    // With --prometheus-labels cgroup: the per-thread table ((tid, cause) -> value, which
    // names the thread's cgroup), the cgroups of its entries that exist now, by id, and
    // whether the cgroup of a path exists (a series' cgroup whose threads are gone; none:
    // such a series goes).
    std::vector<std::pair<memstall_key, memstall_value>> threads;
    std::map<uint64_t, std::string> cgroup_paths;
    std::map<uint64_t, Workload> cgroup_workloads; // what runs in them (kernel/workloads.h)
    std::function<bool(const std::string &path)> cgroup_exists;
};

class Metrics {
  public:
    // `cgroup`: the -G path, a label of every series when given.
    Metrics(const PrometheusOptions &options, std::string cgroup);
    void collect(const Counts &counts, prometheus::Exposition &out);

  private:
    bool by_cgroup_;
    prometheus::Labels base_;
    prometheus::BoundedCounters by_cgroup_counts_;
};

} // namespace memlat::memstall
