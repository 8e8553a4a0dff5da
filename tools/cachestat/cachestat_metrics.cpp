#include "cachestat_metrics.h"

#include <array>
#include <cstring>
#include <fmt/format.h>

namespace memlat::cachestat {

using prometheus::Labels;
using prometheus::Type;

Metrics::Metrics(const PrometheusOptions &options, std::string cgroup, bool accesses_known)
    : by_comm_(options.label("comm")), accesses_known_(accesses_known),
      by_comm_counts_(CACHESTAT_COUNTERS, options.max_series, {"comm"}) {
    base_ = prometheus::cgroup_filter_labels(std::move(cgroup));
}

namespace {

// Page counts, as cachestat counts them (base pages), in the order of enum cachestat_counter.
const std::array<std::pair<const char *, const char *>, CACHESTAT_COUNTERS> families{{
    {"memlat_page_cache_accesses", "Page-cache pages looked up by reads and page faults"},
    {"memlat_page_cache_misses", "Pages added to the page cache (misses)"},
    {"memlat_page_cache_dirties", "Page-cache pages that went from clean to dirty"},
    {"memlat_page_cache_hits",
     "Page-cache pages looked up that no miss of the same thread in the file accounts for"},
}};

} // namespace

void Metrics::collect(const Counts &total,
                      const std::vector<std::pair<cachestat_proc_key, cachestat_proc_value>> &procs,
                      prometheus::Exposition &out) {
    const std::array<uint64_t, CACHESTAT_COUNTERS> values{total.accesses, total.misses,
                                                          total.dirties, total.hits};
    for (int i = 0; i < CACHESTAT_COUNTERS; ++i) {
        if ((i == CACHESTAT_ACCESSES || i == CACHESTAT_HITS) && !accesses_known_)
            continue;
        out.family(families[i].first, Type::Counter, families[i].second);
        out.sample(base_, static_cast<double>(values[i]));
    }
    if (by_comm_) {
        by_comm_counts_.begin();
        for (const auto &[k, v] : procs) {
            Labels l = base_;
            l.emplace_back("comm", std::string(v.comm, strnlen(v.comm, sizeof(v.comm))));
            std::array<double, CACHESTAT_COUNTERS> counts{};
            for (int i = 0; i < CACHESTAT_COUNTERS; ++i)
                counts[i] = static_cast<double>(v.counts.c[i]);
            by_comm_counts_.update(fmt::format("{}", k.pid), l, counts);
        }
        by_comm_counts_.end();
        for (int i = 0; i < CACHESTAT_COUNTERS; ++i) {
            if ((i == CACHESTAT_ACCESSES || i == CACHESTAT_HITS) && !accesses_known_)
                continue;
            const std::string name =
                fmt::format("memlat_page_cache_task_{}", std::string(families[i].first).substr(18));
            out.family(name, Type::Counter, std::string(families[i].second) + ", by task name");
            for (const auto &[l, counts] : by_comm_counts_.series())
                out.sample(l, counts[i]);
        }
    }
    prometheus::series_dropped_metric(out, by_comm_counts_.dropped());
}

} // namespace memlat::cachestat
