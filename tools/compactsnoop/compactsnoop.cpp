// compactsnoop: every memory-compaction run (the kernel moving pages to make free blocks for
// a high-order allocation), by node, zone, order, mode and kind (direct, kcompactd, proactive,
// manual), how long it took and how it ended.
#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "cli/histogram.h"
#include "cli/multicall.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/profile_output.h"
#include "cli/run_loop.h"
#include "compactsnoop.h"
#include "compactsnoop.skel.h"
#include "compactsnoop_format.h"
#include "compactsnoop_metrics.h"
#include "compactsnoop_tool.h"
#include "kernel/features.h"
#include "kernel/gfp.h"
#include "kernel/tasks.h"
#include "kernel/types.h"
#include "loading/events.h"
#include "loading/loader.h"
#include "loading/stack_profile.h"
#include "loading/stacks.h"
#include "loading/symbols.h"
#include "prometheus/exporter.h"
#include "prometheus/metrics_serving.h"
#include "tool/tool.h"

using namespace memlat;
using namespace memlat::compactsnoop;
using nlohmann::json;

namespace {

constexpr const char *description =
    R"(Trace memory compaction: every run of the kernel's compact_zone(), which
moves pages to make free blocks for high-order allocations (THP faults, slab,
network buffers). One line per run, or log2 latency histograms counted in the
kernel (-H); a summary by kind and status at exit, on stderr so that stdout
carries the rows only (with -j: a JSON object).

Columns (BCC's first, in BCC's order; memlat's KIND, and with -e MIGRATED
FAILED, after STATUS): NODE and ZONE of the run (zone names from the kernel's BTF, enum
zone_type), ORDER the allocation order (-1: the whole zone), MODE the migrate
mode (async, sync_light, sync), KIND who compacts: direct (an allocation
stalls), kcompactd (the node's daemon, woken by kswapd), proactive (kcompactd
on vm.compaction_proactiveness), manual (a write to
/proc/sys/vm/compact_memory or /sys/devices/system/node/nodeN/compact, in the
writer's context); LAT(ms) the run; STATUS how it ended (enum compact_result
from BTF: success, complete, partial_skipped, contended, ...).
With -e: FRAGIDX, the kernel's fragmentation index for ORDER when the run
began (0 = failing for lack of memory, 1 = failing from fragmentation, -1 = a
free block of ORDER existed), MIN LOW HIGH the zone's watermarks and FREE its
free pages (in pages, as /proc/zoneinfo), MIGRATED and FAILED the pages the
run migrated and failed to migrate. -T adds TIME(s), the seconds since the
first run began (with -j: a wall-clock wall_time).
Unlike BCC's compactsnoop, runs are paired from mm_compaction_begin, so
manual and proactive compaction (which emit no mm_compaction_suitable) show.)";

constexpr const char *examples = R"(Examples:
  compactsnoop              trace every compaction run
  compactsnoop -k direct -e
                            direct-compaction stalls, with zone state
  compactsnoop -p 1234 -K   runs in process 1234, with kernel stacks
  compactsnoop -H -O 5      latency histograms per kind and order, every 5 s
  compactsnoop -T -d 60     with times, for a minute
  compactsnoop -j           JSON lines
  compactsnoop --prometheus 127.0.0.1:9848
                            serve counts and stall histograms to Prometheus

)";

// An enum of the running kernel by value, or empty (numbers are printed) when BTF lacks it.
std::map<int64_t, std::string> enum_names(const char *name, const char *prefix,
                                          std::vector<std::string> &missing) {
    try {
        return kernel_enum_names(name, prefix);
    } catch (const RuntimeError &) {
        missing.push_back(name);
        return {};
    }
}

// The probes plan() makes, looked up by these and not by their labels.
enum class ProbeId { Runs, MigratePages, TryToCompact, Deferred, KcompactdWake };

} // namespace

