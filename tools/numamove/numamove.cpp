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
#include "numamove_tool.h"
#include "prometheus/exporter.h"
#include "prometheus/metrics_serving.h"
#include "tool/tool.h"

using namespace memlat;
using namespace memlat::numamove;
using nlohmann::json;

namespace {

constexpr const char *description =
    R"(Count page migrations and the time they take, every second. The default
view is the one of bpftrace's numamove.bt and libbpf-tools' numamove:
  TIME  NUMA_migrations  NUMA_migrations_ms
NUMA_migrations counts the migrations of automatic NUMA balancing (reason
numa_misplaced: one call of migrate_pages() per misplaced page or THP) and
NUMA_migrations_ms their summed time, from nanoseconds (never truncated to
whole milliseconds per migration). The anchors time migrate_misplaced_page()
instead; --per-call does that where the kernel allows it.

numamove watches migrate:mm_migrate_pages_start and mm_migrate_pages, which
every migration passes (compaction, mbind, NUMA balancing, demotion, ...):
--reasons shows them all by reason, with the pages that succeeded and failed
(base pages, as /proc/vmstat's pgmigrate_success and pgmigrate_fail count
them), THPs migrated whole, failed or split, and the time. Reason names are
read from the running kernel (enum migrate_reason). Migrations are attributed
to the task that ran them: the faulting thread for NUMA balancing, kcompactd
or the allocating task for compaction. INTERVAL defaults to 1 second; every
view prints the time of each interval, with or without -T.)";

constexpr const char *examples = R"(Examples:
  numamove                  NUMA-balancing migrations per second
  numamove --reasons        every migration by reason, per second
  numamove --reasons -j 10 6
                            by reason, JSON, every 10 seconds for a minute
  numamove --prometheus 127.0.0.1:9849
                            serve the counts and histograms to Prometheus
  numamove -P -p 1234       process 1234's NUMA migrations, per process
  numamove --reasons -P     who migrates what, by reason
  numamove -H               log2 histogram of the time per migration
  numamove --per-call -H    time migrate_misplaced_folio() calls instead
  numamove -m               add NUMA balancing's task moves, swaps, sticks

)";

// MEMLAT_DISABLE_HOOKS in --help: the hook kinds and families of its probes.
constexpr std::array<std::string_view, 3> hook_kinds{
    "never try these hook kinds or families (tp_btf,", "raw_tp, tracepoint, fentry, kprobe,",
    "migrate_pages_start, migrate_pages)"};

} // namespace

namespace memlat::numamove {

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
    probes.back().note_if_none =
        "cannot time migrations on this kernel (no mm_migrate_pages_start, and fentry and "
        "kprobes on migrate_pages() refused): pages and calls are exact, times (TOTAL(ms), "
        "AVG(us), "
        "-H) stay 0.";

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
                       "there)",
             .note = "cannot time migrate_misplaced_folio/_page calls on this kernel (fentry "
                     "and kprobes refused; -v says why): NUMA_migrations counts the "
                     "numa_misplaced migrations of the migrate tracepoints instead."},
        };
        probes.emplace_back(ProbeId::PerCall,
                            "migrate_misplaced_folio/migrate_misplaced_page (per call)", "",
                            std::move(choices));
    }
    if (o_.task_moves) {
        probes.emplace_back(ProbeId::TaskMoves,
                            "sched:sched_move_numa/sched_swap_numa/sched_stick_numa",
                            "They need CONFIG_NUMA_BALANCING.",
                            tracepoint_choices({"move_numa", "swap_numa", "stick_numa"}), false);
        probes.back().note_if_none = "the kernel has no sched_*_numa tracepoints "
                                     "(CONFIG_NUMA_BALANCING off?): task moves stay 0.";
    }
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

void Numamove::check_options() {
    if (o_.pid)
        require_process(*o_.pid, "-p");
    if (o_.per_call && o_.reasons)
        throw UsageError(
            "--per-call times NUMA balancing's calls only; it does not go with --reasons");
    if (o_.task_moves && (o_.reasons || o_.per_process))
        throw UsageError(
            "-m adds columns to the default view; it does not go with --reasons or -P");
    check_prometheus_options(o_.prom, o_.common);
    if (o_.prom.on()) {
        if (o_.reasons || o_.per_process)
            throw UsageError(
                "--prometheus serves every reason's counts: --reasons and -P go with the "
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
    if (const Probe *per_call = find_probe(probes, ProbeId::PerCall))
        per_call_view_ = !per_call->uses_family(per_call_from_tracepoints);

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

} // namespace memlat::numamove

namespace {

// The options that shape what numamove counts: its own, and `memlat exporter`'s
// --numamove.NAME.
void add_counting_options(CommandLine &cli, Options &o) {
    cli.option('p', "pid", "PID", "Only migrations run by tasks of process PID", o.pid);
    cli.flag(0, "per-call",
             "Time calls of migrate_misplaced_folio (migrate_misplaced_page on older "
             "kernels), as the anchors do, with fentry or kprobes; falls back to the "
             "tracepoints where the kernel refuses both",
             o.per_call);
    cli.retired_short('c', "--per-call", "--cpu, the CPUs to watch (tlbflush)");
    add_series_options(cli, o.prom, {"comm"});
}

void add_own_options(CommandLine &cli, Options &o) {
    cli.flag(0, "reasons",
             "A table per interval of every migration by reason (numa_misplaced, "
             "compaction, syscall, mempolicy_mbind, demotion, ...): calls, pages "
             "succeeded and failed, THPs, time",
             o.reasons);
    cli.retired_short('r', "--reasons", "--rows, rows to print, as in BCC's top tools");
    cli.flag('P', "per-process",
             "A table per interval by process (PID, COMM of the task that ran the "
             "migration): NUMA balancing's migrations, or every reason with --reasons",
             o.per_process);
    cli.flag('H', "hist",
             "Log2 histogram of the time per migration (usecs), counted in the kernel: "
             "NUMA balancing's, per reason with --reasons, per call with --per-call",
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
