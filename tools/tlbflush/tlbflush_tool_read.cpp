// tlbflush, what is read back: count TLB flushes by CPU and reason, find who sends the remote
// shootdown IPIs (or, on guests whose hypervisor flushes, the remote flush requests) that hit a
// CPU, and measure how long the victim CPU spends handling them.
#include <sys/stat.h>

#include <cerrno>
#include <csignal>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <fmt/format.h>
#include <map>
#include <numeric>
#include <optional>

#include "base/machine.h"
#include "cli/multicall.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/profile_output.h"
#include "cli/run_loop.h"
#include "kernel/features.h"
#include "kernel/tasks.h"
#include "kernel/types.h"
#include "loading/epoch_table.h"
#include "loading/events.h"
#include "loading/flush_path.h"
#include "loading/loader.h"
#include "loading/stack_profile.h"
#include "loading/stacks.h"
#include "loading/symbols.h"
#include "prometheus/exporter.h"
#include "prometheus/metrics_serving.h"
#include "tlbflush.h"
#include "tlbflush.skel.h"
#include "tlbflush_format.h"
#include "tlbflush_metrics.h"
#include "tlbflush_tool.h"
#include "tool/tool.h"

namespace memlat::tlbflush {

// -P: the CPUs' counts in `epoch`'s rows, by CPU and reason.
CpuCounts Tlbflush::epoch_counts(uint32_t epoch) {
    const auto &counts = skel().data_counts->counts;
    CpuCounts out;
    for (int cpu = 0; cpu < ncpus_ && cpu < TLBFLUSH_MAX_CPUS; ++cpu)
        for (uint32_t r = 0; r < TLBFLUSH_MAX_REASONS; ++r)
            if (const auto &c = cpu_row(counts, epoch * ncpus_ + cpu)[r]; c.count != 0)
                out.by_key[CountKey{0, static_cast<uint32_t>(cpu), r}] = c;
    out.table_full = skel().bss->proc_table_full[epoch & 1];
    return out;
}

Snapshot Tlbflush::snapshot(tlbflush_bpf &skel) {
    Snapshot s;
    const auto *bss = skel.bss;
    if (o_.per_process && !proc_table_began_) {
        // The baseline: nothing counted before it is read, in the table or on the CPUs.
        cpu_epochs_.begin(skel.bss->proc_epoch);
        proc_table_.begin(skel.bss->proc_epoch);
        proc_table_began_ = true;
    } else if (o_.per_process) {
        // The keys active in the last interval, with their counts since the start: the
        // table holds one interval's processes (EpochTable), their totals are kept here. The
        // CPUs' counts go by the same epochs: the interval's total is its rows' sum.
        std::map<CountKey, tlbflush_proc_value> totals;
        auto close_table = [&] {
            for (const auto &[key, gained] :
                 proc_table_.next_interval(skel.maps.proc_counts, skel.bss->proc_epoch)) {
                tlbflush_proc_value v = gained;
                if (auto it = proc_totals_.find(key); it != proc_totals_.end())
                    add_proc_counts(v, it->second);
                totals[key] = v;
                s.counts[key] = v.c;
                s.comms[key] = std::string(v.comm, strnlen(v.comm, sizeof(v.comm)));
            }
        };
        const CpuCounts &epochs = cpu_epochs_.close(skel.bss->proc_epoch, close_table);
        s.cpu_totals = epochs.by_key;
        s.proc_table_full = epochs.table_full;
        proc_totals_ = std::move(totals);
    } else {
        for (int cpu = 0; cpu < ncpus_ && cpu < TLBFLUSH_MAX_CPUS; ++cpu)
            for (uint32_t r = 0; r < TLBFLUSH_MAX_REASONS; ++r)
                if (cpu_row(skel.data_counts->counts, cpu)[r].count != 0)
                    s.counts[CountKey{0, static_cast<uint32_t>(cpu), r}] =
                        cpu_row(skel.data_counts->counts, cpu)[r];
    }
    if (o_.culprits)
        for (const auto &[k, v] :
             read_hash_map<tlbflush_culprit_key, tlbflush_culprit_value>(skel.maps.culprits)) {
            tlbflush::CulpritKey key{k.pid, k.tid, k.cpu, k.kernel_stack, k.user_stack};
            s.culprits[key] = v.count;
            s.culprit_requests[key] = v.requests;
            s.culprit_comms[key] = std::string(v.comm, strnlen(v.comm, sizeof(v.comm)));
        }
    if (o_.latency) {
        auto copy = [](const auto &from, tlbflush::Hist &to) {
            std::copy(std::begin(from), std::end(from), to.begin());
        };
        for (auto *h : {&s.handler_ns, &s.handler_us, &s.callback_ns})
            h->resize(ncpus_);
        s.ipi_counts.resize(ncpus_);
        for (int cpu = 0; cpu < ncpus_ && cpu < TLBFLUSH_MAX_CPUS; ++cpu) {
            copy(cpu_row(skel.data_handler_ns->handler_hist_ns, cpu), s.handler_ns[cpu]);
            copy(cpu_row(skel.data_handler_us->handler_hist_us, cpu), s.handler_us[cpu]);
            copy(cpu_row(skel.data_callback_ns->callback_hist_ns, cpu), s.callback_ns[cpu]);
            s.ipi_counts[cpu] = cpu_row(skel.data_ipi_counts->ipi_counts, cpu);
        }
    }
    if (!marks_from_tlb_flush_)
        s.flush_ipis.assign(&cpu_row(skel.data_flush_ipis->flush_ipis, 0),
                            &cpu_row(skel.data_flush_ipis->flush_ipis, 0) +
                                std::min(ncpus_, TLBFLUSH_MAX_CPUS));
    s.flush_requests.assign(&cpu_row(skel.data_flush_requests->flush_requests, 0),
                            &cpu_row(skel.data_flush_requests->flush_requests, 0) +
                                std::min(ncpus_, TLBFLUSH_MAX_CPUS));
    std::copy(std::begin(bss->request_sources), std::end(bss->request_sources),
              s.request_sources.begin());
    s.dropped = events_ != nullptr ? events_->lost(bss->dropped_events) : bss->dropped_events;
    s.table_full = bss->table_full + s.proc_table_full;
    s.stacks_lost = bss->stacks_lost;
    s.skipped_runs = recursion_misses(skel.obj);
    return s;
}

std::vector<std::string> Tlbflush::stack_frames(tlbflush_bpf &skel, int32_t id, bool user,
                                                uint32_t pid) {
    if (!stacks_)
        stacks_.emplace(skel.maps.stacks, ksyms_ ? &*ksyms_ : nullptr);
    return user ? stacks_->user(id, pid) : stacks_->kernel(id);
}

void Tlbflush::write_profile(tlbflush_bpf &skel, const Snapshot &now, const Snapshot &start) {
    if (!stacks_)
        stacks_.emplace(skel.maps.stacks, ksyms_ ? &*ksyms_ : nullptr);
    StackProfileBuilder builder(*stacks_, {{"flush_ipis", "count"}, {"flush_requests", "count"}},
                                1);
    for (const auto &row : tlbflush::culprits_since(now, start)) {
        const bool any = row.key.cpu == TLBFLUSH_ANY_CPU;
        const std::string target = any ? "cpu ?" : fmt::format("cpu {}", row.key.cpu);
        std::vector<profile::Label> labels{{.key = "pid", .number = row.key.pid},
                                           {.key = "tid", .number = row.key.tid},
                                           {.key = "comm", .text = row.comm}};
        if (!any)
            labels.push_back({.key = "target_cpu", .number = row.key.cpu});
        // The target, then the sender, as the root frames of a flame graph.
        builder.add({target, fmt::format("{}-{}", row.comm, row.key.pid)}, row.key.kernel_stack,
                    row.key.user_stack, row.key.pid,
                    {static_cast<int64_t>(row.count), static_cast<int64_t>(row.requests)},
                    std::move(labels));
    }
    profile::Profile p = builder.take(started_);
    p.comments.push_back("memlat tlbflush: remote TLB flush requests (and flush IPIs) by target "
                         "CPU, sender and the sender's stacks");
    profile_out_.write(p, 1);
}

std::string Tlbflush::features_note_of_targets() const {
    return flush_info_distance_
               ? "remote flush requests: their CPUs read from the flushed mm's CPU mask "
                 "(flush_tlb_info, placed by the kernel's BTF) or from reclaim's batch"
               : "remote flush requests: the run's BTF places no per-CPU flush_tlb_info (BTF "
                 "embedded for CO-RE, or a pahole that wrote no per-CPU variables): only the "
                 "CPUs of reclaim's batched flushes are read, the others count as unknown";
}

void Tlbflush::report_path_seen(const Snapshot &last) const {
    // What was traced contradicts what the machine says of itself: say what it showed.
    const auto format = view_format();
    const FlushPath expected = this_hypervisor().remote_flushes;
    const FlushPath seen = tlbflush::path_of(last, format, expected);
    if (seen != FlushPath::Hypervisor || expected == FlushPath::Hypervisor)
        return;
    const uint64_t requests =
        std::accumulate(last.request_sources.begin(), last.request_sources.end(), uint64_t{0});
    fmt::print(stderr,
               "{}: {} remote flush requests were sent and no CPU handled a flush IPI: remote "
               "TLB flushes on this machine go through the hypervisor, and no CPU's shootdowns "
               "received show them (see its flush requests)\n",
               tool_name, requests);
}

// Whether the run's requests and flush IPIs can tell the path (ViewFormat::path_evidence).
bool Tlbflush::path_evidence() const {
    const auto counted = [this](const char *reason, uint32_t fallback) {
        return (reason_mask_ >> reasons_.value_or(reason, fallback) & 1) != 0;
    };
    return !o_.pid_given && (!marks_from_tlb_flush_ ||
                             (counted("remote_shootdown", 1) && counted("remote_wrong_cpu", 5)));
}

tlbflush::ViewFormat Tlbflush::view_format() const {
    return {.per_process = o_.per_process,
            .stacks = o_.stacks,
            .reason_mask = reason_mask_,
            .remote_shootdown = reasons_.value_or("remote_shootdown", 1),
            .remote_wrong_cpu = reasons_.value_or("remote_wrong_cpu", 5),
            .remote_send_ipi = reasons_.value_or("remote_send_ipi", 4),
            .callbacks_timed = !marks_from_tlb_flush_,
            .reason_name = [this](int64_t r) { return reasons_.name(r); },
            .culprit_ipis_counted = !culprit_ipis_unknown_,
            .path_evidence = path_evidence(),
            .cpus = cpu_mask_};
}

void Tlbflush::print_interval(tlbflush_bpf &skel, const Snapshot &now, const Snapshot &before) {
    const auto format = view_format();
    tlbflush::Interval interval;
    if (o_.common.json || o_.common.timestamp || o_.common.interval > 0)
        interval.time = wall_clock_time();
    interval.counts = tlbflush::counts_since(now, before, format);
    interval.counts.path = tlbflush::path_of(now, format, this_hypervisor().remote_flushes);
    if (o_.culprits) {
        interval.culprits = tlbflush::culprits_since(now, before);
        // -s: the stacks of the senders printed, read and symbolized here.
        for (auto &r : *interval.culprits)
            if (o_.stacks) {
                r.kernel_stack = stack_frames(skel, r.key.kernel_stack, false, r.key.pid);
                r.user_stack = stack_frames(skel, r.key.user_stack, true, r.key.pid);
            }
    }
    if (o_.latency)
        interval.latency = tlbflush::latency_since(now, before);
    interval.lost_events = now.dropped - before.dropped;
    interval.table_full = now.table_full - before.table_full;
    if (o_.stacks)
        interval.stacks_lost = now.stacks_lost - before.stacks_lost;
    interval.skipped_runs = now.skipped_runs - before.skipped_runs;
    if (events_ != nullptr)
        interval.lost_in = events_->name();
    if (o_.common.json)
        print_json_line(interval_line, tlbflush::interval_json(interval, format));
    else
        fmt::print("{}", tlbflush::interval_text(interval, format));
}

void Tlbflush::print_event(const tlbflush_event &e) {
    if (first_event_ns_ == 0)
        first_event_ns_ = e.ts_ns;
    // Signed: perf buffers (kernels before 5.8) deliver each CPU's events in batches, so an
    // event of another CPU may precede the first one printed.
    const double time_s =
        static_cast<double>(static_cast<int64_t>(e.ts_ns - first_event_ns_)) / 1e9;
    const std::string wall_time = o_.common.timestamp ? wall_clock_time() : "";
    if (o_.common.json)
        print_json_line(memlat::event_line,
                        tlbflush::event_json(e, time_s, reasons_.name(e.reason), wall_time));
    else
        fmt::print("{}", tlbflush::event_line(e, time_s, reasons_.name(e.reason), wall_time));
}

CountedLosses Tlbflush::collect(prometheus::Exposition &out) {
    tlbflush_bpf &skel = this->skel();
    tlbflush::Counts &c = counts_;
    const size_t ncpus = c.by_cpu.size();
    const auto *bss = skel.bss;
    for (size_t cpu = 0; cpu < ncpus; ++cpu)
        std::copy(std::begin(cpu_row(skel.data_counts->counts, cpu)),
                  std::end(cpu_row(skel.data_counts->counts, cpu)), c.by_cpu[cpu].begin());
    // With the comm label (-P), the other epoch's rows too (the exporter flips none, but a
    // count is a count wherever it lies).
    for (size_t cpu = 0; o_.per_process && cpu < ncpus; ++cpu)
        for (uint32_t r = 0; r < TLBFLUSH_MAX_REASONS; ++r)
            c.by_cpu[cpu][r] = tlbflush::plus(c.by_cpu[cpu][r],
                                              cpu_row(skel.data_counts->counts, ncpus_ + cpu)[r]);
    if (!marks_from_tlb_flush_)
        c.flush_ipis.assign(&cpu_row(skel.data_flush_ipis->flush_ipis, 0),
                            &cpu_row(skel.data_flush_ipis->flush_ipis, 0) + ncpus);
    c.flush_requests.assign(&cpu_row(skel.data_flush_requests->flush_requests, 0),
                            &cpu_row(skel.data_flush_requests->flush_requests, 0) + ncpus);
    c.requests_unknown = bss->request_sources[TLBFLUSH_TARGETS_UNKNOWN];
    // The path seen so far, by the text's rule (tlbflush::path_of()).
    uint64_t remote_flushes = 0;
    if (c.flush_ipis.empty())
        for (const auto &row : c.by_cpu)
            remote_flushes += row[reasons_.value_or("remote_shootdown", 1)].count +
                              row[reasons_.value_or("remote_wrong_cpu", 5)].count;
    c.path = path_evidence() ? tlbflush::path_seen(this_hypervisor().remote_flushes,
                                                   c.flush_requests, c.flush_ipis, remote_flushes)
                             : this_hypervisor().remote_flushes;
    if (o_.latency) {
        c.handler_ns.resize(ncpus);
        c.callback_ns.resize(ncpus);
        c.handler_sum_ns.resize(ncpus);
        c.callback_sum_ns.resize(ncpus);
        c.ipi.resize(ncpus);
        for (size_t cpu = 0; cpu < ncpus; ++cpu) {
            std::copy(std::begin(cpu_row(skel.data_handler_ns->handler_hist_ns, cpu)),
                      std::end(cpu_row(skel.data_handler_ns->handler_hist_ns, cpu)),
                      c.handler_ns[cpu].begin());
            std::copy(std::begin(cpu_row(skel.data_callback_ns->callback_hist_ns, cpu)),
                      std::end(cpu_row(skel.data_callback_ns->callback_hist_ns, cpu)),
                      c.callback_ns[cpu].begin());
            c.handler_sum_ns[cpu] = cpu_row(skel.data_handler_sum->handler_sum_ns, cpu);
            c.callback_sum_ns[cpu] = cpu_row(skel.data_callback_sum->callback_sum_ns, cpu);
            c.ipi[cpu] = cpu_row(skel.data_ipi_counts->ipi_counts, cpu);
        }
    }
    // The per-task tables keep an entry per process (or thread); the entries of those that
    // exited are read here for the last time and deleted, so the tables hold the live ones.
    if (o_.per_process) {
        c.procs = read_hash_map<tlbflush_proc_key, tlbflush_proc_value>(skel.maps.proc_counts);
        delete_exited_tasks(skel.maps.proc_counts, c.procs,
                            [](const tlbflush_proc_key &k) { return k.pid; });
    }
    if (o_.culprits) {
        c.senders = read_hash_map<tlbflush_culprit_key, tlbflush_culprit_value>(skel.maps.culprits);
        delete_exited_tasks(skel.maps.culprits, c.senders,
                            [](const tlbflush_culprit_key &k) { return k.tid; });
    }
    metrics_->collect(c, out);
    return CountedLosses{bss->dropped_events,
                         bss->table_full + bss->proc_table_full[0] + bss->proc_table_full[1]};
}

} // namespace memlat::tlbflush
