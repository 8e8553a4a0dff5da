// tlbflush's front-end, declared for the files that hold its parts: tlbflush.cpp (the manual,
// the options and the plan: what is attached and why) and tlbflush_tool_read.cpp (what is read
// back: snapshots, intervals, events, stacks, profiles and metrics).
#pragma once

#include <bit>
#include <charconv>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/options.h"
#include "cli/profile_output.h"
#include "kernel/types.h"
#include "loading/epoch_table.h"
#include "loading/events.h"
#include "loading/stacks.h"
#include "loading/symbols.h"
#include "prometheus/metrics_serving.h"
#include "tlbflush.h"
#include "tlbflush.skel.h"
#include "tlbflush_format.h"
#include "tlbflush_metrics.h"
#include "tool/tool.h"

namespace memlat::tlbflush {

inline constexpr char tool_name[] = "tlbflush";

// The events' buffer (--buffer-size), and the batch after which user space is woken.
// TLB flushes come by up to hundreds of thousands a second: --trace holds 4 MiB, 74898 records.
// The BPF side wakes user space when the ring buffer's producer position crosses a multiple
// of the batch (submit_batched() in bpf/common.bpf.h), a test that needs a power of two.
inline constexpr EventBufferSize default_event_buffer{.bytes = 4 << 20, .wakeup_bytes = 64 * 1024};
static_assert(std::has_single_bit(default_event_buffer.bytes) &&
              std::has_single_bit(default_event_buffer.wakeup_bytes));

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

// The probes plan() makes, looked up by these and not by their labels.
enum class ProbeId { TlbFlush, CsdQueue, IpiHandler, CsdFunction };
// Choices that attach nothing of their own and take what other probes see instead: their
// families, set in plan() and tested after loading.
inline constexpr const char *culprits_from_send_ipi = "remote_send_ipi";
inline constexpr const char *marks_from_tlb_flush = "tlb_flush";

// A process's counts on one CPU for one reason.
inline void add_proc_counts(tlbflush_proc_value &into, const tlbflush_proc_value &from) {
    into.c = tlbflush::plus(into.c, from.c);
}

// The CPUs' counts by CPU and reason (pid 0), as EpochCounters sums them.
struct CpuCounts {
    std::map<CountKey, tlbflush_count> by_key;
    uint64_t table_full = 0; // the per-process table's refused inserts
    CpuCounts since(const CpuCounts &before) const {
        CpuCounts d{.table_full = table_full - before.table_full};
        for (const auto &[key, c] : by_key) {
            const auto it = before.by_key.find(key);
            d.by_key[key] = it == before.by_key.end() ? c : tlbflush::minus(c, it->second);
        }
        return d;
    }
    CpuCounts &operator+=(const CpuCounts &more) {
        for (const auto &[key, c] : more.by_key)
            by_key[key] = tlbflush::plus(by_key[key], c);
        table_full += more.table_full;
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
    // The trace events' reader (--trace), whose perf buffers count the records they lost.
    const EventReader *events_ = nullptr;
};

} // namespace memlat::tlbflush
