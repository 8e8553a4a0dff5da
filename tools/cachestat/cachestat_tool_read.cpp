// cachestat, what is read back: snapshots of the per-CPU counters and of the process, file and
// cgroup tables, the interval's rows, the summary at exit and the Prometheus families.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <fmt/format.h>
#include <map>
#include <optional>

#include "cachestat.h"
#include "cachestat.skel.h"
#include "cachestat_format.h"
#include "cachestat_metrics.h"
#include "cachestat_totals.h"
#include "kernel/cgroups.h"
#include "sources/page_cache.h"
#include <linux/capability.h>

#include "base/capabilities.h"
#include "base/files.h"
#include "base/machine.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/run_loop.h"
#include "kernel/features.h"
#include "kernel/file_paths.h"
#include "kernel/tasks.h"
#include "loading/epoch_table.h"
#include "loading/loader.h"
#include "prometheus/exporter.h"
#include "prometheus/metrics_serving.h"
#include "prometheus/process_metrics.h"
#include "tool/tool.h"

#include "cachestat_tool.h"

using nlohmann::json;

namespace memlat::cachestat {

cachestat::Meminfo meminfo() {
    auto text = read_text_file("/proc/meminfo");
    return text ? cachestat::parse_meminfo(*text) : cachestat::Meminfo{};
}

// The per-CPU counters of `epoch`, summed over the CPUs.
cachestat::Counts Cachestat::epoch_total(uint32_t epoch) const {
    cachestat::Counts total;
    for (int cpu = 0; cpu < ncpus_; ++cpu) {
        const auto &row = cpu_counts_.at<cachestat_cpu_counts>(epoch * ncpus_ + cpu);
        cachestat_counts c{};
        std::copy(std::begin(row.c), std::end(row.c), c.c);
        total += cachestat::counts_of(c);
    }
    return total;
}

Snapshot Cachestat::snapshot(cachestat_bpf &skel) {
    Snapshot s;
    const auto *bss = skel.bss;
    if (epochs_) {
        // The events before the first snapshot (the baseline) are in no interval and not in
        // the summary. Every interval closes one epoch, of the tables and of the per-CPU
        // counters alike: its total is the sum of its rows.
        const uint32_t closing = skel.bss->table_epoch & 1;
        auto next = [&](auto &table, bpf_map *map, auto &totals, auto &summary, auto &rows) {
            if (!baseline_taken_) {
                table.begin(skel.bss->table_epoch);
                return;
            }
            auto gained = table.next_interval(map, skel.bss->table_epoch);
            cachestat::carry(totals, gained);
            rows = totals;
            summary.add(gained);
        };
        auto close_tables = [&] {
            if (o_.per_process)
                next(proc_table_, skel.maps.proc_counts, proc_totals_, proc_summary_, s.procs);
            else if (o_.per_file)
                next(file_table_, skel.maps.file_counts, file_totals_, file_summary_, s.files);
            else if (baseline_taken_)
                close_epoch(skel.bss->table_epoch);
            else
                std::atomic_ref<uint32_t>(skel.bss->table_epoch).store(closing ^ 1); // no wait
        };
        if (baseline_taken_) {
            s.total = cpu_epochs_.close(closing, close_tables);
        } else {
            cpu_epochs_.begin(closing);
            close_tables();
            s.total = cpu_epochs_.totals();
        }
        baseline_taken_ = true;
    } else {
        s.total = epoch_total(0);
        if (o_.per_process)
            for (const auto &[k, v] :
                 read_hash_map<cachestat_proc_key, cachestat_proc_value>(skel.maps.proc_counts))
                s.procs[k.pid] = v;
        if (o_.per_file)
            for (const auto &[k, v] :
                 read_hash_map<cachestat_file_key, cachestat_file_value>(skel.maps.file_counts))
                s.files[FileKey{k.dev, k.ino, k.generation}] = v;
    }
    s.table_full = bss->table_full;
    return s;
}

cachestat::CgroupSnapshot Cachestat::cgroup_snapshot() {
    cachestat::CgroupSnapshot s;
    s.total = epoch_total(0);
    for (const auto &[id, counts] :
         read_hash_map<uint64_t, cachestat_counts>(skel().maps.cgroup_counts))
        s.cgroups[id] = cachestat::counts_of(counts);
    s.table_full = skel().bss->table_full;
    return s;
}

// The rows of the entries of `now` (per process or per file) with activity since `before`
// (an entry that is new since then counts whole), sorted as the views print them.
template <typename Row, typename Entries, typename MakeRow>
std::vector<Row> active_rows(const Entries &now, const Entries &before, MakeRow make_row) {
    std::vector<Row> rows;
    for (const auto &[key, v] : now) {
        auto c = cachestat::counts_of(v.counts);
        if (auto it = before.find(key); it != before.end())
            c = c.since(cachestat::counts_of(it->second.counts));
        if (c.counted_any())
            rows.push_back(make_row(key, v, c));
    }
    cachestat::sort_rows(rows);
    return rows;
}

std::vector<cachestat::ProcRow> Cachestat::proc_rows(const Snapshot &now,
                                                     const Snapshot &before) const {
    return active_rows<cachestat::ProcRow>(
        now.procs, before.procs, [](uint32_t pid, const auto &v, const cachestat::Counts &c) {
            return cachestat::ProcRow{pid, v.uid,
                                      std::string(v.comm, strnlen(v.comm, sizeof(v.comm))), c};
        });
}

std::vector<cachestat::FileRow> Cachestat::file_rows(const Snapshot &now, const Snapshot &before) {
    return active_rows<cachestat::FileRow>(
        now.files, before.files,
        [this](const auto &key, const auto &v, const cachestat::Counts &c) {
            return cachestat::FileRow{key.dev, key.ino, paths_.find(key, v.last_pid), c};
        });
}

void Cachestat::print_interval(const Snapshot &now, const Snapshot &before) {
    const auto time = wall_clock_time();
    const auto mem = meminfo();
    paths_.new_interval();
    if (!o_.per_process && !o_.per_file) {
        auto c = now.total.since(before.total);
        if (o_.common.json) {
            json j = cachestat::json_counts(c, accesses_known_);
            j["time"] = time;
            j["buffers_mb"] = mem.buffers_mb ? json(*mem.buffers_mb) : json(nullptr);
            j["cached_mb"] = mem.cached_mb ? json(*mem.cached_mb) : json(nullptr);
            print_json_line(interval_line, j);
        } else {
            fmt::print("{}\n",
                       cachestat::line(c, mem, {o_.common.timestamp, accesses_known_}, time));
        }
        return;
    }
    json list = json::array();
    if (!o_.common.json)
        fmt::print("\n{}\n{}\n", cachestat::table_title(time, mem),
                   o_.per_process ? cachestat::proc_header() : cachestat::file_header());
    if (o_.per_process) {
        for (const auto &r : proc_rows(now, before)) {
            if (o_.common.json)
                list.push_back(cachestat::proc_json(r, accesses_known_));
            else
                fmt::print("{}\n", cachestat::proc_line(r, accesses_known_));
        }
    } else {
        for (const auto &r : file_rows(now, before)) {
            if (o_.common.json)
                list.push_back(cachestat::file_json(r, accesses_known_));
            else
                fmt::print("{}\n", cachestat::file_line(r, accesses_known_));
        }
    }
    // Events of this interval the table had no room for: its rows are incomplete.
    const uint64_t full = now.table_full - before.table_full;
    if (o_.common.json)
        print_json_line(
            interval_line,
            {{"time", time},
             {o_.per_process ? "processes" : "files", list},
             {"total", cachestat::json_counts(now.total.since(before.total), accesses_known_)},
             {"buffers_mb", mem.buffers_mb ? json(*mem.buffers_mb) : json(nullptr)},
             {"cached_mb", mem.cached_mb ? json(*mem.cached_mb) : json(nullptr)},
             {"table_full", full}});
    else if (full != 0)
        fmt::print("{} events of this interval missing from the rows: the per-{} table was "
                   "full (the totals count them).\n",
                   full, o_.per_process ? "process" : "file");
}

void Cachestat::print_summary(cachestat_bpf &skel, const Snapshot &now, double seconds) {
    const Snapshot zero;
    Snapshot run; // each key's total over the run (at most --max-entries of them)
    run.procs = proc_summary_.rows();
    run.files = file_summary_.rows();
    const uint64_t left_out = o_.per_process ? proc_summary_.left_out() : file_summary_.left_out();
    paths_.new_interval();
    const auto &c = now.total;
    const auto procs = o_.per_process ? proc_rows(run, zero) : std::vector<cachestat::ProcRow>{};
    const auto files = o_.per_file ? file_rows(run, zero) : std::vector<cachestat::FileRow>{};
    uint64_t misses_recursion = recursion_misses(skel.obj);
    if (o_.common.json) {
        json s = cachestat::json_counts(c, accesses_known_);
        s["seconds"] = seconds;
        // The rows go into the line one at a time: as one JSON tree, 16384 of them took 30 MB.
        // A string no row holds marks their place.
        const std::string place = json(std::string("\0memlat rows\0", 13)).dump();
        const char *rows_name = o_.per_process ? "processes" : o_.per_file ? "files" : nullptr;
        // What the listed rows do not hold: the rows the summary dropped (the least active,
        // past --max-entries) and what a full table kept out of every row, so that the rows
        // plus left_out_total add up to the total.
        cachestat::Counts in_rows;
        for (const auto &r : procs)
            in_rows += r.c;
        for (const auto &r : files)
            in_rows += r.c;
        const auto rest = c.since(in_rows);
        json left = {{"rows", left_out},
                     {"accesses", rest.accesses},
                     {"misses", rest.misses},
                     {"dirties", rest.dirties},
                     {"hits", rest.hits}};
        json summary = {{"total", s},
                        {"table_full", now.table_full},
                        {"no_task_storage", skel.bss->no_task_storage},
                        {skipped_runs_field, misses_recursion},
                        {"left_out_total", rows_name ? left : json(nullptr)}};
        if (rows_name)
            summary[rows_name] = json::parse(place);
        const std::string line = stamped_json_text(summary_line, summary);
        const auto at = rows_name ? line.find(place) : std::string::npos;
        if (at == std::string::npos) {
            fmt::print("{}\n", line);
        } else {
            fmt::print("{}[", line.substr(0, at));
            const char *separator = "";
            auto row = [&](const json &r) {
                fmt::print("{}{}", separator, json_text(r));
                separator = ",";
            };
            for (const auto &r : procs)
                row(cachestat::proc_json(r, accesses_known_));
            for (const auto &r : files)
                row(cachestat::file_json(r, accesses_known_));
            fmt::print("]{}\n", line.substr(at + place.size()));
        }
    } else {
        // To stderr, as drsnoop's and compactsnoop's: stdout carries the rows only.
        flush_output();
        fmt::print(stderr, "\n{}\n", cachestat::total_line(c, seconds, accesses_known_));
        if (o_.per_process) {
            fmt::print(stderr, "{}\n", cachestat::proc_header());
            for (const auto &r : procs)
                fmt::print(stderr, "{}\n", cachestat::proc_line(r, accesses_known_));
        }
        if (o_.per_file) {
            fmt::print(stderr, "{}\n", cachestat::file_header());
            for (const auto &r : files)
                fmt::print(stderr, "{}\n", cachestat::file_line(r, accesses_known_));
        }
    }
    if (left_out != 0)
        fmt::print(stderr,
                   "{}: {} {} with the least activity are not listed in the summary, which keeps "
                   "{} (--max-entries); the totals count them.\n",
                   tool_name, left_out, o_.per_process ? "processes" : "files",
                   o_.common.entries(o_.per_process ? 16384 : 65536));
    if (now.table_full != 0)
        fmt::print(stderr,
                   "{}: {} events not counted per {}: the table was full (the totals count "
                   "them).\n",
                   tool_name, now.table_full, o_.per_process ? "process" : "file");
    if (skel.bss->no_task_storage != 0)
        fmt::print(stderr,
                   "{}: {} read events had no per-thread cursor (the per-thread hash map was "
                   "full): their accesses may be counted more than once.\n",
                   tool_name, skel.bss->no_task_storage);
    report_skipped_runs(tool_name, skel.obj, "pages");
}

CountedLosses Cachestat::collect(prometheus::Exposition &out) {
    cachestat_bpf &skel = this->skel();
    const Snapshot now = snapshot(skel);
    std::vector<std::pair<cachestat_proc_key, cachestat_proc_value>> procs;
    for (const auto &[pid, v] : now.procs) {
        cachestat_proc_key key{pid, 0};
        procs.emplace_back(key, v);
        // A process that exited adds no more: its entry, read now, goes.
        if (task_exited(pid))
            bpf_map__delete_elem(skel.maps.proc_counts, &key, sizeof(key), 0);
    }
    metrics_->collect(now.total, procs, out);
    return CountedLosses{0, now.table_full};
}

} // namespace memlat::cachestat
