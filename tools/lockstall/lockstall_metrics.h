// lockstall's Prometheus metrics (--prometheus, `memlat exporter`): the waits for mmap_lock the
// BPF side counted, by mode. Apart from the tool so that the unit tests and the metric list of
// docs/exporter.md can check them.
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include "lockstall.h"
#include "prometheus/exporter.h"
#include "prometheus/prometheus.h"

namespace memlat::lockstall {

// A slow wait's cause as the series name it: what the waiter did (its OP), and the hold it
// queued behind (its root): its kind ("monitor", "own_process", "other_process", "none"), its
// thread name and OP ("" without a root).
struct Cause {
    lockstall_cause_key key{};
    lockstall_cause value{};
    std::string op, root_comm, root_op;
};

// One read of the BPF side: [0] read, [1] write.
struct Counts {
    std::array<lockstall_totals, 2> totals{};
    std::array<std::array<uint64_t, MEMLAT_HIST_SLOTS>, 2> hist_us{};
    std::vector<Cause> causes;
    std::map<uint64_t, std::string> cgroup_paths;  // --prometheus-labels cgroup
    std::map<uint64_t, Workload> cgroup_workloads; // ... and what runs there
};

// The root label of a cause: "monitor" (a known monitoring program, by thread name),
// "own_process" (a thread of the waiter's process), "other_process", "none" (no hold kept).
const char *root_kind(const lockstall_cause_key &key, std::string_view root_comm);

class Metrics {
  public:
    // `cgroup`: the -G path, a label of every series when given; `min_wait_s`: what a slow
    // wait is (-m), said in the help of its families.
    Metrics(const PrometheusOptions &options, std::string cgroup, double min_wait_s);
    void collect(const Counts &counts, prometheus::Exposition &out);

  private:
    bool by_cgroup_;
    prometheus::Labels base_;
    double min_wait_s_;
    prometheus::BoundedCounters causes_;
};

} // namespace memlat::lockstall
