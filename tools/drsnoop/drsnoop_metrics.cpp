#include "drsnoop_metrics.h"

#include <cstring>
#include <fmt/format.h>

#include "drsnoop_format.h"

namespace memlat::drsnoop {

using prometheus::Labels;
using prometheus::Type;

Metrics::Metrics(const PrometheusOptions &options, std::string cgroup, long page_bytes)
    : by_comm_(options.label("comm")), by_cgroup_(options.label("cgroup")), page_bytes_(page_bytes),
      by_comm_counts_(3, options.max_series, {"comm"}),
      by_cgroup_counts_(3, options.max_series, {"cgroup"}) {
    base_ = prometheus::cgroup_filter_labels(std::move(cgroup), by_cgroup_);
}

void Metrics::collect(const Counts &c, prometheus::Exposition &out) {
    auto labels = [&](uint32_t kind) {
        return prometheus::labels_of("kind", kind_name(kind), base_);
    };
    out.family("memlat_reclaim_stalls", Type::Counter,
               "Stalls of threads in memory reclaim, by kind (direct, memcg, softlimit, node)");
    for (uint32_t k = 0; k < DRSNOOP_KINDS; ++k)
        if (c.kinds[k])
            out.sample(labels(k), static_cast<double>(c.totals[k].stalls));
    out.family("memlat_reclaim_stall_seconds", Type::Histogram,
               "Time threads stalled in memory reclaim, by kind", "seconds");
    for (uint32_t k = 0; k < DRSNOOP_KINDS; ++k)
        if (c.kinds[k])
            out.histogram(labels(k), c.hist_us[k], 1e-6,
                          static_cast<double>(c.totals[k].total_ns) / 1e9);
    out.family("memlat_reclaim_reclaimed_bytes", Type::Counter,
               "Memory the stalled threads' reclaim freed (nr_reclaimed pages), by kind", "bytes");
    for (uint32_t k = 0; k < DRSNOOP_KINDS; ++k)
        if (c.kinds[k])
            out.sample(labels(k), static_cast<double>(c.totals[k].pages) * page_bytes_);

    // The values of a per-task or per-cgroup series: stalls, seconds, bytes.
    auto values = [&](const auto &counts) {
        return std::array<double, 3>{static_cast<double>(counts.stalls),
                                     static_cast<double>(counts.total_ns) / 1e9,
                                     static_cast<double>(counts.pages) * page_bytes_};
    };
    if (by_comm_) {
        by_comm_counts_.begin();
        for (const auto &[key, s] : c.summaries) {
            Labels l = labels(key.kind);
            l.emplace_back("comm", std::string(s.comm, strnlen(s.comm, sizeof(s.comm))));
            by_comm_counts_.update(fmt::format("{}/{}", key.pid, key.kind), l, values(s));
        }
        by_comm_counts_.end();
        const std::array<std::pair<const char *, const char *>, 3> families{{
            {"memlat_reclaim_task_stalls", "Reclaim stalls by kind and task name"},
            {"memlat_reclaim_task_stall_seconds", "Time stalled in reclaim by kind and task name"},
            {"memlat_reclaim_task_reclaimed_bytes",
             "Memory freed by the stalled threads' reclaim, by kind and task name"},
        }};
        prometheus::write_counter_families(out, families, by_comm_counts_);
    }
    if (by_cgroup_) {
        by_cgroup_counts_.begin();
        for (const auto &[key, t] : c.cgroups) {
            auto path = c.cgroup_paths.find(key.cgroup_id);
            if (path == c.cgroup_paths.end())
                continue; // removed since: its series goes below
            Labels l = labels(key.kind);
            auto workload = c.cgroup_workloads.find(key.cgroup_id);
            prometheus::add_cgroup_labels(l, path->second,
                                          workload != c.cgroup_workloads.end() ? &workload->second
                                                                               : nullptr);
            by_cgroup_counts_.update(fmt::format("{}/{}", key.cgroup_id, key.kind), l, values(t));
        }
        by_cgroup_counts_.end();
        // The series of cgroups that no longer exist go (their counts stay in the per-kind
        // totals); "other" stays.
        by_cgroup_counts_.remove_removed_cgroups(c.cgroup_paths);
        const std::array<std::pair<const char *, const char *>, 3> families{{
            {"memlat_reclaim_cgroup_stalls", "Reclaim stalls by kind and the task's cgroup"},
            {"memlat_reclaim_cgroup_stall_seconds", "Time stalled in reclaim by kind and cgroup"},
            {"memlat_reclaim_cgroup_reclaimed_bytes",
             "Memory freed by the stalled threads' reclaim, by kind and cgroup"},
        }};
        prometheus::write_counter_families(out, families, by_cgroup_counts_);
    }
    prometheus::series_dropped_metric(out, by_comm_counts_.dropped() + by_cgroup_counts_.dropped());
}

} // namespace memlat::drsnoop
