// oomwhy, what is read back: the kills and notes from the ring buffer, their lead-up (the
// stall history), the reports when the victim has exited, and the Prometheus families.
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
#include "cli/options.h"
#include "cli/output.h"
#include "cli/run_loop.h"
#include "kernel/cgroups.h"
#include "kernel/features.h"
#include "kernel/gfp.h"
#include "kernel/memory_state.h"
#include "kernel/process_titles.h"
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

#include "oomwhy_tool.h"

using nlohmann::json;

namespace memlat::oomwhy {

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

Workload Oomwhy::cgroup_workload(uint64_t id) {
    const std::string path = cgroup_path(id);
    if (path.empty()) // gone: what was found while it was there
        return names_.known(id).value_or(Workload{});
    return names_.of(id, path);
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
        if (domain.empty() || domain == "/")
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
        // Read now: the victim's memory goes with it. Once per kill, as top reads a row's.
        p.victim_title = read_process_title(oomwhy::victim_process(p.kill));
        p.trigger_title = read_process_title(p.kill.trigger_tgid);
        // The names too: a container's records go with it.
        for (uint64_t id : {p.kill.victim_cgroup_id, p.kill.trigger_cgroup_id})
            cgroup_workload(id);
        for (const auto &level : p.kill.level)
            if (level.cgroup_id != 0)
                cgroup_workload(level.cgroup_id);
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
        print_json_line(oomwhy::reaper_line,
                        {{"time", wall_clock_time()},
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
                     .cgroup_workload = [this](uint64_t id) { return cgroup_workload(id); },
                     .time = p.time,
                     .loadavg = p.loadavg,
                     .victim_title = p.victim_title,
                     .trigger_title = p.trigger_title,
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
        print_json_line(oomwhy::kill_line, object);
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
        prometheus::Labels labels{{"constraint", memcg}};
        // A removed cgroup's names are those found at its kill (on_record()).
        const Workload workload = id == 0 ? Workload{} : cgroup_workload(id);
        prometheus::add_cgroup_labels(labels, path.empty() ? "removed" : path,
                                      workload.kind.empty() ? nullptr : &workload);
        memcg_kills_.update(std::to_string(id), labels, std::span(&count, 1));
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

} // namespace memlat::oomwhy
