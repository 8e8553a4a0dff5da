// tlbflush: count TLB flushes by CPU and reason, find who sends the remote shootdown IPIs (or,
// on guests whose hypervisor flushes, the remote flush requests) that hit a CPU, and measure
// how long the victim CPU spends handling them.
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

using namespace memlat;
using namespace memlat::tlbflush;

namespace {

// Remote TLB shootdowns are interrupts only on x86. arm64 invalidates the other CPUs' TLBs
// with broadcast TLBI instructions (arch/arm64/include/asm/tlbflush.h): the hardware does it,
// no IPI is sent, no handler runs on the victim, and tlb:tlb_flush, whose callers are all in
// arch/x86, never fires (the arm64 VM test counts it: 0 events while tlb_workload unmaps
// across two CPUs). On the sender the flush is inlined into its callers (flush_tlb_mm,
// flush_tlb_range), so no hook sees every invalidation either. The tool therefore refuses to
// run there rather than print an empty table that would read as "no shootdowns".
#if defined(__x86_64__) || defined(__i386__)
constexpr const char *no_shootdown_ipis = nullptr;
#elif defined(__aarch64__)
constexpr const char *no_shootdown_ipis =
    "arm64 has no TLB-shootdown IPIs to count: it invalidates other CPUs' TLBs with "
    "broadcast TLBI instructions, which interrupt no CPU and which no tracepoint sees "
    "(tlb:tlb_flush fires on x86 only). To see what remote invalidation costs here, count "
    "the TLB refills it causes (perf stat -a -e dTLB-load-misses,iTLB-load-misses) and "
    "profile the threads that unmap or mprotect memory (perf record -g: tlb_finish_mmu, "
    "__flush_tlb_range); numamove and compactsnoop show the page migrations behind many of "
    "them.";
#else
constexpr const char *no_shootdown_ipis =
    "tlbflush counts x86 TLB-shootdown IPIs; it does not know this architecture.";
#endif

constexpr const char *description =
    R"(Count TLB flushes by CPU and reason, find the senders of remote
TLB-shootdown IPIs, and measure how long victim CPUs spend handling them (x86
only: arm64 sends no shootdown IPIs, and tlbflush exits 1 there saying so).

What a CPU and a PID mean depends on the reason:
  remote_shootdown, remote_wrong_cpu: on the victim CPU that received the IPI;
      the PID is the task the IPI interrupted (0 when the CPU was idle).
  remote_send_ipi: on the sender's CPU; the PID is the flushing task.
  flush_on_task_switch, local_*: on the CPU that flushed its own TLB.
--culprits and -s look at the sender: -p selects the sending process and -c
the target CPU. -L looks at the victim: -c selects the victim CPU.
Reason names are read from the running kernel (enum tlb_flush_reason).

Below the table, per CPU:
  Remote shootdowns received: the flush IPIs the CPU handled (the
      /proc/interrupts TLB row).
  Remote flush requests naming each CPU: the remote flushes other CPUs asked
      for that named it (remote_send_ipi and the flushed mm's CPU mask),
      however they were delivered. On bare metal they are the IPIs plus those
      the kernel skipped for a CPU in lazy TLB mode; on a guest whose
      hypervisor flushes remote TLBs (PVM, Hyper-V, Xen PV; KVM for preempted
      vCPUs) a CPU receives fewer IPIs or none, and only these count them.
  tlbflush says once on stderr how this machine delivers remote flushes when
  it is not by IPI alone; the JSON has it as "remote_flush_path".
--culprits shows both per sender and target CPU: REQUESTS and IPIS.

-L shows two intervals per victim CPU, in nanoseconds:
  IPI handler: from irq_vectors:call_function(_single)_entry to its _exit, for
      the handler runs in which a TLB flush ran (a flush_tlb_func csd
      callback, or before Linux 6.3 a remote flush reported by tlb_flush),
      once per run however many flushes shared it: the stall the interrupted
      task suffers, as far as tracepoints can see it.
  flush callback: from csd_function_entry to _exit of flush_tlb_func inside
      those runs (Linux 6.3+ only): the flush itself, a part of the above.
  No tracepoint sees the interrupt's delivery, the entry and exit code before
  the first and after the last tracepoint (register saves, the return to the
  task), nor, in a VM, the hypervisor's part: the real stall is longer.
  Flush callbacks that ran outside any IPI handler (the idle loop drains the
  queue without one) are counted apart, not in the histograms.)";

constexpr const char *examples = R"(Examples:
  tlbflush                  count TLB flushes by CPU and reason until Ctrl-C
  tlbflush -c 11 1          per second, only flushes on CPU 11
  tlbflush -c 11 --reason remote_shootdown,remote_wrong_cpu -d 10
                            remote shootdowns that hit CPU 11 in 10 seconds
  tlbflush -c 11 --culprits -s
                            who sends shootdown IPIs to CPU 11, with stacks
  tlbflush -c 11 -L         how long they interrupt CPU 11: IPI handler and
                            flush callback histograms
  tlbflush -P -p 1234       flushes of process 1234, per process and CPU
  tlbflush --trace          one line per flush
  tlbflush -j 1             a JSON line per second
  tlbflush -L --prometheus :9846
                            serve the counts and the -L histograms to
                            Prometheus at http://HOST:9846/metrics

)";

