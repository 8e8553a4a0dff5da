// numamove: page migrations per second, exact, by reason (NUMA balancing's misplaced pages,
// compaction, mbind, demotion, ...), with their time and the processes that ran them.
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
#include "cli/multicall.h"
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

using namespace memlat;
using nlohmann::json;

namespace {

constexpr char tool_name[] = "numamove";

constexpr const char *description =
    R"(Count page migrations and the time they take, every second. The default
view is the one of bpftrace's numamove.bt and libbpf-tools' numamove:
  TIME  NUMA_migrations  NUMA_migrations_ms
NUMA_migrations counts the migrations of automatic NUMA balancing (reason
numa_misplaced: one call of migrate_pages() per misplaced page or THP) and
NUMA_migrations_ms their summed time, from nanoseconds (never truncated to
whole milliseconds per migration). The anchors time migrate_misplaced_page()
instead; -c does that where the kernel allows it.

numamove watches migrate:mm_migrate_pages_start and mm_migrate_pages, which
every migration passes (compaction, mbind, NUMA balancing, demotion, ...):
-r shows them all by reason, with the pages that succeeded and failed (base
pages, as /proc/vmstat's pgmigrate_success and pgmigrate_fail count them),
THPs migrated whole, failed or split, and the time. Reason names are read
from the running kernel (enum migrate_reason). Migrations are attributed to
the task that ran them: the faulting thread for NUMA balancing, kcompactd or
the allocating task for compaction. INTERVAL defaults to 1 second; every
view prints the time of each interval, with or without -T.)";

constexpr const char *examples = R"(Examples:
  numamove                  NUMA-balancing migrations per second
  numamove -r               every migration by reason, per second
  numamove -r -j 10 6       by reason, JSON, every 10 seconds for a minute
  numamove --prometheus 127.0.0.1:9849
                            serve the counts and histograms to Prometheus
  numamove -P -p 1234       process 1234's NUMA migrations, per process
  numamove -r -P            who migrates what, by reason
  numamove -H               log2 histogram of the time per migration
  numamove -c -H            time migrate_misplaced_folio() calls instead
  numamove -m               add NUMA balancing's task moves, swaps, sticks

)";

// MEMLAT_DISABLE_HOOKS in --help: the hook kinds and families of its probes.
constexpr std::array<std::string_view, 3> hook_kinds{
    "never try these hook kinds or families (tp_btf,", "raw_tp, tracepoint, fentry, kprobe,",
    "migrate_pages_start, migrate_pages)"};

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
constexpr const char *per_call_from_tracepoints = "migrate_tracepoints";

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
    bool per_call_view_ = false; // -c and the kernel let us time migrate_misplaced_*
};