namespace memlat::compactsnoop {

std::vector<Probe> Compactsnoop::plan() const {
    std::vector<Probe> probes;
    const std::string no_cc = compaction_control_missing();
    probes.emplace_back(
        ProbeId::Runs, "compaction:mm_compaction_begin/end",
        "It needs the compaction:mm_compaction_begin and _end tracepoints "
        "(CONFIG_COMPACTION).",
        std::vector<HookChoice>{
            {.kind = HookKind::TpBtf, .programs = {"begin_btf", "end_btf"}, .unavailable = no_cc},
            {.kind = HookKind::RawTp, .programs = {"begin_raw", "end_raw"}, .unavailable = no_cc},
            {.kind = HookKind::Tracepoint,
             .programs = {"begin_tp", "end_tp", "finished_tp"},
             .caveat = "the classic tracepoints carry no struct compact_control: NODE, ZONE and "
                       "ORDER come from mm_compaction_finished, KIND is inferred from the task "
                       "(a kcompactd thread or not) and the order, MODE is only sync/async, and "
                       "-e shows no FRAGIDX, watermarks or free pages, nor GFP and whole_zone in "
                       "JSON",
             .note = o_.extended ? "only classic tracepoints are available here: -e shows no "
                                   "zone state (FRAGIDX MIN LOW HIGH FREE print as -)"
                                 : ""},
        });
    const std::string raw_6_0 =
        "the raw arguments are read as Linux 6.0+ has them (pages tried, pages migrated)";
    probes.emplace_back(
        ProbeId::MigratePages, "compaction:mm_compaction_migratepages", "",
        std::vector<HookChoice>{
            {.kind = HookKind::Tracepoint, .programs = {"migratepages_tp"}},
            {.kind = HookKind::TpBtf, .programs = {"migratepages_btf"}, .caveat = raw_6_0},
            {.kind = HookKind::RawTp, .programs = {"migratepages_raw"}, .caveat = raw_6_0},
        },
        false);
    auto context = [&](ProbeId id, const char *tp, const char *prog, const char *what) {
        probes.emplace_back(id, fmt::format("compaction:{}", tp), what, tracepoint_choices({prog}),
                            false);
    };
    context(ProbeId::TryToCompact, "mm_compaction_try_to_compact_pages", "try_to_compact",
            "Without it direct runs show no priority and the summary no direct entries.");
    context(ProbeId::Deferred, "mm_compaction_deferred", "deferred",
            "Without it the summary does not count deferred zones.");
    context(ProbeId::KcompactdWake, "mm_compaction_kcompactd_wake", "kcompactd_wake",
            "Without it the summary does not count kcompactd wake-ups.");
    probes.push_back(thread_exit_probe());
    return probes;
}

void Compactsnoop::configure(compactsnoop_bpf &skel) {
    auto *ro = skel.rodata;
    ro->filter_pid = o_.pid.value_or(0);
    ro->kind_mask = kind_mask_;
    ro->extended = o_.extended;
    ro->collect_stacks = o_.stacks;
    ro->trace_events = !o_.hist;
    ro->hist_mode = o_.hist;
    bpf_map__set_max_entries(skel.maps.stacks, o_.stacks ? o_.common.entries(4096) : 1);
    configure_events(skel, !o_.hist);
    set_compat(*ro, kernel_features());
    size_thread_state_map(skel.maps.tasks, skel.maps.tasks_overflow, o_.common.max_entries);
}

void Compactsnoop::check_options() {
    if (o_.profile.wanted()) {
        if (o_.hist)
            throw UsageError("the profiles are made of the runs' events: --folded, "
                             "--folded-file and --pprof go with the per-run output, not -H");
        o_.stacks = true; // the profile is the runs' kernel stacks
    }
    profile_out_.open(o_.profile, o_.common);
    if (o_.pid)
        require_process(*o_.pid, "-p");
    if (!o_.kinds.empty()) {
        kind_mask_ = parse_kind_list(o_.kinds, COMPACTSNOOP_KINDS, compactsnoop::kind_name,
                                     "compaction kind");
    }
    check_prometheus_options(o_.prom, o_.common);
    if (o_.prom.on()) {
        if (o_.extended || o_.stacks || o_.per_order)
            throw UsageError("--prometheus serves counters and histograms per kind: -e, -K, "
                             "-O and the profiles go with the text output");
        o_.hist = true; // counted in the kernel, no event per run
    }
    if (o_.per_order && !o_.hist)
        throw UsageError("-O goes with -H (histograms per order)");
    check_max_entries_used(o_.common, o_.stacks, "-K (its stacks)");
    if (o_.hist && (o_.stacks || o_.extended))
        throw UsageError("-H counts in the kernel and prints no events: -e and -K go with the "
                         "per-event output");
    check_lines_or_histograms(o_.hist, "run");
}

void Compactsnoop::prepare(const Verbosity &v) {
    names_.zones = enum_names("zone_type", "ZONE_", missing_enums_);
    names_.statuses = enum_names("compact_result", "COMPACT_", missing_enums_);
    names_.modes = enum_names("migrate_mode", "MIGRATE_", missing_enums_);
    names_.prios = enum_names("compact_priority", "COMPACT_PRIO_", missing_enums_);
    for (const auto &name : missing_enums_)
        verbose(v,
                fmt::format("the kernel's BTF has no enum {}: its values print as numbers", name));
    verbose(v, "zone, status, mode and priority names from the running kernel's BTF");
    verbose(v, fmt::format("GFP flag names from {}", gfp_.source()));
    if (o_.stacks) {
        ksyms_ = KernelSymbols::for_stacks();
        if (ksyms_->addresses_hidden() && !ksyms_->describes_by_kernel())
            fmt::print(stderr,
                       "{}: missing CAP_SYSLOG: /proc/kallsyms shows kernel addresses "
                       "only with it, so -K prints the stacks as addresses\n",
                       tool_name);
    }
}

void Compactsnoop::loaded(const Verbosity &) {
    for (uint32_t k = 0; k < COMPACTSNOOP_KINDS; ++k)
        counts_.kinds[k] = (kind_mask_ >> k) & 1;
}

int Compactsnoop::trace() {
    const auto v = o_.common.verbosity();
    compactsnoop_bpf *skel = &this->skel();
    std::optional<EventReader> events;
    if (!o_.hist)
        read_events<compactsnoop_event>(
            events, o_.events, [&](const auto &e) { print_event(*skel, e); }, v);
    if (!o_.common.json && !o_.hist && !profile_out_.replaces_output())
        fmt::print("{}\n", compactsnoop::header(format_));
    started_ = std::chrono::system_clock::now();
    announce_tracing(o_.hist ? "Tracing memory compaction (histograms)..."
                             : "Tracing memory compaction...");
    fflush(stdout);

    const int status = trace_lines_or_histograms(
        events, [&] { print_histograms(*skel); },
        [&](const EventReader *reader) { print_summary(*skel, reader); }, "runs", v,
        skel->maps.tasks, skel->maps.tasks_overflow);
    if (profile_out_.wanted())
        write_profile(*skel);
    if (o_.stacks)
        note_stacks_lost(tool_name, skel->bss->stacks_lost,
                         bpf_map__max_entries(skel->maps.stacks));
    return status;
}

} // namespace memlat::compactsnoop

