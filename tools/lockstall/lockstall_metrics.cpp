#include "lockstall_metrics.h"

#include <fmt/format.h>
#include <utility>

#include "lockstall_format.h"

namespace memlat::lockstall {

using prometheus::Type;

Metrics::Metrics(std::string cgroup, double min_wait_s)
    : base_(prometheus::cgroup_filter_labels(std::move(cgroup))), min_wait_s_(min_wait_s) {}

void Metrics::collect(const Counts &c, prometheus::Exposition &out) const {
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
}

} // namespace memlat::lockstall