std::vector<Probe> Numamove::plan() const {
    std::vector<Probe> probes;
    // The end first: a migration in flight when tracing starts is then counted (untimed),
    // never timed from a start whose end was missed.
    auto end = tracepoint_choices({"migrate_end"});
    if (!layout_) {
        // tp_btf and raw_tp see positional arguments only; without a layout they would read
        // the wrong ones. The classic tracepoint's named fields need no layout.
        end[0].unavailable = "mm_migrate_pages' arguments not recognized: " + layout_why_;
        end[1].unavailable = end[0].unavailable;
    }
    probes.emplace_back(ProbeId::End, "migrate:mm_migrate_pages",
                        "It needs the migrate:mm_migrate_pages tracepoint (CONFIG_MIGRATION).",
                        std::move(end));
    // The start only times the calls. mm_migrate_pages_start came in Linux 5.16; before it,
    // the entry of migrate_pages(), where that tracepoint sits, is the same moment.
    auto start = tracepoint_choices({"migrate_start"}, "migrate_pages_start");
    const std::string entry =
        "the entry of migrate_pages(), where mm_migrate_pages_start sits on 5.16+";
    start.push_back({.kind = HookKind::Fentry,
                     .programs = {"migrate_start_fentry"},
                     .family = "migrate_pages",
                     .caveat = entry});
    start.push_back({.kind = HookKind::Kprobe,
                     .programs = {"migrate_start_kprobe"},
                     .family = "migrate_pages",
                     .caveat = entry});
    probes.emplace_back(ProbeId::Start,
                        "migrate:mm_migrate_pages_start (times each migrate_pages() call)", "",
                        std::move(start), false);

    if (o_.per_call) {
        auto call = [](HookKind kind, const std::string &function, const std::string &suffix) {
            std::string base =
                function == "migrate_misplaced_folio" ? "misplaced_folio" : "misplaced_page";
            bool fentry = kind == HookKind::Fentry;
            return HookChoice{
                .kind = kind,
                .programs = {base + (fentry ? "_fexit" : "_kretprobe"), base + suffix},
                .family = function};
        };
        std::vector<HookChoice> choices{
            call(HookKind::Fentry, "migrate_misplaced_folio", "_fentry"),
            call(HookKind::Fentry, "migrate_misplaced_page", "_fentry"),
            call(HookKind::Kprobe, "migrate_misplaced_folio", "_kprobe"),
            call(HookKind::Kprobe, "migrate_misplaced_page", "_kprobe"),
            {.kind = HookKind::FromOtherProbes,
             .family = per_call_from_tracepoints,
             .caveat = "NUMA_migrations are the numa_misplaced migrate_pages() calls of the "
                       "tracepoints above; their time excludes what migrate_misplaced_* does "
                       "around migrate_pages() (isolating the page, on kernels that do it "
                       "there)"},
        };
        probes.emplace_back(ProbeId::PerCall,
                            "migrate_misplaced_folio/migrate_misplaced_page (per call)", "",
                            std::move(choices));
    }
    if (o_.task_moves)
        probes.emplace_back(ProbeId::TaskMoves,
                            "sched:sched_move_numa/sched_swap_numa/sched_stick_numa",
                            "They need CONFIG_NUMA_BALANCING.",
                            tracepoint_choices({"move_numa", "swap_numa", "stick_numa"}), false);
    probes.push_back(thread_exit_probe());
    return probes;
}

void Numamove::configure(numamove_bpf &skel) {
    auto *ro = skel.rodata;
    ro->filter_pid = static_cast<uint32_t>(o_.pid.value_or(0));
    ro->per_process = o_.per_process;
    ro->hist_mode = o_.hist;
    if (layout_) {
        ro->arg_succeeded = layout_->succeeded;
        ro->arg_failed = layout_->failed;
        ro->arg_thp_succeeded = layout_->thp_succeeded;
        ro->arg_thp_failed = layout_->thp_failed;
        ro->arg_thp_split = layout_->thp_split;
        ro->arg_large_split = layout_->large_split;
        ro->arg_reason = layout_->reason;
    }
    bpf_map__set_max_entries(skel.maps.proc_counts, o_.per_process ? o_.common.entries(8192) : 1);
    set_compat(*ro, kernel_features());
    size_thread_state_map(skel.maps.starts, skel.maps.starts_overflow, o_.common.max_entries);
}

Snapshot Numamove::totals(const numamove_bpf &skel) {
    Snapshot s;
    const auto *bss = skel.bss;
    for (int r = 0; r < NUMAMOVE_MAX_REASONS; ++r) {
        // Both epochs: -P divides the counts between them, the totals are their sum.
        s.counts[r] = numamove::plus(bss->counts[0][r], bss->counts[1][r]);
        std::copy(std::begin(bss->hist[r]), std::end(bss->hist[r]), s.hist[r].begin());
    }
    s.calls = bss->call_count;
    std::copy(std::begin(bss->call_hist), std::end(bss->call_hist), s.call_hist.begin());
    std::copy(std::begin(bss->task_moves), std::end(bss->task_moves), s.moves.begin());
    return s;
}

Snapshot Numamove::snapshot(numamove_bpf &skel) {
    Snapshot s = totals(skel);
    auto *bss = skel.bss;
    if (o_.per_process)
        per_process_snapshot(skel, s);
    s.table_full = bss->table_full;
    s.unpaired = bss->unpaired_ends;
    s.depth_overflow = bss->depth_overflow;
    s.skipped_runs = recursion_misses(skel.obj);
    return s;
}

