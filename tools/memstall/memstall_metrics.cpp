#include "memstall_metrics.h"

#include <fmt/format.h>

#include "sources/stalls.h"

namespace memlat::memstall {

using prometheus::Labels;
using prometheus::Type;

Metrics::Metrics(const PrometheusOptions &options, std::string cgroup)
    : by_cgroup_(options.label("cgroup")), by_cgroup_counts_(2, options.max_series, {"cgroup"}) {
    base_ = prometheus::cgroup_filter_labels(std::move(cgroup), by_cgroup_);
}

void Metrics::collect(const Counts &c, prometheus::Exposition &out) {
    auto labels = [&](uint32_t cause) {
        return prometheus::labels_of("cause", cause_name(cause), base_);
    };
    out.family("memlat_memstall_stalls", Type::Counter,
               "Memory stalls of threads that ended, by cause (direct, memcg, compact, dirty, "
               "swapin, high, thrash, other)");
    for (uint32_t cause = 0; cause < MEMSTALL_CAUSES; ++cause)
        if (c.causes[cause])
            out.sample(labels(cause), static_cast<double>(c.totals[cause].stalls));
    out.family("memlat_memstall_stall_seconds", Type::Counter,
               "Wall time threads were stalled on memory, by cause", "seconds");
    for (uint32_t cause = 0; cause < MEMSTALL_CAUSES; ++cause)
        if (c.causes[cause])
            out.sample(labels(cause), static_cast<double>(c.totals[cause].total_ns) / 1e9);
    out.family("memlat_memstall_cause_measured", Type::Gauge,
               "1 when memstall measures the cause on this host; 0 when it cannot (PSI "
               "disabled, no tracepoint, its functions not told apart): memstall -v says why");
    for (uint32_t cause = 0; cause < MEMSTALL_CAUSES; ++cause)
        out.sample(labels(cause), c.causes[cause] ? 1 : 0);
    if (!by_cgroup_)
        return;
    by_cgroup_counts_.begin();
    for (const auto &[key, v] : c.threads) {
        auto path = c.cgroup_paths.find(v.cgroup_id);
        if (path == c.cgroup_paths.end() || key.cause >= MEMSTALL_CAUSES)
            continue; // a cgroup removed since: its series goes below
        Labels l = labels(key.cause);
        auto workload = c.cgroup_workloads.find(v.cgroup_id);
        prometheus::add_cgroup_labels(
            l, path->second, workload != c.cgroup_workloads.end() ? &workload->second : nullptr);
        const std::array<double, 2> values{static_cast<double>(v.stalls),
                                           static_cast<double>(v.total_ns) / 1e9};
        by_cgroup_counts_.update(fmt::format("{}/{}", key.tid, key.cause), l, values);
    }
    by_cgroup_counts_.end();
    if (c.cgroup_exists)
        by_cgroup_counts_.remove_removed_cgroups(c.cgroup_paths, c.cgroup_exists);
    else
        by_cgroup_counts_.remove_removed_cgroups(c.cgroup_paths);
    const std::array<std::pair<const char *, const char *>, 2> families{{
        {"memlat_memstall_cgroup_stalls", "Memory stalls by cause and the thread's memory cgroup"},
        {"memlat_memstall_cgroup_stall_seconds",
         "Wall time stalled on memory by cause and the thread's memory cgroup"},
    }};
    prometheus::write_counter_families(out, families, by_cgroup_counts_);
    prometheus::series_dropped_metric(out, by_cgroup_counts_.dropped());
}

} // namespace memlat::memstall