// MEMLAT_DISABLE_HOOKS in --help: the hook kinds and families of its probes.
constexpr std::array<std::string_view, 2> hook_kinds{
    "never try these hook kinds or families", "(tp_btf, raw_tp, tracepoint, csd, irq_vectors)"};

// The distance from this CPU's runqueue to its flush_tlb_info (tlbflush.bpf.c), when
// the run's BTF places both per-CPU variables: the kernel's own, or a full one given with
// --btf; the BTF embedded for CO-RE keeps no variables.
std::optional<int64_t> flush_info_from_runqueue() {
    const auto info = percpu_variable_offset("flush_tlb_info");
    const auto rq = percpu_variable_offset("runqueues");
    if (!info || !rq)
        return std::nullopt;
    return static_cast<int64_t>(*info) - static_cast<int64_t>(*rq);
}

} // namespace

namespace memlat::tlbflush {

std::vector<Probe> Tlbflush::plan() const {
    const KernelSymbols *ksyms = &*ksyms_;
    std::string no_symbol;
    if (ksyms == nullptr || ksyms->addresses_hidden())
        no_symbol = "/proc/kallsyms hides the address of the TLB-flush IPI callback "
                    "(kernel.kptr_restrict)";
    else if (!ksyms->address_of("flush_tlb_func") && !ksyms->address_of("flush_tlb_func_remote"))
        no_symbol = "the TLB-flush IPI callback flush_tlb_func is not in /proc/kallsyms";
    // The csd tracepoints (Linux 6.3+), then, without them, what other probes see instead.
    // tp_btf cannot read their function-pointer argument: the verifier refuses ctx access to a
    // FUNC_PROTO pointer (seen on 6.18). raw_tp reads it as a plain u64 at the same cost, so
    // it goes first and tp_btf stays as a later choice.
    // `said`: the fall-back's caveat is also said without -v (what the output then lacks).
    auto csd_ways = [&](std::vector<std::string> programs, std::string instead, std::string caveat,
                        bool said) {
        auto choices = tracepoint_choices(programs, "csd");
        std::swap(choices[0], choices[1]);
        for (auto &c : choices)
            c.unavailable = no_symbol;
        choices.push_back({.kind = HookKind::FromOtherProbes,
                           .family = std::move(instead),
                           .caveat = caveat,
                           .note = said ? caveat : ""});
        return choices;
    };

    std::vector<Probe> probes;
    probes.push_back(Probe{ProbeId::TlbFlush, "tlb:tlb_flush",
                           "It needs the tlb:tlb_flush tracepoint (x86, Linux 4.10 or later).",
                           tracepoint_choices({"tlb_flush"})});
    if (o_.culprits)
        probes.push_back(Probe{
            ProbeId::CsdQueue, "csd:csd_queue_cpu (culprits)", "",
            csd_ways({"csd_queue"}, culprits_from_send_ipi,
                     "without the csd tracepoints (Linux 6.3+) the shootdown IPIs each sender "
                     "queued are not known: --culprits shows its remote flush requests by target "
                     "CPU (REQUESTS), of which the kernel sends IPIs only to CPUs not in lazy TLB "
                     "mode",
                     true)});
    if (o_.latency)
        // The handler window, timed on every kernel; then what says a TLB flush ran in it.
        probes.push_back(
            Probe{ProbeId::IpiHandler, "irq_vectors:call_function(_single)_entry/exit (latency)",
                  "It needs the irq_vectors call-function tracepoints (x86).",
                  tracepoint_choices({"ipi_entry", "ipi_exit", "ipi1_entry", "ipi1_exit"},
                                     "irq_vectors")});
    // The flush IPIs each CPU handled (the /proc/interrupts TLB row) in every mode, and with
    // -L the flush callback's time.
    probes.push_back(Probe{
        ProbeId::CsdFunction,
        o_.latency ? "csd:csd_function_entry/exit (latency)"
                   : "csd:csd_function_entry (flush IPIs received)",
        "",
        csd_ways(o_.latency ? std::vector<std::string>{"csd_entry", "csd_exit"}
                            : std::vector<std::string>{"csd_entry"},
                 marks_from_tlb_flush,
                 o_.latency ? "without the csd tracepoints (Linux 6.3+) only IPI handler runs "
                              "in which tlb_flush saw a remote flush are timed, and the flush "
                              "callback itself is not: -L shows the handler histogram alone"
                            : "without the csd tracepoints (Linux 6.3+) the flush IPIs a CPU "
                              "received are those tlb_flush reports, fewer than the "
                              "/proc/interrupts TLB row: shown as remote flushes traced",
                 o_.latency)});
    return probes;
}

void Tlbflush::configure(tlbflush_bpf &skel) {
    const std::vector<Probe> &probes = probes_;
    auto *ro = skel.rodata;
    if (!cpu_mask_.empty()) {
        ro->filter_cpus = true;
        for (int cpu = 0; cpu < ncpus_; ++cpu)
            if (cpu_mask_[cpu])
                ro->cpu_mask[cpu / 64] |= 1ull << (cpu % 64);
    }
    ro->filter_pid = static_cast<uint32_t>(o_.pid);
    ro->reason_mask = reason_mask_;
    ro->per_process = o_.per_process;
    ro->trace_events = o_.trace;
    ro->collect_stacks = o_.stacks;
    ro->reason_remote_shootdown = reasons_.value_or("remote_shootdown", 1);
    ro->reason_remote_wrong_cpu = reasons_.value_or("remote_wrong_cpu", 5);
    ro->reason_remote_send_ipi = reasons_.value_or("remote_send_ipi", 4);
    if (ksyms_) {
        auto func = ksyms_->address_of("flush_tlb_func");
        if (!func)
            func = ksyms_->address_of("flush_tlb_func_remote");
        ro->tlb_flush_func = func.value_or(0);
    }
    ro->count_culprits = o_.culprits;
    if (const Probe *p = find_probe(probes, ProbeId::CsdFunction))
        ro->tlb_marks_from_tlb_flush = p->uses_family(marks_from_tlb_flush);
    // The per-CPU arrays for the CPUs this machine can have.
    ro->nr_cpus = ncpus_;
    const std::pair<bpf_map *, size_t> per_cpu_arrays[] = {
        {skel.maps.data_counts, sizeof(skel.data_counts->counts[0])},
        {skel.maps.data_handler_ns, sizeof(skel.data_handler_ns->handler_hist_ns[0])},
        {skel.maps.data_handler_us, sizeof(skel.data_handler_us->handler_hist_us[0])},
        {skel.maps.data_callback_ns, sizeof(skel.data_callback_ns->callback_hist_ns[0])},
        {skel.maps.data_ipi_counts, sizeof(skel.data_ipi_counts->ipi_counts[0])},
        {skel.maps.data_handler_sum, sizeof(skel.data_handler_sum->handler_sum_ns[0])},
        {skel.maps.data_callback_sum, sizeof(skel.data_callback_sum->callback_sum_ns[0])},
        {skel.maps.data_flush_ipis, sizeof(skel.data_flush_ipis->flush_ipis[0])},
        {skel.maps.data_flush_requests, sizeof(skel.data_flush_requests->flush_requests[0])},
        {skel.maps.data_ipi_state, sizeof(skel.data_ipi_state->ipi_state[0])},
    };
    for (const auto &[section, row_bytes] : per_cpu_arrays)
        size_global_array(section, ncpus_, row_bytes);
    // -P: the CPUs' counts go by the table's epochs, a set of rows each (tlbflush.bpf.c).
    if (o_.per_process)
        size_global_array(skel.maps.data_counts, 2 * ncpus_, sizeof(skel.data_counts->counts[0]));
    // Size the maps for what the options use; unused ones stay at one entry.
    bpf_map__set_max_entries(skel.maps.proc_counts, o_.per_process ? o_.common.entries(16384) : 1);
    bpf_map__set_max_entries(skel.maps.culprits, o_.culprits ? o_.common.entries(16384) : 1);
    bpf_map__set_max_entries(skel.maps.stacks, o_.stacks ? o_.common.entries(16384) : 1);
    configure_events(skel, o_.trace);
    if (flush_info_distance_) {
        ro->read_flush_info = true;
        ro->flush_info_from_rq = *flush_info_distance_;
    }
    set_compat(*ro, kernel_features());
}

void Tlbflush::check_options() {
    if (no_shootdown_ipis)
        throw RuntimeError(no_shootdown_ipis);
    if (!o_.cpus.empty())
        cpu_mask_ = parse_cpu_list(o_.cpus, ncpus_);
    if (ncpus_ > TLBFLUSH_MAX_CPUS)
        throw RuntimeError(fmt::format("This machine has {} CPUs; tlbflush handles up to {}.",
                                       ncpus_, TLBFLUSH_MAX_CPUS));
    if (!o_.reasons.empty())
        reason_mask_ = reasons_.parse_mask(o_.reasons);
    if (o_.pid_given)
        require_process(o_.pid, "-p");
    if (o_.profile.wanted())
        o_.stacks = true; // the profile is the senders' stacks
    if (o_.stacks)
        o_.culprits = true;
    if (o_.trace && o_.profile.folded)
        throw UsageError("--folded prints the folded stacks alone: it takes no --trace");
    profile_out_.open(o_.profile, o_.common);
    if (o_.trace && o_.common.interval > 0)
        throw UsageError("--trace prints every event; it takes no interval");
    check_prometheus_options(o_.prom, o_.common);
    if (o_.prom.on()) {
        if (o_.trace || o_.stacks || o_.per_process)
            throw UsageError("--prometheus serves counters and histograms: --trace, -s, -P and the "
                             "profiles go with the text output (per-task counts: "
                             "--prometheus-labels comm)");
        // Per-task series come from the per-process table.
        o_.per_process = o_.prom.label("comm");
    }
    check_buffer_size_used(o_.events, o_.trace, "--trace");
    check_max_entries_used(o_.common, o_.per_process || o_.culprits,
                           "-P, --culprits or -s (or --prometheus-labels comm)");
}

void Tlbflush::prepare(const Verbosity &) {
    // The flush IPIs' callback in every mode, and with -s what symbolizes the stacks.
    ksyms_ = o_.stacks ? KernelSymbols::for_stacks({"flush_tlb_func", "flush_tlb_func_remote"})
                       : KernelSymbols::load_only({"flush_tlb_func", "flush_tlb_func_remote"});
    if ((o_.culprits || o_.latency) && ksyms_->addresses_hidden())
        throw RuntimeError(
            fmt::format("missing CAP_SYSLOG: {} reads the kernel's symbol addresses, which "
                        "/proc/kallsyms shows only to CAP_SYSLOG (kernel.kptr_restrict, "
                        "kernel.perf_event_paranoid); grant it or run as root.",
                        o_.culprits ? "--culprits" : "-L"));

    if (o_.stacks)
        note_user_frames_need_ptrace(tool_name, "-s");
    flush_info_distance_ = flush_info_from_runqueue();
}

void Tlbflush::loaded(const Verbosity &v) {
    const auto &probes = probes_;
    const Probe *csd_queue = find_probe(probes, ProbeId::CsdQueue);
    const Probe *csd_function = find_probe(probes, ProbeId::CsdFunction);
    culprit_ipis_unknown_ = csd_queue != nullptr && csd_queue->uses_family(culprits_from_send_ipi);
    marks_from_tlb_flush_ =
        csd_function != nullptr && csd_function->uses_family(marks_from_tlb_flush);
    // How remote flushes reach their CPUs here, said once where it is not by IPI alone: a
    // CPU that receives no IPI is not a CPU whose TLB nobody flushes.
    const Hypervisor &hv = this_hypervisor();
    const std::string path_note =
        fmt::format("remote TLB flushes on this machine{}: {}",
                    hv.name.empty() ? "" : " (" + hv.name + " guest)", hv.how);
    // Where the hypervisor's hypercall replaces the kernel's own path (Hyper-V, Xen PV),
    // tlb_flush never sees the requests: nothing here counts those flushes.
    if (hv.remote_flushes == FlushPath::Hypervisor || hv.remote_flushes == FlushPath::Mixed)
        fmt::print(stderr, "{}: {}. {}\n", tool_name, path_note,
                   hv.requests_traced
                       ? "The remote flush requests naming a CPU count them all; its "
                         "shootdowns received only the IPIs."
                       : "Neither the remote flush requests nor the shootdowns received "
                         "count the flushes the hypervisor does.");
    else
        verbose(v, path_note);
    if (!hv.source.empty())
        verbose(v, "how remote flushes are delivered: read from " + hv.source);
    verbose(v, features_note_of_targets());

    if (!o_.prom.on())
        return;
    const uint32_t remote = reasons_.value_or("remote_shootdown", 1);
    const uint32_t wrong_cpu = reasons_.value_or("remote_wrong_cpu", 5);
    metrics_.emplace(
        o_.prom, [this](uint32_t r) { return reasons_.name(r); },
        std::vector<uint32_t>{remote, wrong_cpu});
    const size_t ncpus = std::min(ncpus_, TLBFLUSH_MAX_CPUS);
    tlbflush::Counts &c = counts_;
    c.cpus = cpu_mask_.empty() ? std::vector<bool>(ncpus, true) : cpu_mask_;
    c.cpus.resize(ncpus);
    c.by_cpu.resize(ncpus);
    c.latency = o_.latency;
    c.callbacks = !marks_from_tlb_flush_;
    c.culprits = o_.culprits;
    c.culprit_ipis = !culprit_ipis_unknown_;
    c.hypervisor = this_hypervisor().name;
}

int Tlbflush::trace() {
    const auto v = o_.common.verbosity();
    tlbflush_bpf *skel = &this->skel();
    std::optional<EventReader> events;
    if (o_.trace) {
        read_events<tlbflush_event>(
            events, o_.events, [this](const auto &e) { print_event(e); }, v);
        events_ = &*events;
        if (!o_.common.json)
            fmt::print("{}", tlbflush::event_header(o_.common.timestamp));
    }
    // The baseline before "ready": a workload started on that signal is counted whole.
    Snapshot before = snapshot(*skel);
    const Snapshot start = before;
    started_ = std::chrono::system_clock::now();
    announce_tracing("Tracing TLB flushes...");
    fflush(stdout);

    bool done = trace_until_stopped(o_.common, events ? &*events : nullptr, [&] {
        Snapshot now = snapshot(*skel);
        print_interval(*skel, now, before);
        before = std::move(now);
    });
    if (!done) {
        // The final summary: everything since the last interval (or since the start).
        Snapshot now = snapshot(*skel);
        if (!profile_out_.replaces_output())
            print_interval(*skel, now, before);
        before = std::move(now);
    }
    if (profile_out_.wanted())
        write_profile(*skel, before, start);
    report_path_seen(before);
    if (o_.stacks)
        note_stacks_lost(tool_name, skel->bss->stacks_lost,
                         bpf_map__max_entries(skel->maps.stacks));
    return end_run("events", v);
}

} // namespace memlat::tlbflush

