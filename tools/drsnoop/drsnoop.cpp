// drsnoop: threads stalled in memory reclaim (global direct reclaim, memory-cgroup limit
// reclaim, cgroup v1 soft-limit reclaim, node reclaim), how long each stall lasted and how many
// pages it freed.
#include <sys/stat.h>

#include <cerrno>
#include <csignal>

#include <algorithm>
#include <array>
#include <bit>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <utility>

#include "base/files.h"
#include "cli/histogram.h"
#include "cli/multicall.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/run_loop.h"
#include "drsnoop.h"
#include "drsnoop.skel.h"
#include "drsnoop_format.h"
#include "drsnoop_metrics.h"
#include "drsnoop_tool.h"
#include "kernel/cgroups.h"
#include "kernel/features.h"
#include "kernel/gfp.h"
#include "kernel/tasks.h"
#include "kernel/types.h"
#include "kernel/workloads.h"
#include "loading/epoch_table.h"
#include "loading/events.h"
#include "loading/loader.h"
#include "prometheus/exporter.h"
#include "prometheus/metrics_serving.h"
#include "tool/tool.h"

using namespace memlat;
using namespace memlat::drsnoop;
using nlohmann::json;

namespace {

constexpr const char *description =
    R"(Trace threads that stall in memory reclaim: global direct reclaim, reclaim
in a memory cgroup that hit its limit (what containers hit), cgroup v1
soft-limit reclaim and node reclaim. One line per stall, or log2 latency
histograms counted in the kernel (-H); a summary per process at exit, on
stderr so that stdout carries the rows only (with -j: a JSON object).

Columns: BCC's first, in BCC's order: PID (TID with -t), LAT(ms) the stall,
PAGES the pages that reclaim freed (nr_reclaimed), with -e FREE(KB), the free
memory of all zones when the stall began (BCC's -v column). Then memlat's:
KIND direct/memcg/softlimit/node, ORDER the allocation order, with -e TID (PID
with -t), CGROUP (the id of the task's memory cgroup) and GFP flags by name
(bit layout from the kernel's BTF). drsnoop reads FREE from the zones of every node,
reached through the task's memory cgroup, so it needs no kallsyms entry
(unlike BCC's, which needs vm_zone_stat and CONFIG_KALLSYMS_ALL).)";

constexpr const char *examples = R"(Examples:
  drsnoop                   trace every reclaim stall
  drsnoop -p 1234           only process 1234
  drsnoop -k memcg -e       memory-cgroup reclaim, with GFP flags and free memory
  drsnoop -G /sys/fs/cgroup/memory/db
                            only tasks in that cgroup and below
  drsnoop -H -P 5           per-process latency histograms every 5 seconds
  drsnoop -T -U -d 60       with timestamps and UIDs, for a minute
  drsnoop -j                JSON lines
  drsnoop --prometheus 127.0.0.1:9847
                            serve per-kind counts and stall histograms to
                            Prometheus at http://127.0.0.1:9847/metrics

)";

const std::array<const char *, DRSNOOP_KINDS> kind_tracepoints{
    "direct_reclaim", "memcg_reclaim", "memcg_softlimit_reclaim", "node_reclaim"};

int node_count() {
    // "0-1" or "0": the highest possible node id, plus one.
    auto text = read_text_file("/sys/devices/system/node/possible");
    if (!text)
        return 1;
    auto last = text->find_last_of(",-");
    std::string_view tail =
        std::string_view(*text).substr(last == std::string::npos ? 0 : last + 1);
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' '))
        tail.remove_suffix(1);
    try {
        return parse_number<int>(tail, "node count") + 1;
    } catch (const UsageError &) {
        return 1;
    }
}

// One probe per reclaim kind: its DRSNOOP_* value.
enum class ProbeId {};

} // namespace

namespace memlat::drsnoop {

std::vector<Probe> Drsnoop::plan() const {
    std::vector<Probe> probes;
    for (int kind = 0; kind < DRSNOOP_KINDS; ++kind) {
        if (!kinds_[kind])
            continue;
        std::string tp = kind_tracepoints[kind];
        // A kind the user did not ask for by name may be missing from a kernel (soft-limit
        // reclaim exists only with cgroup v1 support); the others are required.
        auto choices = tracepoint_choices({tp + "_begin", tp + "_end"});
        if (kind != DRSNOOP_NODE && !reclaim_gfp_first_) {
            // Positional arguments in an order not recognized: the classic tracepoint reads
            // order and gfp_flags by name.
            choices[0].unavailable = "reclaim begin's arguments not recognized: " + reclaim_why_;
            choices[1].unavailable = choices[0].unavailable;
        }
        probes.emplace_back(ProbeId{kind}, fmt::format("vmscan:mm_vmscan_{}_begin/end", tp),
                            fmt::format("It needs the vmscan:mm_vmscan_{}_begin and _end "
                                        "tracepoints.",
                                        tp),
                            std::move(choices),
                            kinds_explicit_ || kind == DRSNOOP_DIRECT || kind == DRSNOOP_MEMCG);
    }
    probes.push_back(thread_exit_probe());
    return probes;
}

void Drsnoop::configure(drsnoop_bpf &skel) {
    // The GFP names are read from the BTF once the object is open: the inflated object is not
    // held beside libbpf's BTF index.
    if (!gfp_)
        gfp_ = GfpNames::from_kernel();
    auto *ro = skel.rodata;
    ro->filter_pid = o_.pid.value_or(0);
    ro->filter_tid = o_.tid.value_or(0);
    ro->read_uid = o_.show_uid || o_.common.json;
    ro->read_cgroup = o_.extended || o_.common.json; // the outputs with a cgroup column
    ro->filter_uid_on = o_.uid.has_value();
    ro->filter_uid = o_.uid.value_or(0);
    std::copy_n(o_.comm.begin(), std::min<size_t>(o_.comm.size(), DRSNOOP_COMM_LEN - 1),
                const_cast<char *>(ro->filter_comm));
    set_cgroup_filter(*ro, cgroup_);
    ro->memcg_on_v1 = memcg_on_v1_;
    ro->reclaim_gfp_first = reclaim_gfp_first_.value_or(false);
    ro->extended = o_.extended;
    ro->trace_events = !o_.hist;
    ro->hist_mode = o_.hist;
    ro->hist_per_process = o_.hist && o_.per_process;
    ro->nr_nodes = std::min(node_count(), DRSNOOP_MAX_NODES);
    ro->count_cgroups = o_.prom.label("cgroup");
    bpf_map__set_max_entries(skel.maps.cgroup_totals,
                             o_.prom.label("cgroup") ? o_.common.entries(16384) : 1);
    // The per-process summary: the text modes' summary at exit, and --prometheus-labels comm.
    // Without them nothing reads or empties it: a long run would fill it with exited
    // processes and count every later stall as not counted (a soak under process churn
    // reached 2 million).
    const bool count_processes = !o_.prom.on() || o_.prom.label("comm");
    ro->count_processes = count_processes;
    bpf_map__set_max_entries(skel.maps.summaries, count_processes ? o_.common.entries(8192) : 1);
    bpf_map__set_max_entries(skel.maps.proc_hists,
                             o_.hist && o_.per_process ? o_.common.entries(8192) : 1);
    configure_events(skel, !o_.hist);
    set_compat(*ro, kernel_features());
    size_thread_state_map(skel.maps.starts, skel.maps.starts_overflow, o_.common.max_entries);
}

void Drsnoop::check_options() {
    if (o_.pid)
        require_process(*o_.pid, "-p");
    if (o_.tid)
        require_thread(*o_.tid, "-t", o_.pid);
    if (o_.comm.size() >= DRSNOOP_COMM_LEN)
        throw UsageError(fmt::format("-n '{}' is longer than a task name ({} characters)", o_.comm,
                                     DRSNOOP_COMM_LEN - 1));
    if (!o_.kinds.empty()) {
        kinds_.fill(false);
        kinds_explicit_ = true;
        const uint32_t mask =
            parse_kind_list(o_.kinds, DRSNOOP_KINDS, drsnoop::kind_name, "reclaim kind");
        for (uint32_t kind = 0; kind < DRSNOOP_KINDS; ++kind)
            kinds_[kind] = (mask >> kind) & 1;
    }
    if (!o_.cgroup.empty())
        cgroup_ = resolve_cgroup_target(o_.cgroup);
    if (o_.per_process && !o_.hist)
        throw UsageError("-P goes with -H (per-process histograms)");
    check_prometheus_options(o_.prom, o_.common);
    if (o_.prom.on() && o_.per_process)
        throw UsageError("--prometheus serves histograms per kind; -P goes with the text output "
                         "(per-task counts: --prometheus-labels comm)");
    // Metrics come from the in-kernel histograms and totals: no event per stall.
    if (o_.prom.on())
        o_.hist = true;
    // -U and -e add columns to the per-stall lines, which -H and --prometheus do not print.
    if (o_.hist && (o_.show_uid || o_.extended))
        throw UsageError(o_.prom.on() ? "--prometheus serves counts and histograms: -U and -e go "
                                        "with the per-stall output"
                                      : "-H counts in the kernel and prints no stalls: -U and -e "
                                        "go with the per-stall output");
    check_lines_or_histograms(o_.hist, "stall");
}

void Drsnoop::prepare(const Verbosity &v) {
    reclaim_gfp_first_ = reclaim_begin_gfp_first("mm_vmscan_direct_reclaim_begin", reclaim_why_);
    verbose(v, reclaim_begin_order_text(reclaim_gfp_first_, reclaim_why_));
    verbose(v,
            fmt::format("CGROUP is the task's {}",
                        memcg_on_v1_ ? "memory cgroup (cgroup v1 hierarchy)" : "cgroup v2 cgroup"));
}

void Drsnoop::loaded(const Verbosity &v) {
    verbose(v, fmt::format("GFP flag names from {}", gfp_->source()));
    if (!o_.prom.on())
        return;
    metrics_.emplace(o_.prom, cgroup_ ? cgroup_->path : "", getpagesize());
    for (uint32_t kind = 0; kind < DRSNOOP_KINDS; ++kind)
        if (const Probe *p = find_probe(probes_, ProbeId{static_cast<int>(kind)}))
            counts_.kinds[kind] = p->choice() != nullptr;
}

int Drsnoop::trace() {
    const auto v = o_.common.verbosity();
    drsnoop_bpf *skel = &this->skel();
    std::optional<EventReader> events;
    if (!o_.hist)
        read_events<drsnoop_event>(
            events, o_.events, [this](const auto &e) { print_event(e); }, v);
    print_header();
    announce_tracing(o_.hist ? "Tracing reclaim stalls (histograms)..."
                             : "Tracing reclaim stalls...");
    fflush(stdout);

    return trace_lines_or_histograms(
        events, [&] { print_histograms(*skel); },
        [&](const EventReader *reader) { print_summary(*skel, reader); }, "stalls", v,
        skel->maps.starts, skel->maps.starts_overflow);
}

} // namespace memlat::drsnoop

namespace {

// The options that shape what drsnoop counts: its own, and `memlat exporter`'s --drsnoop.NAME.
void add_counting_options(CommandLine &cli, Options &o) {
    cli.option('p', "pid", "PID", "Only threads of process PID", o.pid);
    cli.option('t', "tid", "TID", "Only thread TID", o.tid);
    cli.option('u', "uid", "UID", "Only tasks of user id UID", o.uid);
    cli.option('n', "name", "NAME", "Only tasks whose name contains NAME", o.comm);
    cli.option('k', "kind", "LIST",
               "Only these kinds of reclaim: direct, memcg, softlimit, node (default: all "
               "the kernel has)",
               o.kinds);
    add_cgroup_option(cli, o.cgroup);
    add_series_options(cli, o.prom, {"comm", "cgroup"});
}

void add_own_options(CommandLine &cli, Options &o) {
    cli.flag('U', "print-uid", "Add a UID column", o.show_uid);
    cli.flag('e', "extended",
             "Add FREE(KB) (free memory when the stall began; BCC's -v column), TID, "
             "CGROUP and GFP (flags by name)",
             o.extended);
    cli.flag('H', "hist",
             "Log2 histograms of stall time per kind instead of one line per stall, "
             "counted in the kernel; printed every INTERVAL or at the end",
             o.hist);
    cli.flag('P', "per-process", "With -H: one histogram per process and kind", o.per_process);
}

constexpr ToolManual manual{
    .summary = "threads stalled in direct, memory-cgroup and node reclaim: per stall or histograms",
    .description = description,
    .examples = examples,
    .timestamp_help = "Add a TIME(s) column: seconds since the first stall began, as BCC's "
                      "drsnoop; with -j a wall_time field",
    .event_lines = "the per-stall lines",
};

} // namespace

// memlat drsnoop (and a link named drsnoop), and its part of `memlat exporter`.
extern const ToolEntry memlat_tool_drsnoop =
    tool_entry<Drsnoop, tool_name, manual, add_own_options, add_counting_options>();
