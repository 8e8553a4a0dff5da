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
#include "prometheus/exporter.h"
#include "prometheus/metrics_serving.h"
#include "sources/stall_source.h"
#include "tool/tool.h"

using namespace memlat;
using nlohmann::json;

namespace {

constexpr char tool_name[] = "oomwhy";

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

// How long a report waits for the victim to exit before it is printed without it.
constexpr auto report_wait = std::chrono::milliseconds(1000);
// Victims remembered after their report, for the reaper's later steps (2 s after a kill).
constexpr size_t reported_victims_kept = 1024;

// The longest lead-up kept (--lead-up), a bound on the history's memory.
constexpr int max_lead_up_s = 600;

struct Options {
    CommonOptions common;
    // The records' ring buffer: a kill record is under 1 KiB, so 256 KiB holds a storm's burst.
    EventBufferSize events{256 << 10, 4096};
    std::string report_dir;
    int lead_up_s = 30;
    bool oomkill_only = false;
    PrometheusOptions prom;
};

enum class ProbeId { Victim, DirectReclaim, MemcgReclaim, RetryZone, CompactRetry, Reaper };

// A kill waiting for its victim's exit (or its second) before it is reported.
struct Pending {
    oomwhy_kill kill;
    oomwhy::Aftermath after;
    std::optional<oomwhy::LeadUpStalls> stalls;
    std::chrono::steady_clock::time_point due;
    std::string time;
    std::string loadavg;
};

class Oomwhy final : public Tool<oomwhy_bpf, Options, tool_name> {
  public:
    using Tool::Tool;
    void check_options() override;
    CountedLosses collect(prometheus::Exposition &out) override;

  private:
    int trace() override;
    void prepare(const Verbosity &v) override;
    std::vector<Probe> plan() const override;
    void configure(oomwhy_bpf &skel) override;
    void loaded(const Verbosity &v) override;
    void on_record(const void *data, size_t size);
    void on_note(const oomwhy_note &n);
    // Reports the kills whose victim exited or whose second is over (all with `all`).
    void report_due(bool all);
    void report(const Pending &p);
    void keep_report(const Pending &p, const std::string &text, const json &object);
    std::string cgroup_path(uint64_t id);
    // --lead-up: memstall's table read into the history, once a second and at each kill.
    void load_stall_history(const Verbosity &v);
    void take_stall_second();
    oomwhy::LeadUpStalls stalls_before(const oomwhy_kill &k);

