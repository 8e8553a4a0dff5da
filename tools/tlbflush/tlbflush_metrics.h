// tlbflush's Prometheus metrics (--prometheus): what the BPF side counted, as metric families.
// Apart from the tool so that the unit tests and the metric list of docs/exporter.md can check
// them.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kernel/hypervisor.h"
#include "prometheus/exporter.h"
#include "prometheus/prometheus.h"
#include "tlbflush.h"

namespace memlat::tlbflush {

using Hist = std::array<uint64_t, MEMLAT_HIST_SLOTS>;

// One read of the BPF side.
struct Counts {
    std::vector<bool> cpus; // the CPUs counted (all, or -c)
    std::vector<std::array<tlbflush_count, TLBFLUSH_MAX_REASONS>> by_cpu;
    // The flush IPIs each CPU handled (the /proc/interrupts TLB row), from the csd tracepoints;
    // empty without them (before Linux 6.3), where tlb_flush's remote reasons stand in.
    std::vector<uint64_t> flush_ipis;
    // Remote flush requests that named each CPU, and those whose CPUs were not known.
    std::vector<uint64_t> flush_requests;
    uint64_t requests_unknown = 0;
    // How remote flushes reach their CPUs: this machine's hypervisor ("" on bare metal) and
    // the path seen so far (tlbflush::observed_path()).
    std::string hypervisor;
    FlushPath path = FlushPath::Unknown;
    // -L, per CPU
    bool latency = false, callbacks = false; // callbacks: the csd tracepoints time them
    std::vector<Hist> handler_ns, callback_ns;
    std::vector<uint64_t> handler_sum_ns, callback_sum_ns;
    std::vector<tlbflush_ipi_counts> ipi;
    // --prometheus-labels comm: per process, CPU and reason
    std::vector<std::pair<tlbflush_proc_key, tlbflush_proc_value>> procs;
    // --culprits: per sender and target CPU
    bool culprits = false;
    bool culprit_ipis = true; // the csd tracepoints count the IPIs each sender queued
    std::vector<std::pair<tlbflush_culprit_key, tlbflush_culprit_value>> senders;
};

class Metrics {
  public:
    // `reason_name(value)`: the kernel's name of a reason; `remote`: the victim-side reasons
    // (remote_shootdown, remote_wrong_cpu), part of what /proc/interrupts counts in its TLB row.
    Metrics(const PrometheusOptions &options, std::function<std::string(uint32_t)> reason_name,
            std::vector<uint32_t> remote);
    void collect(const Counts &counts, prometheus::Exposition &out);

  private:
    bool by_comm_;
    std::function<std::string(uint32_t)> reason_name_;
    std::vector<uint32_t> remote_;
    prometheus::BoundedCounters by_comm_counts_, sent_;
};

} // namespace memlat::tlbflush