namespace {

// The options that shape what compactsnoop counts: its own, and `memlat exporter`'s
// --compactsnoop.NAME.
void add_counting_options(CommandLine &cli, Options &o) {
    cli.option('p', "pid", "PID",
               "Only runs in process PID (its direct compaction, or its "
               "writes to compact_memory)",
               o.pid);
    cli.option('k', "kind", "LIST",
               "Only these kinds of compaction: direct, kcompactd, proactive, manual "
               "(default: all)",
               o.kinds);
    add_series_options(cli, o.prom, {});
}

void add_own_options(CommandLine &cli, Options &o) {
    cli.flag('e', "extended",
             "Add FRAGIDX (fragmentation index for ORDER), MIN LOW HIGH (watermarks), FREE "
             "(free pages) of the zone when the run began, and MIGRATED FAILED pages",
             o.extended);
    cli.alias("extended_fields"); // BCC's name for -e
    cli.flag('K', "kernel-stack", "Print the kernel stack (symbolized) that began each run",
             o.stacks);
    add_profile_options(cli, o.profile, 0, "the runs' kernel stacks (as -K)",
                        "their compaction time in ns; the kind is the root frame, then the "
                        "process",
                        "runs and compaction_time in ns, labels kind, pid, comm");
    cli.flag('H', "hist",
             "Log2 histograms of run time per kind instead of one line per run, counted "
             "in the kernel; printed every INTERVAL or at the end",
             o.hist);
    cli.flag('O', "per-order", "With -H: one histogram per kind and order", o.per_order);
}

constexpr ToolManual manual{
    .summary = "memory compaction runs, their time, result and pages moved",
    .description = description,
    .examples = examples,
    .timestamp_help =
        "Add a TIME(s) column: seconds since the first run began; with -j a wall_time field",
    .event_lines = "the per-run lines",
};

} // namespace

// memlat compactsnoop (and a link named compactsnoop), and its part of `memlat exporter`.
extern const ToolEntry memlat_tool_compactsnoop =
    tool_entry<Compactsnoop, tool_name, manual, add_own_options, add_counting_options>();
