// oomwhy: every OOM kill explained: which limit fired at which cgroup level, who triggered it
// and what it was allocating, the victim and its memory, the trigger's reclaim up to the kill,
// and what happened after it (the victim's exit, the OOM reaper). Tracepoints only.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <deque>
#include <fmt/format.h>
#include <map>
#include <optional>

#include "base/errors.h"
#include "base/files.h"
#include "base/parsing.h"
#include "cli/multicall.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/run_loop.h"
#include "kernel/cgroups.h"
#include "kernel/features.h"
#include "kernel/gfp.h"
#include "kernel/memory_state.h"
#include "kernel/types.h"
#include "loading/events.h"
#include "loading/loader.h"
#include "oomwhy.h"
#include "oomwhy.skel.h"
#include "oomwhy_format.h"
#include "oomwhy_tool.h"
#include "prometheus/exporter.h"
#include "prometheus/metrics_serving.h"
#include "sources/stall_source.h"
#include "tool/tool.h"

using namespace memlat;
using namespace memlat::oomwhy;
using nlohmann::json;

namespace {

constexpr const char *description =
    R"(Explain every OOM kill, within a second of it. Each report starts with
the line of BCC's and libbpf-tools' oomkill:
  HH:MM:SS Triggered by PID T ("comm"), OOM kill of PID V ("comm"),
  N pages, loadavg: ...
then says why: the memory cgroup whose limit fired and which limit
(memory.max, memory.limit_in_bytes or memory.memsw.limit_in_bytes) with
its usage, or a global OOM. Then the victim (uid, oom_score_adj, cgroup,
total-vm, anon/file/shmem rss, swap and page tables at the kill, as the
kernel's own report counts them); the task that triggered the kill and
its lead-up (its reclaim rounds before the kill and their time, the
order and gfp flags of the allocation, the page allocator's retries);
the usage and limits of the trigger's memory cgroup and every one above
it; and what followed (the victim's exit, the OOM reaper).

N pages is the OOM domain's size, as oomkill's totalpages: the limit that
fired, or the host's memory and swap for a global OOM. oomwhy uses
tracepoints only (oom:mark_victim, the reclaim and retry tracepoints, the
OOM reaper's): no kprobes. It never reads the kernel log.)";

constexpr const char *examples = R"(Examples:
  oomwhy                    report every OOM kill until Ctrl-C
  oomwhy -j                 one JSON object per kill
  oomwhy --oomkill          BCC's oomkill line only
  oomwhy --report-dir /var/log/oomwhy
                            also keep each report in a file of its own
  oomwhy --prometheus 127.0.0.1:9851
                            serve the count of kills by constraint

)";

} // namespace

namespace memlat::oomwhy {

std::vector<Probe> Oomwhy::plan() const {
    std::vector<Probe> probes;
    auto victim =
        tracepoint_choices({"mark_victim"}, "", "the victim's cgroup, tgid and swap are unknown");
    if (!victim_task_args_) {
        victim[0].unavailable =
            "this kernel's oom:mark_victim does not pass the victim's task: " + victim_args_why_;
        victim[1].unavailable = victim[0].unavailable;
    }
    victim[2].note = "oom:mark_victim is read from its fields: the victim's cgroup, process id "
                     "and swap are not reported.";
    probes.emplace_back(ProbeId::Victim, "oom:mark_victim (each OOM kill)",
                        "It needs the oom:mark_victim tracepoint (Linux 4.8+).", std::move(victim));
    auto reclaim = [this](const std::string &name) {
        auto choices = tracepoint_choices({name + "_begin", name + "_end"});
        if (!reclaim_gfp_first_) {
            // Positional arguments in an order not recognized: the classic tracepoint reads
            // order and gfp_flags by name.
            choices[0].unavailable = "reclaim begin's arguments not recognized: " + reclaim_why_;
            choices[1].unavailable = choices[0].unavailable;
        }
        return choices;
    };
    probes.emplace_back(ProbeId::DirectReclaim, "vmscan:mm_vmscan_direct_reclaim_begin/end",
                        "Without it a global OOM's lead-up and constraint are unknown.",
                        reclaim("direct_reclaim"), false);
    probes.back().note_if_none = "the kernel refused the direct reclaim tracepoints: those "
                                 "kills' constraint and lead-up are reported unknown.";
    probes.emplace_back(ProbeId::MemcgReclaim, "vmscan:mm_vmscan_memcg_reclaim_begin/end",
                        "Without it a memory cgroup OOM's lead-up and constraint are unknown "
                        "(CONFIG_MEMCG).",
                        reclaim("memcg_reclaim"), false);
    probes.back().note_if_none = "the kernel refused the memory cgroup reclaim tracepoints: "
                                 "those kills' constraint and lead-up are reported unknown.";
    probes.emplace_back(
        ProbeId::RetryZone, "oom:reclaim_retry_zone", "",
        std::vector<HookChoice>{{.kind = HookKind::Tracepoint, .programs = {"retry_zone_tp"}}},
        false);
    probes.emplace_back(
        ProbeId::CompactRetry, "oom:compact_retry", "",
        std::vector<HookChoice>{{.kind = HookKind::Tracepoint, .programs = {"compact_retry_tp"}}},
        false);
    if (!o_.prom.on())
        probes.emplace_back(
            ProbeId::Reaper,
            "oom:wake_reaper/start_task_reaping/finish_task_reaping/skip_task_reaping", "",
            std::vector<HookChoice>{
                {.kind = HookKind::Tracepoint,
                 .programs = {"wake_reaper_tp", "start_task_reaping_tp", "finish_task_reaping_tp",
                              "skip_task_reaping_tp"}}},
            false);
    probes.push_back(thread_exit_probe());
    return probes;
}

void Oomwhy::configure(oomwhy_bpf &skel) {
    auto *ro = skel.rodata;
    ro->memcg_on_v1 = memcg_on_v1_;
    ro->emit_records = !o_.prom.on();
    ro->page_kb = static_cast<uint32_t>(getpagesize() / 1024);
    ro->reclaim_gfp_first = reclaim_gfp_first_.value_or(false);
    ro->memory_nodes = memory_nodes_;
    const auto &features = kernel_features();
    set_compat(*ro, features);
    size_thread_state_map(skel.maps.starts, skel.maps.starts_overflow, o_.common.max_entries);
    if (!o_.prom.on())
        bpf_map__set_max_entries(skel.maps.events, static_cast<uint32_t>(o_.events.bytes));
    if (o_.prom.on()) {
        bpf_map__set_max_entries(skel.maps.events, 4096);
        bpf_map__set_max_entries(skel.maps.memcg_kills, o_.common.entries(1024));
    }
    use_events_map(skel.maps.events, features);
}

void Oomwhy::check_options() {
    if (o_.oomkill_only && o_.common.json)
        throw UsageError("--oomkill prints BCC's text line; it does not go with -j");
    check_prometheus_options(o_.prom, o_.common);
    check_buffer_size_used(o_.events, !o_.prom.on(), "the reports (without --prometheus)");
    if (o_.prom.on() && (o_.oomkill_only || !o_.report_dir.empty()))
        throw UsageError("--prometheus serves counts only: --oomkill and --report-dir go with "
                         "the reports");
    if (o_.report_dir.empty())
        return;
    // A directory that cannot take reports is said now; the reports still go to stdout.
    struct stat st {};
    std::string why;
    if (stat(o_.report_dir.c_str(), &st) != 0)
        why = std::strerror(errno);
    else if (!S_ISDIR(st.st_mode))
        why = "not a directory";
    else if (access(o_.report_dir.c_str(), W_OK | X_OK) != 0)
        why = std::strerror(errno);
    if (why.empty()) {
        report_dir_ok_ = true;
        return;
    }
    fmt::print(stderr, "{}: cannot write reports to {}: {}. They go to stdout only.\n", tool_name,
               o_.report_dir, why);
}

void Oomwhy::prepare(const Verbosity &v) {
    victim_task_args_ = mark_victim_passes_task(victim_args_why_);
    verbose(v, victim_task_args_
                   ? "oom:mark_victim passes the victim's task: tp_btf and raw_tp read it"
                   : "oom:mark_victim's task not usable (" + victim_args_why_ +
                         "): the classic tracepoint's fields only");
    verbose(v,
            fmt::format("Memory cgroups: {}", memcg_on_v1_ ? "cgroup v1 hierarchy" : "cgroup v2"));
    reclaim_gfp_first_ = reclaim_begin_gfp_first("mm_vmscan_direct_reclaim_begin", reclaim_why_);
    verbose(v, reclaim_begin_order_text(reclaim_gfp_first_, reclaim_why_));
}

void Oomwhy::loaded(const Verbosity &v) {
    if (o_.lead_up_s > 0 && !o_.prom.on())
        load_stall_history(v);
}

int Oomwhy::trace() {
    const auto v = o_.common.verbosity();
    oomwhy_bpf &skel = this->skel();
    std::optional<EventReader> events;
    events.emplace(
        skel.maps.events, [this](const void *data, size_t size) { on_record(data, size); },
        bpf_map__max_entries(skel.maps.events), 4096);
    verbose(v, "events through " + events->describe());
    announce_tracing("Tracing OOM kills...");
    fflush(stdout);
    run_until_stopped(
        o_.common,
        [&](std::chrono::milliseconds timeout) {
            events->poll(std::min(timeout, std::chrono::milliseconds(100)));
            report_due(false);
            if (stall_source_ &&
                std::chrono::steady_clock::now() - stall_taken_ >= std::chrono::seconds(1))
                take_stall_second();
        },
        [] {});
    // A kill after the last read would be counted in `kills` and neither reported nor lost.
    detach_programs();
    events->drain();
    report_due(true);
    const uint64_t lost = events->lost(skel.bss->dropped_events);
    // A perf buffer's losses are records of any kind; a ring buffer's failed reservations are
    // counted by kind in the kernel.
    const bool kills_known = kernel_features().ringbuf; // the events map's kind (configure())
    const uint64_t kills_lost = skel.bss->dropped_kills;
    if (lost != 0)
        fmt::print(stderr, "{}: {} records lost ({} full, --buffer-size): {}.\n", tool_name, lost,
                   events->name(),
                   kills_known ? fmt::format("{} kills were not reported", kills_lost)
                               : std::string("some kills may not have been reported"));
    if (skel.bss->victims_full != 0)
        fmt::print(stderr, "{}: {} victims' exits could not be watched (table full).\n", tool_name,
                   skel.bss->victims_full);
    verbose(v, fmt::format("{} kills seen, {} reported", skel.bss->kills, reports_));
    if (o_.common.json)
        print_json_line(summary_line,
                        {{"kills", skel.bss->kills},
                         {"reports", reports_},
                         {"lost_events", lost},
                         {"kills_not_reported", kills_known ? json(kills_lost) : json(nullptr)},
                         {"victims_not_watched", skel.bss->victims_full},
                         {"report_dir_errors", report_dir_errors_},
                         {"table_full", skel.bss->table_full},
                         {skipped_runs_field, recursion_misses(skel.obj)}});
    return end_run("kills", v, skel.maps.starts, skel.maps.starts_overflow);
}

} // namespace memlat::oomwhy

namespace {

// The options that shape what oomwhy counts: its own, and `memlat exporter`'s --oomwhy.NAME.
void add_counting_options(CommandLine &cli, Options &o) {
    add_series_options(cli, o.prom, {},
                       "the cgroups of memlat_oom_kills_total{constraint=\"memcg\"}");
}

void add_own_options(CommandLine &cli, Options &o) {
    cli.option(0, "report-dir", "DIR",
               "Also write each report to DIR, as oom-TIME-PID.txt and .json (written whole, "
               "then renamed), so that it outlives the container; a directory that cannot "
               "take them is said at start and the reports still go to stdout",
               o.report_dir);
    cli.flag(0, "oomkill", "Print only BCC's oomkill line for each kill", o.oomkill_only);
    cli.option(0, "lead-up", "SECONDS",
               "Keep memstall's stall time of the last SECONDS (default 30, at most 600) and "
               "report, for the OOM domain (the cgroup that fired and those below it, or the "
               "host), its stall time by cause per second before the kill and the most "
               "stalled tasks. 0 leaves memstall's programs out (one runs at every context "
               "switch)",
               [&o](const std::string &text) {
                   o.lead_up_s = parse_number<int>(text, "--lead-up");
                   if (o.lead_up_s < 0 || o.lead_up_s > max_lead_up_s)
                       throw UsageError(fmt::format("--lead-up takes 0 to {} seconds, not {}",
                                                    max_lead_up_s, text));
               });
}

constexpr ToolManual manual{
    .summary = "every OOM kill explained: the limit that fired, the trigger, the lead-up",
    .description = description,
    .examples = examples,
    .periodic = false,
    .timestamp_help = "Accepted for compatibility: every report starts with its time",
    .event_lines = "the kill records (under 1K each)",
};

} // namespace

// memlat oomwhy (and a link named oomwhy), and its part of `memlat exporter`.
extern const ToolEntry memlat_tool_oomwhy =
    tool_entry<Oomwhy, tool_name, manual, add_own_options, add_counting_options>();
