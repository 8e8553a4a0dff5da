// lockstall's Prometheus metrics (--prometheus, `memlat exporter`): the waits for mmap_lock the
// BPF side counted, by mode. Apart from the tool so that the unit tests and the metric list of
// docs/exporter.md can check them.
#pragma once

#include <array>
#include <string>

#include "lockstall.h"
#include "prometheus/exporter.h"
#include "prometheus/prometheus.h"

namespace memlat::lockstall {

// One read of the BPF side: [0] read, [1] write.
struct Counts {
    std::array<lockstall_totals, 2> totals{};
    std::array<std::array<uint64_t, MEMLAT_HIST_SLOTS>, 2> hist_us{};
};

class Metrics {
  public:
    // `cgroup`: the -G path, a label of every series when given; `min_wait_s`: what a slow
    // wait is (-m), said in the help of its families.
    Metrics(std::string cgroup, double min_wait_s);
    void collect(const Counts &counts, prometheus::Exposition &out) const;

  private:
    prometheus::Labels base_;
    double min_wait_s_;
};

} // namespace memlat::lockstall