    bool memcg_on_v1_ = memory_controller_on_v1();
    // --prometheus: the memcg kills by cgroup, at most --max-series of them.
    prometheus::BoundedCounters memcg_kills_{1, o_.prom.max_series, {"cgroup"}};
    bool victim_task_args_ = false; // mark_victim passes the task (tp_btf/raw_tp usable)
    std::string victim_args_why_;
    std::optional<bool> reclaim_gfp_first_; // the reclaim begin's argument order, when known
    std::string reclaim_why_;
    uint64_t memory_nodes_ = memory_node_mask(); // of the first 64
    GfpNames gfp_ = GfpNames::from_kernel();
    std::map<uint32_t, Pending> pending_; // by victim thread id
    // Victims reported (thread id, kill time), oldest first, for the reaper's later steps.
    std::deque<std::pair<uint32_t, uint64_t>> reported_;
    std::map<uint64_t, std::string> paths_;
    std::chrono::steady_clock::time_point paths_read_{};
    std::unique_ptr<memstall::StallSource> stall_source_;
    memstall::Snapshot stall_before_;
    std::deque<oomwhy::StallSecond> stall_history_;
    std::chrono::steady_clock::time_point stall_taken_{};
    bool report_dir_ok_ = false;
    uint64_t reports_ = 0, report_dir_errors_ = 0;
};

std::vector<Probe> Oomwhy::plan() const {
    std::vector<Probe> probes;
    auto victim =
        tracepoint_choices({"mark_victim"}, "", "the victim's cgroup, tgid and swap are unknown");
    if (!victim_task_args_) {
        victim[0].unavailable =
            "this kernel's oom:mark_victim does not pass the victim's task: " + victim_args_why_;
        victim[1].unavailable = victim[0].unavailable;
    }
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
    probes.emplace_back(ProbeId::MemcgReclaim, "vmscan:mm_vmscan_memcg_reclaim_begin/end",
                        "Without it a memory cgroup OOM's lead-up and constraint are unknown "
                        "(CONFIG_MEMCG).",
                        reclaim("memcg_reclaim"), false);
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
    if (auto prototype = tracepoint_prototype("mark_victim", victim_args_why_)) {
        // void *__data, then the task on 5.10.y and 6.1+ (pid only before).
        victim_task_args_ =
            prototype->size() >= 2 && (*prototype)[1].kind == TracepointParameter::Kind::Pointer;
        if (!victim_task_args_)
            victim_args_why_ = "its first argument is the pid";
    }
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
    const auto &probes = probes_;
    const Probe *direct = find_probe(probes, ProbeId::DirectReclaim);
    const Probe *memcg = find_probe(probes, ProbeId::MemcgReclaim);
    if (!direct->choice() || !memcg->choice())
        fmt::print(stderr,
                   "{}: the kernel refused the {} reclaim tracepoints (-v says why): those "
                   "kills' constraint and lead-up are reported unknown.\n",
                   tool_name, !direct->choice() ? "direct" : "memory cgroup");
    if (o_.lead_up_s > 0 && !o_.prom.on())
        load_stall_history(v);
    if (const Probe *victim = find_probe(probes, ProbeId::Victim);
        victim->choice() && victim->choice()->kind == HookKind::Tracepoint)
        fmt::print(stderr,
                   "{}: oom:mark_victim is read from its fields: the victim's cgroup, process "
                   "id and swap are not reported.\n",
                   tool_name);
}

std::string Oomwhy::cgroup_path(uint64_t id) {
    auto it = paths_.find(id);
    if (it != paths_.end())
        return it->second;
    // A cgroup made since the last read: read the hierarchy again, at most once a second.
    auto now = std::chrono::steady_clock::now();
    if (now - paths_read_ < std::chrono::seconds(1))
        return "";
    paths_read_ = now;
    for (auto &[cg, path] : cgroup_paths(memcg_on_v1_))
        paths_[cg] = path;
    it = paths_.find(id);
    return it == paths_.end() ? "" : it->second;
}

void Oomwhy::load_stall_history(const Verbosity &v) {
    try {
        stall_source_ = memstall::load_stall_source(o_.common, false);
    } catch (const RuntimeError &e) {
        fmt::print(stderr,
                   "{}: the lead-up's stall history is left out: memstall cannot run here: {}\n",
                   tool_name, e.what());
        return;
    }
    stall_before_ = stall_source_->take_snapshot();
    stall_taken_ = std::chrono::steady_clock::now();
    verbose(v, fmt::format("lead-up: memstall's stall time of the last {} s kept, a second at "
                           "a time",
                           o_.lead_up_s));
}

void Oomwhy::take_stall_second() {
    // The time before the read: a stall that ends during the read may be in it too.
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    memstall::Snapshot now = stall_source_->take_snapshot();
    oomwhy::StallSecond second;
    second.end_ns = static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
    second.threads = oomwhy::stalled_between(now, stall_before_);
    stall_before_ = std::move(now);
    stall_taken_ = std::chrono::steady_clock::now();
    stall_history_.push_back(std::move(second));
    // One more than the lead-up: the second in progress at a kill is partial.
    while (stall_history_.size() > static_cast<size_t>(o_.lead_up_s) + 1)
        stall_history_.pop_front();
}

oomwhy::LeadUpStalls Oomwhy::stalls_before(const oomwhy_kill &k) {
    // The stalls up to the kill's record, whatever second it fell in.
    take_stall_second();
    std::string domain;
    uint64_t domain_id = 0;
    if (oomwhy::constraint_of(k) == oomwhy::Constraint::Memcg) {
        const oomwhy::LimitHit hit = oomwhy::limit_that_fired(k);
        if (hit.level >= 0) {
            domain_id = k.level[hit.level].cgroup_id;
            domain = cgroup_path(domain_id);
        }
    }
    if (domain_id != 0 && domain.empty()) {
        // Its directory is gone already: that cgroup alone, without the ones below it.
        return oomwhy::lead_up_stalls(stall_history_, k.ts_ns,
                                      fmt::format("cgroup id {}", domain_id),
                                      [&](uint64_t id) { return id == domain_id; });
    }
    auto in_domain = [&](uint64_t cgroup_id) {
        if (domain.empty())
            return true;
        const std::string path = cgroup_path(cgroup_id);
        return path == domain || path.starts_with(domain + "/");
    };
    return oomwhy::lead_up_stalls(stall_history_, k.ts_ns, domain, in_domain);
}

void Oomwhy::on_record(const void *data, size_t size) {
    uint32_t type = 0;
    if (size < sizeof(type))
        return;
    std::memcpy(&type, data, sizeof(type));
    if (type == OOMWHY_KILL && size >= sizeof(oomwhy_kill)) {
        Pending p;
        std::memcpy(&p.kill, data, sizeof(p.kill));
        p.due = std::chrono::steady_clock::now() + report_wait;
        p.time = wall_clock_time();
        p.loadavg = read_loadavg();
        // Resolved now, while the victim's cgroup still exists.
        cgroup_path(p.kill.victim_cgroup_id);
        if (stall_source_)
            p.stalls = stalls_before(p.kill);
        pending_[p.kill.victim_pid] = std::move(p);
    } else if ((type == OOMWHY_VICTIM_EXIT || type == OOMWHY_REAPER) &&
               size >= sizeof(oomwhy_note)) {
        oomwhy_note n;
        std::memcpy(&n, data, sizeof(n));
        on_note(n);
    }
}

void Oomwhy::on_note(const oomwhy_note &n) {
    auto it = pending_.find(n.pid);
    if (it != pending_.end()) {
        oomwhy::Aftermath &a = it->second.after;
        if (n.type == OOMWHY_VICTIM_EXIT)
            a.exit_ns = n.ts_ns;
        else if (n.step == OOMWHY_REAPER_WAKE)
            a.reaper_wake_ns = n.ts_ns;
        else if (n.step == OOMWHY_REAPER_START)
            a.reap_start_ns = n.ts_ns;
        else if (n.step == OOMWHY_REAPER_FINISH)
            a.reap_finish_ns = n.ts_ns;
        else if (n.step == OOMWHY_REAPER_SKIP)
            a.reap_skipped = true;
        if (n.type == OOMWHY_VICTIM_EXIT)
            it->second.due = std::chrono::steady_clock::now(); // complete: report it now
        return;
    }
    // The reaper's later steps for a victim already reported (it runs 2 s after a kill).
    auto done = std::find_if(reported_.rbegin(), reported_.rend(),
                             [&](const auto &victim) { return victim.first == n.pid; });
    if (n.type != OOMWHY_REAPER || done == reported_.rend())
        return;
    static constexpr const char *steps[] = {"woke for", "started reaping", "finished reaping",
                                            "skipped"};
    const double after_s = n.ts_ns >= done->second ? (n.ts_ns - done->second) / 1e9 : 0;
    if (o_.common.json)
        print_json_line({{"type", "reaper"},
                         {"time", wall_clock_time()},
                         {"pid", n.pid},
                         {"step", std::string(steps[n.step & 3])},
                         {"since_kill_ns", n.ts_ns >= done->second ? n.ts_ns - done->second : 0}});
    else if (!o_.oomkill_only)
        fmt::print("{} the OOM reaper {} PID {}, {:.3f} s after its kill\n", wall_clock_time(),
                   steps[n.step & 3], n.pid, after_s);
    flush_output();
}

void Oomwhy::keep_report(const Pending &p, const std::string &text, const json &object) {
    if (!report_dir_ok_)
        return;
    const std::string base =
        fmt::format("{}/oom-{}-{}", o_.report_dir, std::time(nullptr), p.kill.victim_pid);
    auto write = [&](const std::string &path, const std::string &content) {
        const std::string temporary = path + ".tmp";
        std::string why = write_whole_file(temporary, content).value_or("");
        if (why.empty() && rename(temporary.c_str(), path.c_str()) != 0)
            why = std::strerror(errno);
        if (why.empty())
            return;
        unlink(temporary.c_str());
        ++report_dir_errors_;
        fmt::print(stderr, "{}: could not keep the report in {}: {}. It went to stdout only.\n",
                   tool_name, path, why);
    };
    write(base + ".txt", text);
    write(base + ".json", json_text(object) + "\n");
}

void Oomwhy::report(const Pending &p) {
    oomwhy::Report r{.kill = p.kill,
                     .after = p.after,
                     .cgroup_path = [this](uint64_t id) { return cgroup_path(id); },
                     .time = p.time,
                     .loadavg = p.loadavg,
                     .page_kb = static_cast<uint64_t>(getpagesize()) / 1024,
                     .global_pages = oom_domain_memory_pages(0),
                     .constrained_pages = p.kill.node_constraint != OOMWHY_NODES_ANY
                                              ? oom_domain_memory_pages(p.kill.allowed_nodes)
                                              : 0,
                     .stalls = p.stalls ? &*p.stalls : nullptr};
    const std::string text = oomwhy::report_text(r, gfp_);
    json object = oomwhy::report_json(r, gfp_);
    add_wall_stamp(object); // the same in stdout's line and in --report-dir's file
    if (o_.common.json)
        print_json_line(object);
    else if (o_.oomkill_only)
        fmt::print("{}\n", oomwhy::oomkill_line(r));
    else
        fmt::print("{}\n", text);
    // Each report written now: a reader waits for it, and a write error ends the run.
    flush_output();
    keep_report(p, text, object);
    ++reports_;
    if (reported_.size() >= reported_victims_kept)
        reported_.pop_front();
    reported_.emplace_back(p.kill.victim_pid, p.kill.ts_ns);
}

void Oomwhy::report_due(bool all) {
    const auto now = std::chrono::steady_clock::now();
    std::vector<uint32_t> due;
    for (const auto &[pid, p] : pending_)
        if (all || p.due <= now)
            due.push_back(pid);
    // In the order of the kills.
    std::sort(due.begin(), due.end(), [&](uint32_t a, uint32_t b) {
        return pending_.at(a).kill.ts_ns < pending_.at(b).kill.ts_ns;
    });
    for (uint32_t pid : due) {
        report(pending_.at(pid));
        pending_.erase(pid);
    }
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
        print_json_line({{"type", "summary"},
                         {"kills", skel.bss->kills},
                         {"reports", reports_},
                         {"lost_events", lost},
                         {"kills_not_reported", kills_known ? json(kills_lost) : json(nullptr)},
                         {"victims_not_watched", skel.bss->victims_full},
                         {"report_dir_errors", report_dir_errors_},
                         {"table_full", skel.bss->table_full},
                         {skipped_runs_field, recursion_misses(skel.obj)}});
    return end_run("kills", v, skel.maps.starts, skel.maps.starts_overflow);
}

CountedLosses Oomwhy::collect(prometheus::Exposition &out) {
    const oomwhy_bpf &skel = this->skel();
    // The memcg kills by the cgroup whose limit fired. A cgroup removed before any scrape saw
    // it cannot be named any more ("removed"); 0 is a kill where no level had a limit.
    const std::string memcg = oomwhy::constraint_name(oomwhy::Constraint::Memcg);
    bool reread = false;
    memcg_kills_.begin();
    for (const auto &[id, n] : read_hash_map<uint64_t, uint64_t>(skel.maps.memcg_kills)) {
        std::string path = id == 0 ? "none" : cgroup_path(id);
        if (path.empty() && !reread) {
            reread = true;
            paths_read_ = {};
            path = cgroup_path(id);
        }
        const double count = static_cast<double>(n);
        memcg_kills_.update(std::to_string(id),
                            {{"constraint", memcg}, {"cgroup", path.empty() ? "removed" : path}},
                            std::span(&count, 1));
    }
    memcg_kills_.end();
    std::map<prometheus::Labels, double> by_cgroup;
    for (const auto &[labels, values] : memcg_kills_.series())
        by_cgroup[labels] += values[0];
    if (const uint64_t unkeyed = skel.bss->memcg_kills_unkeyed; unkeyed != 0)
        by_cgroup[{{"constraint", memcg}, {"cgroup", "other"}}] += static_cast<double>(unkeyed);

    out.family("memlat_oom_kills", prometheus::Type::Counter,
               "OOM kills (oom:mark_victim), by constraint: memcg (a memory cgroup's limit, "
               "by the cgroup whose limit fired), global (the page allocator), cpuset or "
               "mempolicy (the allocator, limited to some nodes), unknown (no reclaim before "
               "the kill)");
    for (const auto &[labels, n] : by_cgroup)
        out.sample(labels, n);
    for (uint32_t c : {OOMWHY_CONSTRAINT_GLOBAL, OOMWHY_CONSTRAINT_CPUSET,
                       OOMWHY_CONSTRAINT_MEMPOLICY, OOMWHY_CONSTRAINT_UNKNOWN})
        out.sample({{"constraint", oomwhy::constraint_name(oomwhy::Constraint(c))}},
                   skel.bss->kills_by_constraint[c]);
    prometheus::series_dropped_metric(out, memcg_kills_.dropped());
    return CountedLosses{0, skel.bss->table_full, skel.bss->unpaired_ends};
}

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