// -P: the interval's processes from the table's epoch that closes now, with their counts since
// the start, and the totals by reason of the same epochs (so the rows add up to them but for
// a full table): the table holds one interval's processes, not the run's.
void Numamove::per_process_snapshot(numamove_bpf &skel, Snapshot &s) {
    auto &epoch = skel.bss->table_epoch;
    if (!proc_table_began_) {
        reason_epochs_.begin(epoch);
        proc_table_.begin(epoch);
        proc_table_began_ = true;
        s.counts = reason_epochs_.totals().by_reason;
        return;
    }
    std::map<ProcKey, numamove_proc_value> active;
    auto close_table = [&] {
        for (const auto &[key, gained] : proc_table_.next_interval(skel.maps.proc_counts, epoch)) {
            numamove_proc_value v = gained;
            if (auto it = proc_totals_.find(key); it != proc_totals_.end())
                v.c = numamove::plus(v.c, it->second.c);
            active[key] = v;
            s.procs[key] = v.c;
            s.comms[key] = std::string(v.comm, strnlen(v.comm, sizeof(v.comm)));
        }
    };
    s.counts = reason_epochs_.close(epoch, close_table).by_reason;
    proc_totals_ = std::move(active);
}

void Numamove::print_default(const Snapshot &now, const Snapshot &before, json &out) const {
    numamove_count numa{};
    if (numa_reason_ >= 0 && numa_reason_ < NUMAMOVE_MAX_REASONS)
        numa = numamove::minus(now.counts[numa_reason_], before.counts[numa_reason_]);
    uint64_t migrations = numa.calls, ns = numa.total_ns;
    if (per_call_view_) {
        migrations = now.calls.calls - before.calls.calls;
        ns = now.calls.total_ns - before.calls.total_ns;
    }
    std::array<uint64_t, NUMAMOVE_TASK_MOVES> moves{};
    for (int i = 0; i < NUMAMOVE_TASK_MOVES; ++i)
        moves[i] = now.moves[i] - before.moves[i];
    if (o_.common.json) {
        out["numa_migrations"] = migrations;
        out["numa_migrations_ms"] = ns / 1e6;
        out["numa_migrations_ns"] = ns;
        out["view"] = per_call_view_ ? "per_call" : "tracepoints";
        out["pages_succeeded"] = numa.succeeded;
        out["pages_failed"] = numa.failed;
        out["thp_succeeded"] = numa.thp_succeeded;
        if (o_.task_moves)
            out["task_moves"] = {
                {"move", moves[NUMAMOVE_MOVE]},
                {"swap", moves[NUMAMOVE_SWAP]},
                {"stick", moves[NUMAMOVE_STICK]},
            };
        return;
    }
    std::string line = numamove::default_line(wall_clock_time(), migrations, ns);
    if (o_.task_moves)
        line += fmt::format(" {:>10} {:>10} {:>10}", moves[NUMAMOVE_MOVE], moves[NUMAMOVE_SWAP],
                            moves[NUMAMOVE_STICK]);
    fmt::print("{}\n", line);
}

template <typename Row>
void Numamove::print_rows(const std::vector<Row> &rows, const char *json_key,
                          const std::string &header,
                          std::string (*line)(const Row &, const numamove::ReasonNames &),
                          json (*to_json)(const Row &, const numamove::ReasonNames &),
                          json &out) const {
    if (o_.common.json) {
        json list = json::array();
        for (const auto &row : rows)
            list.push_back(to_json(row, reasons_));
        out[json_key] = list;
        return;
    }
    fmt::print("{}\n", header);
    for (const auto &row : rows)
        fmt::print("{}\n", line(row, reasons_));
}

void Numamove::print_reasons(const Snapshot &now, const Snapshot &before, json &out) const {
    std::vector<numamove::ReasonRow> rows;
    for (int r = 0; r < NUMAMOVE_MAX_REASONS; ++r) {
        auto d = numamove::minus(now.counts[r], before.counts[r]);
        if (d.calls != 0)
            rows.push_back({r, d});
    }
    print_rows(rows, "reasons", numamove::reasons_header(), numamove::reason_line,
               numamove::reason_json, out);
}

