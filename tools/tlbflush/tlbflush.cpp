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
#include "tool/tool.h"

using namespace memlat;

namespace {

constexpr char tool_name[] = "tlbflush";

// The events' buffer (--buffer-size), and the batch after which user space is woken.
// TLB flushes come by up to hundreds of thousands a second: -t holds 4 MiB, 74898 records.
// The BPF side wakes user space when the ring buffer's producer position crosses a multiple
// of the batch (submit_batched() in bpf/common.bpf.h), a test that needs a power of two.
constexpr EventBufferSize default_event_buffer{.bytes = 4 << 20, .wakeup_bytes = 64 * 1024};
static_assert(std::has_single_bit(default_event_buffer.bytes) &&
              std::has_single_bit(default_event_buffer.wakeup_bytes));

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
  tlbflush -c 11 -r remote_shootdown,remote_wrong_cpu -d 10
                            remote shootdowns that hit CPU 11 in 10 seconds
  tlbflush -c 11 --culprits -s
                            who sends shootdown IPIs to CPU 11, with stacks
  tlbflush -c 11 -L         how long they interrupt CPU 11: IPI handler and
                            flush callback histograms
  tlbflush -P -p 1234       flushes of process 1234, per process and CPU
  tlbflush -t               one line per flush
  tlbflush -j 1             a JSON line per second
  tlbflush -L --prometheus :9846
                            serve the counts and the -L histograms to
                            Prometheus at http://HOST:9846/metrics

)";

// MEMLAT_DISABLE_HOOKS in --help: the hook kinds and families of its probes.
constexpr std::array<std::string_view, 2> hook_kinds{
    "never try these hook kinds or families", "(tp_btf, raw_tp, tracepoint, csd, irq_vectors)"};

struct Options {
    CommonOptions common;
    std::string cpus;
    int pid = 0;
    bool pid_given = false;
    std::string reasons;
    bool per_process = false;
    bool culprits = false;
    bool stacks = false;
    bool latency = false;
    bool trace = false;
    ProfileOutputOptions profile; // --folded, --folded-file, --pprof
    PrometheusOptions prom;
    EventBufferSize events = default_event_buffer;
};

// The kernel's reasons, by number; the names come from BTF so they follow the running kernel.
struct Reasons {
    std::map<int64_t, std::string> names;

    static Reasons from_kernel() {
        Reasons r;
        try {
            r.names = kernel_enum_names("tlb_flush_reason", "TLB_");
        } catch (const RuntimeError &) {
            // Kernels whose BTF lacks the enum still trace; the numbers are printed instead.
        }
        return r;
    }
    std::string name(int64_t reason) const {
        auto it = names.find(reason);
        return it != names.end() ? it->second : fmt::format("reason_{}", reason);
    }
    std::optional<int64_t> value(std::string_view name) const {
        for (const auto &[value, n] : names)
            if (n == name)
                return value;
        return std::nullopt;
    }
    int64_t value_or(std::string_view name, int64_t fallback) const {
        return value(name).value_or(fallback);
    }
    uint32_t parse_mask(const std::string &list) const {
        uint32_t mask = 0;
        for (const auto &item : split_list(list, "reason list")) {
            int64_t v = -1;
            if (auto named = value(item)) {
                v = *named;
            } else {
                // A number is accepted only when the running kernel has a reason of that value.
                int64_t number = -1;
                auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), number);
                if (ec == std::errc{} && end == item.data() + item.size() && names.contains(number))
                    v = number;
            }
            if (v < 0 || v >= TLBFLUSH_MAX_REASONS) {
                std::string known;
                for (const auto &[value, n] : names)
                    known += fmt::format("{}{} ({})", known.empty() ? "" : ", ", n, value);
                throw UsageError(
                    fmt::format("unknown TLB flush reason '{}'; this kernel has: {}", item, known));
            }
            mask |= 1u << v;
        }
        return mask;
    }
};

using tlbflush::CountKey;
using tlbflush::Snapshot;

