#include "lockstall_metrics.h"

#include <fmt/format.h>
#include <utility>

#include "lockstall_format.h"

namespace memlat::lockstall {

using prometheus::Type;

const char *root_kind(const lockstall_cause_key &key, std::string_view root_comm) {
    if (key.root_kind == LOCKSTALL_ROOT_NONE)
        return "none";
    if (!monitor_of(root_comm).empty())
        return "monitor";
    return key.root_kind == LOCKSTALL_ROOT_OWN ? "own_process" : "other_process";
}

Metrics::Metrics(const PrometheusOptions &options, std::string cgroup, double min_wait_s)
    : by_cgroup_(options.label("cgroup")),
      base_(prometheus::cgroup_filter_labels(std::move(cgroup), by_cgroup_)),
      min_wait_s_(min_wait_s),
      causes_(2, options.max_series, {"op", "root_comm", "root_op", "cgroup"}) {}

void Metrics::collect(const Counts &c, prometheus::Exposition &out) {
    auto labels = [&](int write) { return prometheus::labels_of("mode", mode_name(write), base_); };
    out.family("memlat_mmap_lock_wait_seconds", Type::Histogram,
               "Time threads waited for an address space's mmap_lock, by mode (read, write); "
               "every wait, of every thread",
               "seconds");
    for (int w = 0; w < 2; ++w)
        out.histogram(labels(w), c.hist_us[w], 1e-6,
                      static_cast<double>(c.totals[w].total_ns) / 1e9);
    const std::string slow = fmt::format("{:g} s or longer", min_wait_s_);
    out.family("memlat_mmap_lock_slow_waits", Type::Counter,
               "Waits for an mmap_lock of " + slow + " by the threads selected, by mode");
    for (int w = 0; w < 2; ++w)
        out.sample(labels(w), static_cast<double>(c.totals[w].slow_waits));
    out.family("memlat_mmap_lock_slow_wait_seconds", Type::Counter,
               "Time in waits for an mmap_lock of " + slow + " by the threads selected, by mode",
               "seconds");
    for (int w = 0; w < 2; ++w)
        out.sample(labels(w), static_cast<double>(c.totals[w].slow_ns) / 1e9);

    causes_.begin();
    for (const Cause &cause : c.causes) {
        const lockstall_cause_key &k = cause.key;
        prometheus::Labels l{{"mode", mode_name(k.write)},
                             {"op", cause.op},
                             {"root", root_kind(k, cause.root_comm)},
                             {"root_comm", cause.root_comm},
                             {"root_op", cause.root_op}};
        if (by_cgroup_) {
            auto path = c.cgroup_paths.find(k.cgroup_id);
            if (path == c.cgroup_paths.end())
                continue; // a cgroup removed since: its entry was deleted
            auto workload = c.cgroup_workloads.find(k.cgroup_id);
            prometheus::add_cgroup_labels(l, path->second,
                                          workload != c.cgroup_workloads.end() ? &workload->second
                                                                               : nullptr);
        }
        l.insert(l.end(), base_.begin(), base_.end());
        const std::string entry(reinterpret_cast<const char *>(&k), sizeof(k));
        const double values[] = {static_cast<double>(cause.value.waits),
                                 static_cast<double>(cause.value.total_ns) / 1e9};
        causes_.update(entry, l, values);
    }
    causes_.end();
    if (by_cgroup_)
        causes_.remove_removed_cgroups(c.cgroup_paths);
    const std::string convoys_waits =
        "Waits for an mmap_lock of " + slow +
        " by what the waiter did (op) and the hold it queued behind, the convoy's root: root "
        "monitor (a known monitoring program), own_process, other_process or none (no hold of "
        "--min-hold kept), its thread name (root_comm) and what it did (root_op)";
    const std::pair<const char *, const char *> families[] = {
        {"memlat_mmap_lock_convoy_waits", convoys_waits.c_str()},
        {"memlat_mmap_lock_convoy_wait_seconds", "Time in those waits, by the same labels"}};
    prometheus::write_counter_families(out, families, causes_);
    prometheus::series_dropped_metric(out, causes_.dropped());
}

} // namespace memlat::lockstall