void Numamove::print_processes(const Snapshot &now, const Snapshot &before, json &out) const {
    std::vector<numamove::ProcessRow> rows;
    for (const auto &[key, c] : now.procs) {
        // Without -r, only the NUMA-balancing migrations, as in the default view.
        if (!o_.reasons && key.reason != numa_reason_)
            continue;
        auto it = before.procs.find(key);
        auto d = it == before.procs.end() ? c : numamove::minus(c, it->second);
        if (d.calls != 0)
            rows.push_back({key.pid, now.comms.at(key), key.reason, d});
    }
    std::stable_sort(rows.begin(), rows.end(),
                     [](const auto &a, const auto &b) { return a.c.succeeded > b.c.succeeded; });
    // Below the -r table, a blank line apart.
    print_rows(rows, "processes", (o_.reasons ? "\n" : "") + numamove::process_header(),
               numamove::process_line, numamove::process_json, out);
    if (!o_.common.json)
        return;
    std::array<numamove_count, NUMAMOVE_MAX_REASONS> interval{};
    for (int r = 0; r < NUMAMOVE_MAX_REASONS; ++r)
        interval[r] = numamove::minus(now.counts[r], before.counts[r]);
    numamove::json_totals(interval, rows, o_.reasons ? std::nullopt : std::optional(numa_reason_),
                          reasons_, out);
}

void Numamove::print_hists(const Snapshot &now, const Snapshot &before, json &out) const {
    json list = json::array();
    auto one = [&](const std::array<uint64_t, MEMLAT_HIST_SLOTS> &a,
                   const std::array<uint64_t, MEMLAT_HIST_SLOTS> &b, const std::string &what,
                   const std::string &title) {
        const Log2Hist d = hist_since(a, b);
        if (hist_total(d) == 0)
            return;
        if (o_.common.json) {
            json h = log2_hist_json(d, "usecs");
            h["what"] = what;
            list.push_back(h);
            return;
        }
        fmt::print("\n{}\n{}", title, render_log2_hist(d, "usecs"));
    };
    if (o_.reasons) {
        for (int r = 0; r < NUMAMOVE_MAX_REASONS; ++r)
            one(now.hist[r], before.hist[r], reasons_.name(r),
                fmt::format("{} migrations (migrate_pages() calls):", reasons_.name(r)));
    } else if (per_call_view_) {
        one(now.call_hist, before.call_hist, "migrate_misplaced",
            "migrate_misplaced_* calls (NUMA balancing):");
    } else if (numa_reason_ >= 0 && numa_reason_ < NUMAMOVE_MAX_REASONS) {
        one(now.hist[numa_reason_], before.hist[numa_reason_], reasons_.name(numa_reason_),
            "NUMA-balancing migrations (numa_misplaced migrate_pages() calls):");
    }
    if (o_.common.json)
        out["histograms"] = list;
}

void Numamove::print_interval(const Snapshot &now, const Snapshot &before) {
    json out = json::object();
    const bool tables = o_.reasons || o_.per_process;
    if (o_.common.json)
        out["time"] = wall_clock_time();
    else if (tables || o_.hist)
        fmt::print("{}{}\n", tables ? "\n" : "", wall_clock_time());
    if (!tables)
        print_default(now, before, out);
    if (o_.reasons)
        print_reasons(now, before, out);
    if (o_.per_process)
        print_processes(now, before, out);
    if (o_.hist)
        print_hists(now, before, out);
    uint64_t full = now.table_full - before.table_full;
    uint64_t unpaired = now.unpaired - before.unpaired;
    uint64_t deep = now.depth_overflow - before.depth_overflow;
    if (o_.common.json) {
        out["table_full"] = full;
        out["untimed_calls"] = unpaired;
        out["nesting_too_deep"] = deep;
        out[skipped_runs_field] = now.skipped_runs - before.skipped_runs;
        print_json_line(out);
        return;
    }
    if (full != 0)
        fmt::print("{} migrations missing from the per-process table: it was full.\n", full);
    if (deep != 0)
        fmt::print("{} migrations nested deeper than {}: not timed.\n", deep, NUMAMOVE_MAX_DEPTH);
}