// The probes plan() makes, looked up by these and not by their labels.
enum class ProbeId { TlbFlush, CsdQueue, IpiHandler, CsdFunction };
// Choices that attach nothing of their own and take what other probes see instead: their
// families, set in plan() and tested after loading.
constexpr const char *culprits_from_send_ipi = "remote_send_ipi";
constexpr const char *marks_from_tlb_flush = "tlb_flush";

// A process's counts on one CPU for one reason.
void add_proc_counts(tlbflush_proc_value &into, const tlbflush_proc_value &from) {
    into.c = tlbflush::plus(into.c, from.c);
}

// The CPUs' counts by CPU and reason (pid 0), as EpochCounters sums them.
struct CpuCounts {
    std::map<CountKey, tlbflush_count> by_key;
    CpuCounts since(const CpuCounts &before) const {
        CpuCounts d;
        for (const auto &[key, c] : by_key) {
            const auto it = before.by_key.find(key);
            d.by_key[key] = it == before.by_key.end() ? c : tlbflush::minus(c, it->second);
        }
        return d;
    }
    CpuCounts &operator+=(const CpuCounts &more) {
        for (const auto &[key, c] : more.by_key)
            by_key[key] = tlbflush::plus(by_key[key], c);
        return *this;
    }
};

class Tlbflush final : public Tool<tlbflush_bpf, Options, tool_name> {
  public:
    explicit Tlbflush(Options options) : Tool(std::move(options)), ncpus_(possible_cpus()) {}
    void check_options() override;
    CountedLosses collect(prometheus::Exposition &out) override;

  private:
    int trace() override;
    void prepare(const Verbosity &v) override;
    std::vector<Probe> plan() const override;
    void configure(tlbflush_bpf &skel) override;
    void loaded(const Verbosity &v) override;
    Snapshot snapshot(tlbflush_bpf &skel);
    void print_interval(tlbflush_bpf &skel, const Snapshot &now, const Snapshot &before);
    tlbflush::ViewFormat view_format() const;
    std::string features_note_of_targets() const;
    bool path_evidence() const;
    void report_path_seen(const Snapshot &last) const;
    std::vector<std::string> stack_frames(tlbflush_bpf &skel, int32_t id, bool user, uint32_t pid);
    void print_event(const tlbflush_event &e);

    std::optional<tlbflush::Metrics> metrics_; // --prometheus
    tlbflush::Counts counts_;
    int ncpus_;
    Reasons reasons_ = Reasons::from_kernel();
    std::vector<bool> cpu_mask_;
    uint32_t reason_mask_ = ~0u;
    std::optional<KernelSymbols> ksyms_;
    // flush_info_from_runqueue(), read before the load frees the run's BTF.
    std::optional<int64_t> flush_info_distance_;
    std::optional<StackSymbolizer> stacks_; // -s, made at the first stack
    ProfileOutputs profile_out_;
    std::chrono::system_clock::time_point started_; // tracing began (the profile's time)
    // The senders' stacks since `start`, as a profile (--folded, --folded-file, --pprof).
    void write_profile(tlbflush_bpf &skel, const Snapshot &now, const Snapshot &start);
    // --culprits without the csd tracepoints: the requests by sender and target are counted,
    // the IPIs each sender queued are not.
    bool culprit_ipis_unknown_ = false;
    // Without the csd tracepoints: -L marks handler runs with tlb_flush, and the flush IPIs a
    // CPU received are only those tlb_flush reports (fewer than the /proc/interrupts TLB row).
    bool marks_from_tlb_flush_ = false;
    // -P: the per-process table, read one interval at a time, and the totals of the keys
    // active in the last interval.
    EpochTable<tlbflush_proc_key, tlbflush_proc_value, CountKey> proc_table_{
        [](const tlbflush_proc_key &k) {
            return CountKey{k.pid, k.cpu, k.reason};
        },
        [](tlbflush_proc_value &into, const tlbflush_proc_value &entry) {
            const tlbflush_proc_value before = into;
            into = entry;
            add_proc_counts(into, before);
        }};
    std::map<CountKey, tlbflush_proc_value> proc_totals_;
    bool proc_table_began_ = false; // the first snapshot (the baseline) began it
    // -P: the CPUs' counts by the table's epochs (rows epoch * ncpus + cpu).
    CpuCounts epoch_counts(uint32_t epoch);
    EpochCounters<CpuCounts> cpu_epochs_{[this](uint32_t epoch) { return epoch_counts(epoch); }};
    uint64_t first_event_ns_ = 0;
    // The trace events' reader (-t), whose perf buffers count the records they lost.
    const EventReader *events_ = nullptr;
};

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
    auto csd_ways = [&](std::vector<std::string> programs, std::string instead,
                        std::string caveat) {
        auto choices = tracepoint_choices(programs, "csd");
        std::swap(choices[0], choices[1]);
        for (auto &c : choices)
            c.unavailable = no_symbol;
        choices.push_back({.kind = HookKind::FromOtherProbes,
                           .family = std::move(instead),
                           .caveat = std::move(caveat)});
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
                     "mode")});
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
                              "/proc/interrupts TLB row: shown as remote flushes traced")});
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

