#include "tlbflush_metrics.h"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

namespace memlat::tlbflush {

using prometheus::Labels;
using prometheus::Type;

Metrics::Metrics(const PrometheusOptions &options, std::function<std::string(uint32_t)> reason_name,
                 std::vector<uint32_t> remote)
    : by_comm_(options.label("comm")), reason_name_(std::move(reason_name)),
      remote_(std::move(remote)), by_comm_counts_(3, options.max_series, {"comm"}),
      sent_(2, options.max_series, {"comm"}) {}

void Metrics::collect(const Counts &c, prometheus::Exposition &out) {
    const size_t ncpus = c.by_cpu.size();
    auto cpu_reason = [&](size_t cpu, uint32_t reason) {
        return Labels{{"cpu", std::to_string(cpu)}, {"reason", reason_name_(reason)}};
    };
    auto is_remote = [&](uint32_t r) {
        return std::find(remote_.begin(), remote_.end(), r) != remote_.end();
    };

    // The victim side first: every counted CPU has its series from the start, so that the
    // first shootdowns are not lost to increase() as a series' first sample.
    if (!c.flush_ipis.empty()) {
        out.family("memlat_tlb_remote_shootdowns", Type::Counter,
                   "TLB-shootdown IPIs a CPU handled (the victim side: what /proc/interrupts "
                   "counts in its TLB row), by CPU");
        for (size_t cpu = 0; cpu < ncpus && cpu < c.flush_ipis.size(); ++cpu)
            if (c.cpus[cpu])
                out.sample({{"cpu", std::to_string(cpu)}}, static_cast<double>(c.flush_ipis[cpu]));
    } else {
        out.family("memlat_tlb_remote_shootdowns", Type::Counter,
                   "Remote TLB flushes tlb:tlb_flush reported on a CPU, by CPU and reason: "
                   "without the csd tracepoints (before Linux 6.3) fewer than the /proc/interrupts "
                   "TLB row, which also counts the IPIs that found the CPU lazy or up to date");
        for (size_t cpu = 0; cpu < ncpus; ++cpu)
            if (c.cpus[cpu])
                for (uint32_t r : remote_)
                    out.sample(cpu_reason(cpu, r), static_cast<double>(c.by_cpu[cpu][r].count));
    }

    out.family("memlat_tlb_remote_flush_requests", Type::Counter,
               "Remote TLB flush requests that named a CPU, sent by the other CPUs "
               "(remote_send_ipi, the flushed mm's CPU mask): delivered by shootdown IPI or, "
               "on paravirtual guests, by the hypervisor; by target CPU");
    for (size_t cpu = 0; cpu < ncpus && cpu < c.flush_requests.size(); ++cpu)
        if (c.cpus[cpu])
            out.sample({{"cpu", std::to_string(cpu)}}, static_cast<double>(c.flush_requests[cpu]));
    out.family("memlat_tlb_remote_flush_requests_unknown_target", Type::Counter,
               "Remote TLB flush requests whose CPU mask could not be read (kernels without "
               "BTF of their own, but for reclaim's batched flushes)");
    out.sample({}, static_cast<double>(c.requests_unknown));
    out.family("memlat_tlb_remote_flush_path", Type::Info,
               "How remote TLB flushes reach their CPUs on this machine: ipi, "
               "hypervisor (no shootdown IPI: PVM, Hyper-V, Xen PV) or mixed (KVM flushes "
               "preempted vCPUs itself), as seen so far, and the hypervisor");
    out.sample({{"path", std::string(path_name(c.path))}, {"hypervisor", c.hypervisor}}, 1.0);

    const std::array<std::pair<const char *, const char *>, 3> families{{
        {"memlat_tlb_flushes", "TLB flushes by CPU and reason (tlb:tlb_flush)"},
        {"memlat_tlb_full_flushes", "TLB flushes of the whole TLB, by CPU and reason"},
        {"memlat_tlb_flushed_pages", "Pages of the ranged TLB flushes, by CPU and reason"},
    }};
    for (size_t i = 0; i < families.size(); ++i) {
        out.family(families[i].first, Type::Counter, families[i].second);
        for (size_t cpu = 0; cpu < ncpus; ++cpu)
            for (uint32_t r = 0; r < TLBFLUSH_MAX_REASONS; ++r) {
                const auto &n = c.by_cpu[cpu][r];
                // Reasons that never happened on a CPU would be thousands of zero series on
                // a large machine; a series appears with the first flush.
                if (n.count == 0 && !(c.cpus[cpu] && is_remote(r)))
                    continue;
                const uint64_t v = i == 0 ? n.count : i == 1 ? n.full : n.pages;
                out.sample(cpu_reason(cpu, r), static_cast<double>(v));
            }
    }

    if (c.latency) {
        out.family("memlat_tlb_shootdown_handler_seconds", Type::Histogram,
                   "Time a victim CPU spent in the call-function IPI handler runs that flushed "
                   "its TLB, entry to exit (tlbflush -L), by CPU",
                   "seconds");
        for (size_t cpu = 0; cpu < ncpus; ++cpu)
            if (c.cpus[cpu])
                out.histogram({{"cpu", std::to_string(cpu)}}, c.handler_ns[cpu], 1e-9,
                              static_cast<double>(c.handler_sum_ns[cpu]) / 1e9);
        if (c.callbacks) {
            out.family("memlat_tlb_flush_callback_seconds", Type::Histogram,
                       "Time of the flush_tlb_func callback inside those handler runs, by CPU",
                       "seconds");
            for (size_t cpu = 0; cpu < ncpus; ++cpu)
                if (c.cpus[cpu])
                    out.histogram({{"cpu", std::to_string(cpu)}}, c.callback_ns[cpu], 1e-9,
                                  static_cast<double>(c.callback_sum_ns[cpu]) / 1e9);
        }
        out.family("memlat_tlb_flushes_without_ipi", Type::Counter,
                   "TLB flush callbacks a CPU ran outside any IPI handler (the idle loop), in "
                   "no histogram, by CPU");
        for (size_t cpu = 0; cpu < ncpus; ++cpu)
            if (c.cpus[cpu])
                out.sample({{"cpu", std::to_string(cpu)}},
                           static_cast<double>(c.ipi[cpu].without_ipi));
    }

    if (by_comm_) {
        by_comm_counts_.begin();
        for (const auto &[k, v] : c.procs) {
            Labels l = cpu_reason(k.cpu, k.reason);
            l.emplace_back("comm", std::string(v.comm, strnlen(v.comm, sizeof(v.comm))));
            const std::array<double, 3> values{static_cast<double>(v.c.count),
                                               static_cast<double>(v.c.full),
                                               static_cast<double>(v.c.pages)};
            by_comm_counts_.update(fmt::format("{}/{}/{}", k.pid, k.cpu, k.reason), l, values);
        }
        by_comm_counts_.end();
        const std::array<std::pair<const char *, const char *>, 3> task_families{{
            {"memlat_tlb_task_flushes",
             "TLB flushes by CPU, reason and the name of the task current on that CPU"},
            {"memlat_tlb_task_full_flushes", "Whole-TLB flushes by CPU, reason and task name"},
            {"memlat_tlb_task_flushed_pages",
             "Pages of ranged flushes by CPU, reason and task name"},
        }};
        for (size_t i = 0; i < task_families.size(); ++i) {
            out.family(task_families[i].first, Type::Counter, task_families[i].second);
            for (const auto &[l, values] : by_comm_counts_.series())
                out.sample(l, values[i]);
        }
    }

    if (c.culprits) {
        sent_.begin();
        for (const auto &[k, v] : c.senders) {
            Labels l{{"target_cpu", k.cpu == TLBFLUSH_ANY_CPU ? "any" : std::to_string(k.cpu)}};
            if (by_comm_)
                l.emplace_back("comm", std::string(v.comm, strnlen(v.comm, sizeof(v.comm))));
            const std::array<double, 2> values{static_cast<double>(v.count),
                                               static_cast<double>(v.requests)};
            sent_.update(
                fmt::format("{}/{}/{}/{}/{}", k.pid, k.tid, k.cpu, k.kernel_stack, k.user_stack), l,
                values);
        }
        sent_.end();
        if (c.culprit_ipis) {
            out.family("memlat_tlb_shootdown_ipis_sent", Type::Counter,
                       "Shootdown IPIs sent, by target CPU and, with --prometheus-labels comm, "
                       "the sender's task name (csd tracepoints, Linux 6.3+)");
            for (const auto &[l, values] : sent_.series())
                out.sample(l, values[0]);
        }
        out.family("memlat_tlb_flush_requests_sent", Type::Counter,
                   "Remote TLB flush requests sent, by target CPU (any: its CPU mask could not "
                   "be read) and, with --prometheus-labels comm, the sender's task name");
        for (const auto &[l, values] : sent_.series())
            out.sample(l, values[1]);
    }
    prometheus::series_dropped_metric(out, by_comm_counts_.dropped() + sent_.dropped());
}

} // namespace memlat::tlbflush