void Numamove::check_options() {
    if (o_.pid)
        require_process(*o_.pid, "-p");
    if (o_.per_call && o_.reasons)
        throw UsageError("-c times NUMA balancing's calls only; it does not go with -r");
    if (o_.task_moves && (o_.reasons || o_.per_process))
        throw UsageError("-m adds columns to the default view; it does not go with -r or -P");
    check_prometheus_options(o_.prom, o_.common);
    if (o_.prom.on()) {
        if (o_.reasons || o_.per_process)
            throw UsageError("--prometheus serves every reason's counts: -r and -P go with the "
                             "text output (per-task counts: --prometheus-labels comm)");
        // Histograms and task moves are counted in the kernel; per-task series need the
        // per-process table.
        o_.hist = o_.task_moves = true;
        o_.per_process = o_.prom.label("comm");
    } else if (o_.common.interval <= 0) {
        o_.common.interval = 1;
    }
    check_max_entries_used(o_.common, o_.per_process, "-P (or --prometheus-labels comm)");
}

void Numamove::prepare(const Verbosity &v) {
    if (reasons_.fallback())
        verbose(v, "The kernel's BTF has no enum migrate_reason: reason names are those of "
                   "Linux 6.18 and may be wrong here");
    else
        verbose(v, "Reason names from the kernel's BTF (enum migrate_reason)");
    if (auto numa = reasons_.value("numa_misplaced"))
        numa_reason_ = *numa;
    else
        verbose(v, "This kernel names no numa_misplaced reason: NUMA_migrations stays 0");
    if (auto prototype = tracepoint_prototype("mm_migrate_pages", layout_why_))
        layout_ = numamove::migrate_pages_layout(*prototype, layout_why_);
    if (layout_)
        verbose(v, fmt::format("mm_migrate_pages arguments for tp_btf/raw_tp, from the "
                               "kernel's BTF (btf_trace_mm_migrate_pages): {}",
                               layout_->describe()));
    else
        verbose(v, fmt::format("mm_migrate_pages arguments not recognized ({}): tp_btf and "
                               "raw_tp not tried; the classic tracepoint reads them by name",
                               layout_why_));
}

void Numamove::loaded(const Verbosity &) {
    const auto &probes = probes_;
    if (const Probe *per_call = find_probe(probes, ProbeId::PerCall)) {
        per_call_view_ = !per_call->uses_family(per_call_from_tracepoints);
        if (!per_call_view_)
            fmt::print(stderr,
                       "{}: cannot time migrate_misplaced_folio/_page calls on this kernel "
                       "(fentry and kprobes refused; -v says why): NUMA_migrations counts "
                       "the numa_misplaced migrations of the migrate tracepoints instead.\n",
                       tool_name);
    }
    if (find_probe(probes, ProbeId::Start)->choice() == nullptr)
        fmt::print(stderr,
                   "{}: cannot time migrations on this kernel (no mm_migrate_pages_start, "
                   "and fentry and kprobes on migrate_pages() refused; -v says why): pages "
                   "and calls are exact, times (_ms, AVG_us, -H) stay 0.\n",
                   tool_name);
    if (const Probe *moves = find_probe(probes, ProbeId::TaskMoves); moves && !moves->choice())
        fmt::print(stderr,
                   "{}: the kernel has no sched_*_numa tracepoints "
                   "(CONFIG_NUMA_BALANCING off?): task moves stay 0.\n",
                   tool_name);

    if (!o_.prom.on())
        return;
    metrics_.emplace(
        o_.prom, [this](uint32_t r) { return reasons_.name(r); }, numa_reason_, getpagesize());
    if (const Probe *start = find_probe(probes, ProbeId::Start))
        counts_.timed = start->choice() != nullptr;
    counts_.per_call = per_call_view_;
}

