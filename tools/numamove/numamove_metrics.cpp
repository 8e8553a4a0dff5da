#include "numamove_metrics.h"

#include <cstring>
#include <fmt/format.h>

namespace memlat::numamove {

using prometheus::Labels;
using prometheus::Type;

Metrics::Metrics(const PrometheusOptions &options, std::function<std::string(uint32_t)> reason_name,
                 int64_t numa_reason, long page_bytes)
    : by_comm_(options.label("comm")), reason_name_(std::move(reason_name)),
      numa_reason_(numa_reason), page_bytes_(page_bytes),
      by_comm_counts_(2, options.max_series, {"comm"}) {}

void Metrics::collect(const Counts &c, prometheus::Exposition &out) {
    // A reason's series appear with its first migration, except NUMA balancing's own.
    auto shown = [&](uint32_t r) {
        return c.by_reason[r].calls != 0 || static_cast<int64_t>(r) == numa_reason_;
    };
    auto reason = [&](uint32_t r) { return Labels{{"reason", reason_name_(r)}}; };
    struct Field {
        const char *name, *help, *unit;
        double (*get)(const numamove_count &, long);
    };
    const std::array<Field, 5> fields{{
        {"memlat_numa_migrate_calls", "migrate_pages() calls (mm_migrate_pages), by reason", "",
         [](const numamove_count &n, long) { return double(n.calls); }},
        {"memlat_numa_migrated_bytes", "Memory migrated (pgmigrate_success pages), by reason",
         "bytes", [](const numamove_count &n, long page) { return double(n.succeeded) * page; }},
        {"memlat_numa_migrate_failed_bytes",
         "Memory that failed to migrate (pgmigrate_fail pages), by reason", "bytes",
         [](const numamove_count &n, long page) { return double(n.failed) * page; }},
        {"memlat_numa_thp_migrated", "Transparent huge pages migrated whole, by reason", "",
         [](const numamove_count &n, long) { return double(n.thp_succeeded); }},
        {"memlat_numa_thp_split", "Transparent huge pages split to migrate them, by reason", "",
         [](const numamove_count &n, long) { return double(n.thp_split); }},
    }};
    for (const auto &f : fields) {
        out.family(f.name, Type::Counter, f.help, f.unit);
        for (uint32_t r = 0; r < NUMAMOVE_MAX_REASONS; ++r)
            if (shown(r))
                out.sample(reason(r), f.get(c.by_reason[r], page_bytes_));
    }
    if (c.timed) {
        out.family("memlat_numa_migrate_seconds", Type::Histogram,
                   "Time of migrate_pages() calls (mm_migrate_pages_start to end), by reason",
                   "seconds");
        for (uint32_t r = 0; r < NUMAMOVE_MAX_REASONS; ++r)
            if (shown(r))
                out.histogram(reason(r), c.hist_us[r], 1e-6,
                              static_cast<double>(c.by_reason[r].total_ns) / 1e9);
    }
    if (c.per_call) {
        out.family("memlat_numa_misplaced_call_seconds", Type::Histogram,
                   "Time of NUMA balancing's migrate_misplaced_folio/_page calls", "seconds");
        out.histogram({}, c.call_hist_us, 1e-6, static_cast<double>(c.calls.total_ns) / 1e9);
    }
    out.family("memlat_numa_task_moves", Type::Counter,
               "Tasks NUMA balancing moved (move), swapped (swap) or kept (stick) "
               "(sched:sched_*_numa)");
    const std::array<const char *, NUMAMOVE_TASK_MOVES> moves{"move", "swap", "stick"};
    for (size_t i = 0; i < moves.size(); ++i)
        out.sample({{"kind", moves[i]}}, static_cast<double>(c.task_moves[i]));

    if (by_comm_) {
        by_comm_counts_.begin();
        for (const auto &[k, v] : c.procs) {
            Labels l = reason(k.reason);
            l.emplace_back("comm", std::string(v.comm, strnlen(v.comm, sizeof(v.comm))));
            const std::array<double, 2> values{static_cast<double>(v.c.calls),
                                               static_cast<double>(v.c.succeeded) * page_bytes_};
            by_comm_counts_.update(fmt::format("{}/{}", k.pid, k.reason), l, values);
        }
        by_comm_counts_.end();
        out.family("memlat_numa_task_migrate_calls", Type::Counter,
                   "migrate_pages() calls by reason and the name of the task that ran them");
        for (const auto &[l, values] : by_comm_counts_.series())
            out.sample(l, values[0]);
        out.family("memlat_numa_task_migrated_bytes", Type::Counter,
                   "Memory migrated by reason and task name", "bytes");
        for (const auto &[l, values] : by_comm_counts_.series())
            out.sample(l, values[1]);
    }
    prometheus::series_dropped_metric(out, by_comm_counts_.dropped());
}

} // namespace memlat::numamove