namespace {

// The options that shape what tlbflush counts: its own, and `memlat exporter`'s
// --tlbflush.NAME.
void add_counting_options(CommandLine &cli, Options &o) {
    cli.option('c', "cpu", "LIST",
               "Only events on these CPUs, e.g. 11 or 0,2-5 (for --culprits the target "
               "CPU, for -L the victim CPU)",
               o.cpus);
    cli.option('p', "pid", "PID",
               "Only events whose current task belongs to process PID (for --culprits: "
               "the sender)",
               [&o](const std::string &text) {
                   o.pid = parse_number<int>(text, "-p");
                   o.pid_given = true;
               });
    cli.option(0, "reason", "LIST",
               "Only these reasons, by name or number, comma-separated (e.g. "
               "remote_shootdown,remote_wrong_cpu)",
               o.reasons);
    cli.retired_short('r', "--reason", "--rows, rows to print, as in BCC's top tools");
    cli.flag(0, "culprits",
             "Count remote flush requests and shootdown IPIs by sender (PID, TID, COMM) and "
             "target CPU",
             o.culprits);
    cli.flag('L', "latency",
             "Log2 histograms (nsecs) per victim CPU: the IPI handler's time for each "
             "call-function IPI that flushed the TLB, and the flush callback's (see below)",
             o.latency);
    add_series_options(cli, o.prom, {"comm"});
}

void add_own_options(CommandLine &cli, Options &o) {
    cli.flag('P', "per-process", "Break the counts down by process (PID and COMM) too",
             o.per_process);
    add_profile_options(cli, o.profile, 0, "the senders' stacks (as -s)",
                        "the remote flush requests it sent; the target CPU is the root frame, "
                        "then the sender",
                        "flush_ipis and flush_requests, labels pid, tid, comm, target_cpu");
    cli.flag('s', "stacks",
             "With --culprits (implied): the sender's kernel and user stacks, symbolized, "
             "most frequent first",
             o.stacks);
    cli.flag(0, "trace", "One line per flush: TIME CPU PID COMM REASON PAGES", o.trace);
    cli.retired_short('t', "--trace", "--tid, a thread, as in BCC's drsnoop");
}

constexpr ToolManual manual{
    .summary =
        "TLB flushes by CPU and reason, who sends shootdown IPIs, how long victims handle them",
    .description = description,
    .examples = examples,
    .hook_kinds = hook_kinds,
    .timestamp_help = "A wall-clock time (HH:MM:SS) on each interval, and on each --trace line",
    .event_lines = "--trace's lines",
};

} // namespace

// memlat tlbflush (and a link named tlbflush), and its part of `memlat exporter`.
extern const ToolEntry memlat_tool_tlbflush =
    tool_entry<Tlbflush, tool_name, manual, add_own_options, add_counting_options>();