int Numamove::trace() {
    const auto v = o_.common.verbosity();
    numamove_bpf *skel = &this->skel();
    if (!o_.common.json && !o_.reasons && !o_.per_process) {
        std::string header = numamove::default_header();
        if (o_.task_moves)
            header +=
                fmt::format(" {:>10} {:>10} {:>10}", "TASK_MOVES", "TASK_SWAPS", "TASK_STICKS");
        fmt::print("{}\n", header);
    }
    announce_tracing(o_.reasons ? "Tracing page migrations by reason..."
                                : "Tracing NUMA page migrations...");
    fflush(stdout);

    Snapshot before = snapshot(*skel);
    bool done = trace_until_stopped(o_.common, nullptr, [&] {
        Snapshot now = snapshot(*skel);
        print_interval(now, before);
        before = std::move(now);
    });
    if (!done) {
        // What happened since the last interval, so that nothing counted is left unprinted.
        Snapshot now = snapshot(*skel);
        print_interval(now, before);
    }
    if (uint64_t unpaired = skel->bss->unpaired_ends; unpaired != 0)
        verbose(v, fmt::format("{} migrations were in flight when tracing began (or their start "
                               "was not seen, or the thread's state was evicted while they ran): "
                               "counted, not timed",
                               unpaired));
    return end_run("migrations", v, skel->maps.starts, skel->maps.starts_overflow);
}

CountedLosses Numamove::collect(prometheus::Exposition &out) {
    numamove_bpf &skel = this->skel();
    numamove::Counts &c = counts_;
    const Snapshot now = totals(skel);
    c.by_reason = now.counts;
    c.hist_us = now.hist;
    c.calls = now.calls;
    c.call_hist_us = now.call_hist;
    c.task_moves = now.moves;
    if (o_.per_process) {
        // Entries of processes that exited are read once more, then deleted.
        c.procs = read_hash_map<numamove_proc_key, numamove_proc_value>(skel.maps.proc_counts);
        delete_exited_tasks(skel.maps.proc_counts, c.procs,
                            [](const numamove_proc_key &k) { return k.pid; });
    }
    metrics_->collect(c, out);
    return CountedLosses{0, skel.bss->table_full, skel.bss->unpaired_ends};
}

// The options that shape what numamove counts: its own, and `memlat exporter`'s
// --numamove.NAME.
void add_counting_options(CommandLine &cli, Options &o) {
    cli.option('p', "pid", "PID", "Only migrations run by tasks of process PID", o.pid);
    cli.flag('c', "per-call",
             "Time calls of migrate_misplaced_folio (migrate_misplaced_page on older "
             "kernels), as the anchors do, with fentry or kprobes; falls back to the "
             "tracepoints where the kernel refuses both",
             o.per_call);
    add_series_options(cli, o.prom, {"comm"});
}

void add_own_options(CommandLine &cli, Options &o) {
    cli.flag('r', "reasons",
             "A table per interval of every migration by reason (numa_misplaced, "
             "compaction, syscall, mempolicy_mbind, demotion, ...): calls, pages "
             "succeeded and failed, THPs, time",
             o.reasons);
    cli.flag('P', "per-process",
             "A table per interval by process (PID, COMM of the task that ran the "
             "migration): NUMA balancing's migrations, or every reason with -r",
             o.per_process);
    cli.flag('H', "hist",
             "Log2 histogram of the time per migration (usecs), counted in the kernel: "
             "NUMA balancing's, per reason with -r, per call with -c",
             o.hist);
    cli.flag('m', "task-moves",
             "Add columns with NUMA balancing's task moves, swaps and sticks "
             "(sched_move_numa, sched_swap_numa, sched_stick_numa)",
             o.task_moves);
}

constexpr ToolManual manual{
    .summary = "page migrations (NUMA balancing and every other reason) and their time",
    .description = description,
    .examples = examples,
    .hook_kinds = hook_kinds,
    .timestamp_help =
        "Accepted for compatibility: every line already starts with its time (HH:MM:SS)",
};

} // namespace

// memlat numamove (and a link named numamove), and its part of `memlat exporter`.
extern const ToolEntry memlat_tool_numamove =
    tool_entry<Numamove, tool_name, manual, add_own_options, add_counting_options>();
