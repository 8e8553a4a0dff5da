// numamove's front-end, declared for the files that hold its parts: numamove.cpp (the
// manual, the options and the plan) and numamove_tool_read.cpp (what is read back: the
// snapshots, the tables by reason, process and histogram, and the metrics).
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <optional>

#include "cli/histogram.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/run_loop.h"
#include "kernel/features.h"
#include "kernel/tasks.h"
#include "kernel/types.h"
#include "loading/epoch_table.h"
#include "loading/loader.h"
#include "numamove.h"
#include "numamove.skel.h"
#include "numamove_format.h"
#include "numamove_metrics.h"
#include "prometheus/exporter.h"
#include "prometheus/metrics_serving.h"
#include "tool/tool.h"

namespace memlat::numamove {

inline constexpr char tool_name[] = "numamove";
using json = nlohmann::json;

struct Options {
    CommonOptions common;
    std::optional<int> pid;
    bool reasons = false;
    bool per_process = false;
    bool hist = false;
    bool per_call = false;
    bool task_moves = false;
    PrometheusOptions prom;
};

struct ProcKey {
    uint32_t pid, reason;
    auto operator<=>(const ProcKey &) const = default;
};

// Everything the BPF side has counted so far; intervals print the difference of two.
struct Snapshot {
    std::array<numamove_count, NUMAMOVE_MAX_REASONS> counts{};
    std::array<std::array<uint64_t, MEMLAT_HIST_SLOTS>, NUMAMOVE_MAX_REASONS> hist{};
    numamove_call_count calls{};
    std::array<uint64_t, MEMLAT_HIST_SLOTS> call_hist{};
    std::array<uint64_t, NUMAMOVE_TASK_MOVES> moves{};
    std::map<ProcKey, numamove_count> procs;
    std::map<ProcKey, std::string> comms;
    uint64_t table_full = 0, unpaired = 0, depth_overflow = 0;
    uint64_t skipped_runs = 0; // recursion misses
};

// The counts by reason, as EpochCounters sums them.
struct ReasonCounts {
    std::array<numamove_count, NUMAMOVE_MAX_REASONS> by_reason{};
    ReasonCounts since(const ReasonCounts &before) const {
        ReasonCounts d;
        for (size_t r = 0; r < by_reason.size(); ++r)
            d.by_reason[r] = numamove::minus(by_reason[r], before.by_reason[r]);
        return d;
    }
    ReasonCounts &operator+=(const ReasonCounts &more) {
        for (size_t r = 0; r < by_reason.size(); ++r)
            by_reason[r] = numamove::plus(by_reason[r], more.by_reason[r]);
        return *this;
    }
};

// The probes plan() makes, looked up by these and not by their labels.
enum class ProbeId { End, Start, PerCall, TaskMoves };
// -M's fall-back when fentry and kprobes are refused: the numa_misplaced calls the migrate
// tracepoints already see.
inline constexpr const char *per_call_from_tracepoints = "migrate_tracepoints";

class Numamove final : public Tool<numamove_bpf, Options, tool_name> {
  public:
    using Tool::Tool;
    void check_options() override;
    CountedLosses collect(prometheus::Exposition &out) override;

  private:
    int trace() override;
    void prepare(const Verbosity &v) override;
    std::vector<Probe> plan() const override;
    void configure(numamove_bpf &skel) override;
    void loaded(const Verbosity &v) override;
    // The whole-machine counts and histograms (no per-process table): every view and the
    // metrics start from them.
    static Snapshot totals(const numamove_bpf &skel);
    Snapshot snapshot(numamove_bpf &skel);
    void per_process_snapshot(numamove_bpf &skel, Snapshot &s);
    void print_interval(const Snapshot &now, const Snapshot &before);
    void print_default(const Snapshot &now, const Snapshot &before, json &out) const;
    // A table of rows: under -j the list `json_key` of the interval's object, else the header
    // and a line per row.
    template <typename Row>
    void print_rows(const std::vector<Row> &rows, const char *json_key, const std::string &header,
                    std::string (*line)(const Row &, const numamove::ReasonNames &),
                    json (*to_json)(const Row &, const numamove::ReasonNames &), json &out) const;
    void print_reasons(const Snapshot &now, const Snapshot &before, json &out) const;
    void print_processes(const Snapshot &now, const Snapshot &before, json &out) const;
    void print_hists(const Snapshot &now, const Snapshot &before, json &out) const;

    std::optional<numamove::Metrics> metrics_; // --prometheus
    // -P: the table read by epochs (the processes of one interval), the totals of the keys
    // active in the last one, and the counts by reason by the same epochs.
    EpochTable<numamove_proc_key, numamove_proc_value, ProcKey> proc_table_{
        [](const numamove_proc_key &k) {
            return ProcKey{k.pid, k.reason};
        },
        [](numamove_proc_value &into, const numamove_proc_value &entry) {
            const numamove_count before = into.c;
            into = entry;
            into.c = numamove::plus(into.c, before);
        }};
    std::map<ProcKey, numamove_proc_value> proc_totals_;
    bool proc_table_began_ = false;
    EpochCounters<ReasonCounts> reason_epochs_{[this](uint32_t epoch) {
        ReasonCounts out;
        const auto &counts = skel().bss->counts[epoch & 1];
        std::copy(std::begin(counts), std::end(counts), out.by_reason.begin());
        return out;
    }};
    numamove::Counts counts_;
    numamove::ReasonNames reasons_ = numamove::ReasonNames::from_kernel();
    int64_t numa_reason_ = -1;
    std::optional<numamove::ArgLayout> layout_;
    std::string layout_why_;
    bool per_call_view_ = false; // --per-call and the kernel let us time migrate_misplaced_*
};

} // namespace memlat::numamove
