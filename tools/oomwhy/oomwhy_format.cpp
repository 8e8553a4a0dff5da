#include "oomwhy_format.h"

#include <fmt/format.h>

#include <map>
#include <string_view>

namespace memlat::oomwhy {

using nlohmann::json;

namespace {

std::string comm_of(const char (&comm)[OOMWHY_COMM_LEN]) {
    return std::string(comm, strnlen(comm, OOMWHY_COMM_LEN));
}

std::string ms(uint64_t ns) {
    return fmt::format("{:.1f} ms", ns / 1e6);
}

std::string kib(uint64_t pages, uint64_t page_kb) {
    return fmt::format("{} KiB", pages * page_kb);
}

std::string limit_text(uint64_t pages, uint64_t page_kb) {
    return is_limit(pages) ? kib(pages, page_kb) : "max";
}

// The name of the limit as the cgroup's files call it.
std::string limit_file(const oomwhy_kill &k, const LimitHit &hit) {
    if (hit.memsw)
        return "memory.memsw.limit_in_bytes";
    return k.cgroup_v1 ? "memory.limit_in_bytes" : "memory.max";
}

std::string path_or_id(const Report &r, uint64_t id) {
    if (id == 0)
        return "?";
    std::string path = r.cgroup_path ? r.cgroup_path(id) : "";
    if (path.empty())
        return fmt::format("cgroup id {}", id);
    // The pod or container people know it by, after the path.
    const Workload w = r.cgroup_workload ? r.cgroup_workload(id) : Workload{};
    if (w.kind == "container" || w.kind == "pod")
        path += fmt::format(" ({})", w.display());
    return path;
}

json path_json(const Report &r, uint64_t id) {
    std::string path = r.cgroup_path && id != 0 ? r.cgroup_path(id) : "";
    return path.empty() ? json(nullptr) : json(path);
}

// A cgroup in the form of every memlat output: KEY, its path in the hierarchy (null when it
// is gone or unknown), and KEY_id, its id (null when the kernel gave none).
void put_cgroup(json &out, const std::string &key, const Report &r, uint64_t id) {
    out[key] = path_json(r, id);
    out[key + "_id"] = id != 0 ? json(id) : json(nullptr);
    out[key == "cgroup" ? std::string("workload") : key + "_workload"] =
        workload_json(r.cgroup_workload && id != 0 ? r.cgroup_workload(id) : Workload{});
}

const char *reclaim_kind_name(uint32_t kind) {
    switch (kind) {
    case OOMWHY_RECLAIM_DIRECT:
        return "direct";
    case OOMWHY_RECLAIM_MEMCG:
        return "memcg";
    default:
        return "none";
    }
}

std::string causes_text(const CauseNs &ns) {
    std::string out;
    for (uint32_t c = 0; c < MEMSTALL_CAUSES; ++c)
        if (ns[c] != 0)
            out +=
                fmt::format("{}{} {}", out.empty() ? "" : ", ", memstall::cause_name(c), ms(ns[c]));
    return out.empty() ? "none" : out;
}

template <typename Line>
void stalls_text(const LeadUpStalls &s, Line &line) {
    uint64_t total = 0;
    for (uint64_t v : s.total)
        total += v;
    line("stalls:", fmt::format("{} in the last {} s (memstall, to {} after the kill): {}{}",
                                s.domain.empty() ? "the host" : s.domain, s.seconds.size(),
                                ms(s.read_after_kill_ns), causes_text(s.total),
                                total != 0 ? fmt::format(", {} in all", ms(total)) : ""));
    if (total == 0)
        return;
    std::string per_second;
    for (const auto &second : s.seconds) {
        uint64_t sum = 0;
        for (uint64_t v : second.ns)
            sum += v;
        per_second += fmt::format(" {:.0f}", sum / 1e6);
    }
    line("", "per second, oldest first (ms):" + per_second);
    for (const StalledThread &t : s.most_stalled)
        line("", fmt::format("PID {}{} \"{}\" stalled {}: {}", t.pid,
                             t.tid != t.pid ? fmt::format(" (thread {})", t.tid) : "", t.comm,
                             ms(t.total()), causes_text(t.ns)));
}

std::optional<uint64_t> since_kill(const Report &r, const std::optional<uint64_t> &ns) {
    if (!ns || *ns < r.kill.ts_ns)
        return std::nullopt;
    return *ns - r.kill.ts_ns;
}

} // namespace

uint32_t victim_process(const oomwhy_kill &k) {
    return (k.known & OOMWHY_KNOWN_TASK) ? k.victim_tgid : k.victim_pid;
}

uint64_t domain_pages(const Report &r) {
    switch (constraint_of(r.kill)) {
    case Constraint::Memcg: {
        const LimitHit hit = limit_that_fired(r.kill);
        if (hit.level < 0)
            return 0;
        const oomwhy_level &l = r.kill.level[hit.level];
        return hit.memsw ? l.memsw_max : l.max;
    }
    case Constraint::Global:
        return r.global_pages;
    case Constraint::Cpuset:
    case Constraint::MemoryPolicy:
        return r.constrained_pages;
    default:
        return 0;
    }
}

std::string oomkill_line(const Report &r) {
    const oomwhy_kill &k = r.kill;
    return fmt::format(R"({} Triggered by PID {} ("{}"), OOM kill of PID {} ("{}"), {} pages, )"
                       "loadavg: {}",
                       r.time, k.trigger_tgid, comm_of(k.trigger_comm), victim_process(k),
                       (k.known & OOMWHY_KNOWN_COMM) ? comm_of(k.victim_comm) : "?",
                       domain_pages(r), r.loadavg);
}

std::string report_text(const Report &r, const GfpNames &gfp) {
    const oomwhy_kill &k = r.kill;
    const uint64_t kb = r.page_kb;
    const Constraint c = constraint_of(k);
    const LimitHit hit = limit_that_fired(k);
    std::string out = oomkill_line(r) + "\n";
    auto line = [&out](std::string_view label, const std::string &text) {
        out += fmt::format("  {:<9}{}\n", label, text);
    };

    if (c == Constraint::Memcg && hit.level >= 0) {
        const oomwhy_level &l = k.level[hit.level];
        line("why:",
             fmt::format("memory cgroup {} at its {}: usage {} of {}{}", path_or_id(r, l.cgroup_id),
                         limit_file(k, hit), kib(hit.memsw ? l.memsw_usage : l.usage, kb),
                         kib(hit.memsw ? l.memsw_max : l.max, kb),
                         hit.found_by == LimitHit::FoundBy::Nearest
                             ? " (inferred: the cgroup nearest to its limit at the kill; none "
                               "was within 8 pages of it)"
                             : ""));
    } else if (c == Constraint::Memcg) {
        line("why:", "a memory cgroup's limit (the trigger reclaimed its memory cgroup last), "
                     "but none of its cgroups has a limit");
    } else if (c == Constraint::Global) {
        line("why:", "the page allocator found no memory after direct reclaim (a global OOM)");
    } else if (c == Constraint::MemoryPolicy || c == Constraint::Cpuset) {
        line("why:",
             fmt::format("the page allocator found no memory after direct reclaim on "
                         "the nodes {} allows: {}",
                         c == Constraint::MemoryPolicy ? "the trigger's memory policy (MPOL_BIND)"
                                                       : "the trigger's cpuset (mems_allowed)",
                         node_list(k.allowed_nodes)));
    } else {
        line("why:", "unknown: the trigger ran no reclaim before the kill (sysrq-f, or a "
                     "kernel thread)");
    }

    std::string victim = fmt::format("PID {}", victim_process(k));
    if ((k.known & OOMWHY_KNOWN_TASK) && k.victim_pid != k.victim_tgid)
        victim += fmt::format(" (thread {})", k.victim_pid);
    if (k.known & OOMWHY_KNOWN_COMM)
        victim += fmt::format(" \"{}\"", comm_of(k.victim_comm));
    if (!r.victim_title.empty())
        victim += fmt::format(" ({})", r.victim_title);
    if (k.known & (OOMWHY_KNOWN_TASK | OOMWHY_KNOWN_MEMORY))
        victim += fmt::format(", uid {}, oom_score_adj {}", k.victim_uid, k.oom_score_adj);
    if (k.known & OOMWHY_KNOWN_TASK)
        victim += fmt::format(", cgroup {}", path_or_id(r, k.victim_cgroup_id));
    line("victim:", victim);
    if (k.known & OOMWHY_KNOWN_MEMORY)
        line("",
             fmt::format("total-vm {}, anon-rss {}, file-rss {}, shmem-rss {}, swap {}, "
                         "pgtables {} KiB",
                         kib(k.total_vm, kb), kib(k.anon_rss, kb), kib(k.file_rss, kb),
                         kib(k.shmem_rss, kb),
                         (k.known & OOMWHY_KNOWN_TASK) ? kib(k.swapents, kb) : "?", k.pgtables_kb));
    else
        line("", "its memory is unknown: this kernel's oom:mark_victim gives the pid only");

    std::string trigger = fmt::format("PID {}", k.trigger_tgid);
    if (k.trigger_pid != k.trigger_tgid)
        trigger += fmt::format(" (thread {})", k.trigger_pid);
    trigger += fmt::format(" \"{}\"", comm_of(k.trigger_comm));
    if (!r.trigger_title.empty())
        trigger += fmt::format(" ({})", r.trigger_title);
    trigger += fmt::format(", cgroup {}", path_or_id(r, k.trigger_cgroup_id));
    if (victim_process(k) == k.trigger_tgid)
        trigger += " (the victim itself)";
    line("trigger:", trigger);

    const oomwhy_reclaim &rc = k.reclaim;
    if (rc.rounds == 0) {
        line("lead-up:", "no reclaim by the trigger since oomwhy started");
    } else {
        std::string lead = fmt::format(
            "{} reclaim rounds ({} memcg, {} direct) took {} of the {} before the kill, {} "
            "pages reclaimed; last: {} reclaim, order {}, gfp {}",
            rc.rounds, rc.memcg_rounds, rc.direct_rounds, ms(rc.total_ns),
            ms(k.ts_ns > rc.first_ns ? k.ts_ns - rc.first_ns : 0), rc.reclaimed,
            reclaim_kind_name(rc.kind), rc.order, gfp.decode(rc.gfp));
        line("lead-up:", lead);
        if (rc.retry_checks != 0 || rc.compact_retries != 0)
            line("", fmt::format("the page allocator checked {} times whether to retry "
                                 "(last: {} reclaims without progress), compaction retried {} "
                                 "times",
                                 rc.retry_checks, rc.no_progress_loops, rc.compact_retries));
    }

    if (r.stalls != nullptr)
        stalls_text(*r.stalls, line);

    const uint32_t levels = std::min<uint32_t>(k.levels, OOMWHY_LEVELS);
    for (uint32_t i = 0; i < levels; ++i) {
        const oomwhy_level &l = k.level[i];
        std::string text = fmt::format("{}: usage {}, limit {}", path_or_id(r, l.cgroup_id),
                                       kib(l.usage, kb), limit_text(l.max, kb));
        if (!k.cgroup_v1 && l.high != 0)
            text += fmt::format(", high {}", limit_text(l.high, kb));
        if (k.cgroup_v1 && l.memsw_max != 0)
            text += fmt::format(", memsw {} of {}", kib(l.memsw_usage, kb),
                                limit_text(l.memsw_max, kb));
        if (static_cast<int>(i) == hit.level && c == Constraint::Memcg)
            text += "  <- fired";
        line(i == 0 ? "cgroups:" : "", text);
    }

    std::string after;
    if (auto exit = since_kill(r, r.after.exit_ns))
        after = fmt::format("the victim exited {} after the kill", ms(*exit));
    else
        after = "the victim had not exited a second after the kill";
    if (auto wake = since_kill(r, r.after.reaper_wake_ns))
        after += fmt::format("; the OOM reaper woke {} after it", ms(*wake));
    if (r.after.reap_skipped)
        after += "; the reaper skipped it (its memory was already freed)";
    if (r.after.reap_start_ns && r.after.reap_finish_ns &&
        *r.after.reap_finish_ns >= *r.after.reap_start_ns)
        after += fmt::format("; the reaper freed its memory in {}",
                             ms(*r.after.reap_finish_ns - *r.after.reap_start_ns));
    line("after:", after);
    return out;
}

json report_json(const Report &r, const GfpNames &gfp) {
    const oomwhy_kill &k = r.kill;
    const uint64_t kb = r.page_kb;
    const Constraint c = constraint_of(k);
    const LimitHit hit = limit_that_fired(k);
    json out = json::object();
    out["type"] =
        kill_line.name; // also in --report-dir's file, which print_json_line() does not write
    out["time"] = r.time;
    out["constraint"] = constraint_name(c);
    out["kernel_constraint"] = kernel_constraint_name(c);
    out["pages"] = domain_pages(r);
    out["allowed_nodes"] = c == Constraint::Cpuset || c == Constraint::MemoryPolicy
                               ? json(node_list(k.allowed_nodes))
                               : json(nullptr);
    out["loadavg"] = r.loadavg;

    json victim = {{"pid", victim_process(k)}, {"tid", k.victim_pid}};
    victim["comm"] = (k.known & OOMWHY_KNOWN_COMM) ? json(comm_of(k.victim_comm)) : json(nullptr);
    if (k.known & OOMWHY_KNOWN_TASK)
        put_cgroup(victim, "cgroup", r, k.victim_cgroup_id);
    if (k.known & (OOMWHY_KNOWN_TASK | OOMWHY_KNOWN_MEMORY)) {
        victim["uid"] = k.victim_uid;
        victim["oom_score_adj"] = k.oom_score_adj;
    }
    if (k.known & OOMWHY_KNOWN_MEMORY) {
        victim["total_vm_kb"] = k.total_vm * kb;
        victim["anon_rss_kb"] = k.anon_rss * kb;
        victim["file_rss_kb"] = k.file_rss * kb;
        victim["shmem_rss_kb"] = k.shmem_rss * kb;
        victim["pgtables_kb"] = k.pgtables_kb;
        if (k.known & OOMWHY_KNOWN_TASK)
            victim["swap_kb"] = k.swapents * kb;
    }
    victim["title"] = r.victim_title.empty() ? json(nullptr) : json(r.victim_title);
    out["victim"] = victim;
    out["trigger"] = {
        {"pid", k.trigger_tgid}, {"tid", k.trigger_pid}, {"comm", comm_of(k.trigger_comm)}};
    out["trigger"]["title"] = r.trigger_title.empty() ? json(nullptr) : json(r.trigger_title);
    put_cgroup(out["trigger"], "cgroup", r, k.trigger_cgroup_id);

    const oomwhy_reclaim &rc = k.reclaim;
    out["lead_up"] = {
        {"reclaim_rounds", rc.rounds},
        {"memcg_rounds", rc.memcg_rounds},
        {"direct_rounds", rc.direct_rounds},
        {"reclaim_ns", rc.total_ns},
        {"since_first_ns", rc.rounds != 0 && k.ts_ns > rc.first_ns ? k.ts_ns - rc.first_ns : 0},
        {"reclaimed_pages", rc.reclaimed},
        {"last_reclaim", reclaim_kind_name(rc.kind)},
        {"order", rc.order},
        {"gfp", rc.rounds != 0 ? json(gfp.decode(rc.gfp)) : json(nullptr)},
        {"retry_checks", rc.retry_checks},
        {"no_progress_loops", rc.no_progress_loops},
        {"compact_retries", rc.compact_retries},
    };

    if (r.stalls != nullptr) {
        // In memstall's shape (its rows' "causes"), so that "ns" is a number in every line.
        auto causes = [](const CauseNs &ns) {
            json o = json::object();
            for (uint32_t c = 0; c < MEMSTALL_CAUSES; ++c)
                o[memstall::cause_name(c)] = {{"ns", ns[c]}};
            return o;
        };
        json seconds = json::array();
        for (const auto &second : r.stalls->seconds)
            seconds.push_back(
                {{"before_kill_s", second.before_kill_s}, {"causes", causes(second.ns)}});
        json tasks = json::array();
        for (const StalledThread &t : r.stalls->most_stalled) {
            json task = {{"pid", t.pid}, {"tid", t.tid}, {"comm", t.comm}};
            put_cgroup(task, "cgroup", r, t.cgroup_id);
            task["causes"] = causes(t.ns);
            tasks.push_back(std::move(task));
        }
        out["lead_up"]["stall_history"] = {
            {"domain", r.stalls->domain.empty() ? json(nullptr) : json(r.stalls->domain)},
            {"causes", causes(r.stalls->total)},
            {"read_after_kill_ns", r.stalls->read_after_kill_ns},
            {"seconds", seconds},
            {"most_stalled", tasks}};
    }

    json levels = json::array();
    const uint32_t n = std::min<uint32_t>(k.levels, OOMWHY_LEVELS);
    for (uint32_t i = 0; i < n; ++i) {
        const oomwhy_level &l = k.level[i];
        json level;
        put_cgroup(level, "cgroup", r, l.cgroup_id);
        level["usage_kb"] = l.usage * kb;
        level["limit_kb"] = is_limit(l.max) ? json(l.max * kb) : json(nullptr);
        if (!k.cgroup_v1)
            level["high_kb"] = is_limit(l.high) ? json(l.high * kb) : json(nullptr);
        else if (l.memsw_max != 0) {
            level["memsw_usage_kb"] = l.memsw_usage * kb;
            level["memsw_limit_kb"] =
                is_limit(l.memsw_max) ? json(l.memsw_max * kb) : json(nullptr);
        }
        levels.push_back(level);
    }
    out["cgroups"] = levels;
    if (c == Constraint::Memcg && hit.level >= 0) {
        const oomwhy_level &l = k.level[hit.level];
        put_cgroup(out, "oom_memcg", r, l.cgroup_id);
        out["limit"] = limit_file(k, hit);
    } else {
        out["oom_memcg"] = nullptr;
        out["oom_memcg_id"] = nullptr;
        out["limit"] = nullptr;
    }
    // How oom_memcg was found: the kernel's OOM lock, the usage within a charge of the limit,
    // or the level nearest to its limit (an inference).
    out["oom_memcg_from"] = found_by_name(hit.found_by);

    json after = json::object();
    auto put = [&](const char *key, const std::optional<uint64_t> &ns) {
        auto d = since_kill(r, ns);
        after[key] = d ? json(*d) : json(nullptr);
    };
    put("victim_exit_ns", r.after.exit_ns);
    put("reaper_wake_ns", r.after.reaper_wake_ns);
    put("reap_start_ns", r.after.reap_start_ns);
    put("reap_finish_ns", r.after.reap_finish_ns);
    after["reap_skipped"] = r.after.reap_skipped;
    out["after_kill"] = after;
    return out;
}

} // namespace memlat::oomwhy
