// numamove, what is read back: the snapshots of the BPF side's counts, the interval's tables
// (by reason, by process, histograms) and the Prometheus families.
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

#include "numamove_tool.h"

using nlohmann::json;

namespace memlat::numamove {

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
        // Without --reasons, only the NUMA-balancing migrations, as in the default view.
        if (!o_.reasons && key.reason != numa_reason_)
            continue;
        auto it = before.procs.find(key);
        auto d = it == before.procs.end() ? c : numamove::minus(c, it->second);
        if (d.calls != 0)
            rows.push_back({key.pid, now.comms.at(key), key.reason, d});
    }
    std::stable_sort(rows.begin(), rows.end(),
                     [](const auto &a, const auto &b) { return a.c.succeeded > b.c.succeeded; });
    // Below the --reasons table, a blank line apart.
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
        print_json_line(interval_line, out);
        return;
    }
    if (full != 0)
        fmt::print("{} migrations missing from the per-process table: it was full.\n", full);
    if (deep != 0)
        fmt::print("{} migrations nested deeper than {}: not timed.\n", deep, NUMAMOVE_MAX_DEPTH);
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

} // namespace memlat::numamove
