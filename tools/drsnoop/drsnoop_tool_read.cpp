// drsnoop, what is read back: the stalls' lines, the histograms, the summary at exit and
// the Prometheus families.
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
#include "cli/options.h"
#include "cli/output.h"
#include "cli/run_loop.h"
#include "drsnoop.h"
#include "drsnoop.skel.h"
#include "drsnoop_format.h"
#include "drsnoop_metrics.h"
#include "kernel/cgroups.h"
#include "kernel/features.h"
#include "kernel/gfp.h"
#include "kernel/tasks.h"
#include "kernel/types.h"
#include "loading/epoch_table.h"
#include "loading/events.h"
#include "loading/loader.h"
#include "prometheus/exporter.h"
#include "prometheus/metrics_serving.h"
#include "tool/tool.h"

#include "drsnoop_tool.h"

using nlohmann::json;

namespace memlat::drsnoop {

void Drsnoop::print_header() const {
    if (!o_.common.json && !o_.hist)
        fmt::print("{}\n", drsnoop::header(format_));
}

void Drsnoop::print_event(const drsnoop_event &e) {
    if (first_ns_ == 0)
        first_ns_ = e.ts_ns - e.lat_ns;
    // Signed: perf buffers (kernels before 5.8) deliver each CPU's events in batches, so an
    // event of another CPU may precede the first one printed.
    const double time_s = static_cast<double>(static_cast<int64_t>(e.ts_ns - first_ns_)) / 1e9;
    if (o_.common.json) {
        auto j = drsnoop::json_event(e, time_s, format_, *gfp_);
        const uint64_t cgroup_id = e.cgroup_id;
        const auto path = event_cgroups_.paths_of(std::span(&cgroup_id, 1));
        j["cgroup"] = path.empty() ? nlohmann::json(nullptr) : nlohmann::json(path.begin()->second);
        if (o_.common.timestamp)
            j["wall_time"] = wall_clock_time();
        print_json_line(event_line, j);
        return;
    }
    fmt::print("{}\n", drsnoop::line(e, time_s, format_, *gfp_));
}

void Drsnoop::print_histograms(drsnoop_bpf &skel) {
    // (pid, kind) -> slots, pid 0 for the all-process histograms; printed as the change
    // since the last print.
    std::map<std::pair<uint32_t, uint32_t>, Log2Hist> now;
    std::map<uint32_t, std::string> comms;
    if (o_.per_process) {
        // The interval's own histograms, nothing to subtract (see EpochTable).
        hists_.reset();
        for (const auto &[k, v] :
             hist_table_.next_interval(skel.maps.proc_hists, skel.bss->hist_epoch)) {
            std::copy(std::begin(v.slots), std::end(v.slots), now[k].begin());
            comms[k.first] = std::string(v.comm, strnlen(v.comm, sizeof(v.comm)));
        }
    } else {
        for (uint32_t kind = 0; kind < DRSNOOP_KINDS; ++kind)
            std::copy(std::begin(skel.bss->hist[kind]), std::end(skel.bss->hist[kind]),
                      now[{0, kind}].begin());
    }
    json out = json::object();
    json hists = json::array();
    if (o_.common.json)
        out["time"] = wall_clock_time();
    else if (o_.common.timestamp || o_.common.interval > 0)
        fmt::print("\n{}\n", wall_clock_time());
    for (const auto &[key, d] : hists_.next(std::move(now))) {
        const char *kind = drsnoop::kind_name(key.second);
        if (o_.common.json) {
            json h = log2_hist_json(d, "usecs");
            h["kind"] = kind;
            if (o_.per_process) {
                h["pid"] = key.first;
                h["comm"] = comms[key.first];
            }
            hists.push_back(h);
            continue;
        }
        if (o_.per_process)
            fmt::print("\npid {} ({}), {} reclaim:\n", key.first, comms[key.first], kind);
        else
            fmt::print("\n{} reclaim:\n", kind);
        fmt::print("{}", render_log2_hist(d, "usecs"));
    }
    // Stalls of this interval a table had no room for (the per-process histograms, or the
    // per-thread start times): its histograms lack them.
    const uint64_t full =
        skel.bss->table_full - std::exchange(table_full_before_, skel.bss->table_full);
    if (o_.common.json) {
        out["histograms"] = hists;
        out["table_full"] = full;
        print_json_line(interval_line, out);
    } else if (full != 0) {
        fmt::print("\n{} stalls of this interval missing: a BPF table was full.\n", full);
    }
}

void Drsnoop::print_summary(drsnoop_bpf &skel, const EventReader *events) {
    // Records the BPF side could not reserve or write, and those a perf buffer lost.
    const uint64_t lost =
        events != nullptr ? events->lost(skel.bss->dropped_events) : skel.bss->dropped_events;
    const std::string events_name = events != nullptr ? events->name() : "ring buffer";
    auto rows = read_hash_map<drsnoop_proc_key, drsnoop_summary>(skel.maps.summaries);
    std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
        return a.second.total_ns != b.second.total_ns ? a.second.total_ns > b.second.total_ns
                                                      : a.first.pid < b.first.pid;
    });
    const auto *bss = skel.bss;
    // The stalls of each kind, counted beside the rows (the same events, past the same
    // filters): what the rows hold less than these, a full table kept out of them.
    std::array<drsnoop_totals, DRSNOOP_KINDS> in_rows{};
    for (const auto &[k, s] : rows) {
        in_rows[k.kind % DRSNOOP_KINDS].stalls += s.stalls;
        in_rows[k.kind % DRSNOOP_KINDS].total_ns += s.total_ns;
        in_rows[k.kind % DRSNOOP_KINDS].pages += s.pages;
    }
    if (o_.common.json) {
        json list = json::array();
        for (const auto &[k, s] : rows)
            list.push_back({{"pid", k.pid},
                            {"comm", std::string(s.comm, strnlen(s.comm, sizeof(s.comm)))},
                            {"kind", drsnoop::kind_name(k.kind)},
                            {"stalls", s.stalls},
                            {"total_ns", s.total_ns},
                            {"total_ms", s.total_ns / 1e6},
                            {"max_ns", s.max_ns},
                            {"max_ms", s.max_ns / 1e6},
                            {"pages", s.pages}});
        json totals = json::array(), left_out = json::array();
        for (uint32_t kind = 0; kind < DRSNOOP_KINDS; ++kind) {
            const drsnoop_totals &all = bss->totals[kind], &shown = in_rows[kind];
            if (all.stalls == 0)
                continue;
            totals.push_back({{"kind", drsnoop::kind_name(kind)},
                              {"stalls", all.stalls},
                              {"total_ns", all.total_ns},
                              {"total_ms", all.total_ns / 1e6},
                              {"pages", all.pages}});
            if (all.stalls > shown.stalls)
                left_out.push_back({{"kind", drsnoop::kind_name(kind)},
                                    {"stalls", all.stalls - shown.stalls},
                                    {"total_ns", all.total_ns - shown.total_ns},
                                    {"total_ms", (all.total_ns - shown.total_ns) / 1e6},
                                    {"pages", all.pages - shown.pages}});
        }
        print_json_line(summary_line, {{"summary", list},
                                       {"totals", totals},
                                       {"left_out", left_out},
                                       {"lost_events", lost},
                                       {"table_full", bss->table_full},
                                       {"unpaired_ends", bss->unpaired_ends},
                                       {skipped_runs_field, recursion_misses(skel.obj)}});
        return;
    }
    // The text summary goes to stderr: stdout carries the header and the rows only, so that
    // a pipe into awk or sort reads rows and nothing else (BCC's tools print no summary),
    // while the summary still shows on the terminal and in logs. The rows printed go first
    // (and a stdout that cannot be written fails the tool here, as at each interval).
    flush_output();
    fmt::print(stderr, "\nReclaim stalls by process:\n");
    fmt::print(stderr, "{:<7} {:<16} {:<9} {:>8} {:>12} {:>10} {:>10}\n", "PID", "COMM", "KIND",
               "STALLS", "TOTAL(ms)", "MAX(ms)", "PAGES");
    for (const auto &[k, s] : rows)
        fmt::print(stderr, "{:<7} {:<16} {:<9} {:>8} {:>12.3f} {:>10.3f} {:>10}\n", k.pid,
                   std::string(s.comm, strnlen(s.comm, sizeof(s.comm))), drsnoop::kind_name(k.kind),
                   s.stalls, s.total_ns / 1e6, s.max_ns / 1e6, s.pages);
    for (uint32_t kind = 0; kind < DRSNOOP_KINDS; ++kind) {
        const drsnoop_totals &all = bss->totals[kind], &shown = in_rows[kind];
        if (all.stalls == 0)
            continue;
        fmt::print(stderr, "{:<7} {:<16} {:<9} {:>8} {:>12.3f} {:>10} {:>10}\n", "total", "",
                   drsnoop::kind_name(kind), all.stalls, all.total_ns / 1e6, "", all.pages);
        if (all.stalls > shown.stalls)
            fmt::print(stderr,
                       "{} {} stalls ({:.3f} ms) are in no row above: the per-process table was "
                       "full (--max-entries)\n",
                       all.stalls - shown.stalls, drsnoop::kind_name(kind),
                       (all.total_ns - shown.total_ns) / 1e6);
    }
    if (lost != 0)
        fmt::print(stderr, "\nLost {} events: the {} was full (the summary still counts them).\n",
                   lost, events_name);
    if (bss->table_full != 0)
        fmt::print(stderr, "\n{} stalls not counted: a BPF table was full.\n", bss->table_full);
    if (bss->unpaired_ends != 0)
        fmt::print(stderr,
                   "\n{} stalls not timed: their begin was not seen (under way when tracing "
                   "began, or the thread's state was evicted while it stalled).\n",
                   bss->unpaired_ends);
}

