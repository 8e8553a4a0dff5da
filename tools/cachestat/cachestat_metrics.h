// cachestat's Prometheus metrics (--prometheus), apart from the tool for the unit tests.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cachestat.h"
#include "cachestat_format.h"
#include "prometheus/exporter.h"
#include "prometheus/prometheus.h"

namespace memlat::cachestat {

class Metrics {
  public:
    // `cgroup`: the -G path, a label of every series when given. `accesses_known`: whether
    // anything on this kernel counts accesses (else that family is left out).
    Metrics(const PrometheusOptions &options, std::string cgroup, bool accesses_known);
    // `total`: all CPUs; `procs`: per process, with --prometheus-labels comm.
    void collect(const Counts &total,
                 const std::vector<std::pair<cachestat_proc_key, cachestat_proc_value>> &procs,
                 prometheus::Exposition &out);

  private:
    bool by_comm_, accesses_known_;
    prometheus::Labels base_;
    prometheus::BoundedCounters by_comm_counts_;
};

} // namespace memlat::cachestat