// -P: the CPUs' counts in `epoch`'s rows, by CPU and reason.
CpuCounts Tlbflush::epoch_counts(uint32_t epoch) {
    const auto &counts = skel().data_counts->counts;
    CpuCounts out;
    for (int cpu = 0; cpu < ncpus_ && cpu < TLBFLUSH_MAX_CPUS; ++cpu)
        for (uint32_t r = 0; r < TLBFLUSH_MAX_REASONS; ++r)
            if (const auto &c = cpu_row(counts, epoch * ncpus_ + cpu)[r]; c.count != 0)
                out.by_key[CountKey{0, static_cast<uint32_t>(cpu), r}] = c;
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
        s.cpu_totals = cpu_epochs_.close(skel.bss->proc_epoch, close_table).by_key;
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
    s.table_full = bss->table_full;
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
        print_json_line(tlbflush::interval_json(interval, format));
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
        print_json_line(tlbflush::event_json(e, time_s, reasons_.name(e.reason), wall_time));
    else
        fmt::print("{}", tlbflush::event_line(e, time_s, reasons_.name(e.reason), wall_time));
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
        throw UsageError("--folded prints the folded stacks alone: it takes no -t");
    profile_out_.open(o_.profile, o_.common);
    if (o_.trace && o_.common.interval > 0)
        throw UsageError("-t prints every event; it takes no interval");
    check_prometheus_options(o_.prom, o_.common);
    if (o_.prom.on()) {
        if (o_.trace || o_.stacks || o_.per_process)
            throw UsageError("--prometheus serves counters and histograms: -t, -s, -P and the "
                             "profiles go with the text output (per-task counts: "
                             "--prometheus-labels comm)");
        // Per-task series come from the per-process table.
        o_.per_process = o_.prom.label("comm");
    }
    check_buffer_size_used(o_.events, o_.trace, "-t");
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
    // What this kernel cannot show (no csd tracepoints before 6.3), said once, -v or not.
    if (culprit_ipis_unknown_)
        fmt::print(stderr, "{}: {}\n", tool_name, csd_queue->choice()->caveat);
    if (marks_from_tlb_flush_ && o_.latency)
        fmt::print(stderr, "{}: {}\n", tool_name, csd_function->choice()->caveat);
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
    return CountedLosses{bss->dropped_events, bss->table_full};
}

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
    cli.option('r', "reason", "LIST",
               "Only these reasons, by name or number, comma-separated (e.g. "
               "remote_shootdown,remote_wrong_cpu)",
               o.reasons);
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
    cli.flag('t', "trace", "One line per flush: TIME CPU PID COMM REASON PAGES", o.trace);
}

constexpr ToolManual manual{
    .summary =
        "TLB flushes by CPU and reason, who sends shootdown IPIs, how long victims handle them",
    .description = description,
    .examples = examples,
    .hook_kinds = hook_kinds,
    .timestamp_help = "A wall-clock time (HH:MM:SS) on each interval, and on each -t line",
    .event_lines = "-t's lines",
};

} // namespace

// memlat tlbflush (and a link named tlbflush), and its part of `memlat exporter`.
extern const ToolEntry memlat_tool_tlbflush =
    tool_entry<Tlbflush, tool_name, manual, add_own_options, add_counting_options>();