CountedLosses Drsnoop::collect(prometheus::Exposition &out) {
    drsnoop_bpf &skel = this->skel();
    drsnoop::Counts &counts = counts_;
    // A scrape reads the totals and histograms; the per-task and per-cgroup tables on request.
    const auto *bss = skel.bss;
    for (uint32_t k = 0; k < DRSNOOP_KINDS; ++k) {
        counts.totals[k] = bss->totals[k];
        std::copy(std::begin(bss->hist[k]), std::end(bss->hist[k]), counts.hist_us[k].begin());
    }
    counts.summaries.clear();
    if (o_.prom.label("comm")) {
        counts.summaries = read_hash_map<drsnoop_proc_key, drsnoop_summary>(skel.maps.summaries);
        // A process that exited stalls no more: its counts are read, so its entry goes,
        // and the table keeps room for the processes that live.
        delete_exited_tasks(skel.maps.summaries, counts.summaries,
                            [](const drsnoop_proc_key &k) { return k.pid; });
    }
    if (o_.prom.label("cgroup")) {
        counts.cgroups = read_hash_map<drsnoop_cgroup_key, drsnoop_totals>(skel.maps.cgroup_totals);
        // Looked up after the table was read: a cgroup it has and this does not was
        // removed, and its entry goes too.
        counts.cgroup_paths = cgroup_cache_.paths_of(
            counts.cgroups, [](const auto &entry) { return entry.first.cgroup_id; });
        for (const auto &[key, t] : counts.cgroups)
            if (!counts.cgroup_paths.contains(key.cgroup_id))
                bpf_map__delete_elem(skel.maps.cgroup_totals, &key, sizeof(key), 0);
        counts.cgroup_workloads =
            metric_names_.of_each(counts.cgroup_paths, [this](const std::string &path) {
                return cgroup_cache_.exists(path);
            });
    }
    metrics_->collect(counts, out);
    return CountedLosses{bss->dropped_events, bss->table_full, bss->unpaired_ends};
}

} // namespace memlat::drsnoop
