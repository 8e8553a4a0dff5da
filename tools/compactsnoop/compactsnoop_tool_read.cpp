// compactsnoop, what is read back: the runs' lines, the histograms, the summary at exit, the
// kernel stacks, the profile and the Prometheus families.
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
#include "cli/options.h"
#include "cli/output.h"
#include "cli/profile_output.h"
#include "cli/run_loop.h"
#include "compactsnoop.h"
#include "compactsnoop.skel.h"
#include "compactsnoop_format.h"
#include "compactsnoop_metrics.h"
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

#include "compactsnoop_tool.h"

using nlohmann::json;

namespace memlat::compactsnoop {

std::vector<std::string> Compactsnoop::stack_frames(compactsnoop_bpf &skel, int32_t id) {
    if (!stacks_)
        stacks_.emplace(skel.maps.stacks, ksyms_ ? &*ksyms_ : nullptr);
    return stacks_->kernel(id); // from the tracepoint's caller (compact_zone) on
}

void Compactsnoop::print_event(compactsnoop_bpf &skel, const compactsnoop_event &e) {
    if (profile_out_.wanted()) {
        auto &[runs, ns] = profiled_[{
            e.kind, e.pid, std::string(e.comm, strnlen(e.comm, sizeof(e.comm))), e.kernel_stack}];
        ++runs;
        ns += static_cast<int64_t>(e.lat_ns);
        if (profile_out_.replaces_output())
            return;
    }
    if (first_ns_ == 0)
        first_ns_ = e.ts_ns - e.lat_ns;
    // Signed: perf buffers (kernels before 5.8) deliver each CPU's events in batches, so an
    // event of another CPU may precede the first one printed.
    const double time_s = static_cast<double>(static_cast<int64_t>(e.ts_ns - first_ns_)) / 1e9;
    if (o_.common.json) {
        auto j = compactsnoop::json_event(e, time_s, format_, names_, gfp_);
        if (o_.common.timestamp)
            j["wall_time"] = wall_clock_time();
        if (o_.stacks)
            j["kernel_stack"] = stack_frames(skel, e.kernel_stack);
        print_json_line(event_line, j);
        return;
    }
    fmt::print("{}\n", compactsnoop::line(e, time_s, format_, names_));
    if (o_.stacks) {
        for (const auto &frame : stack_frames(skel, e.kernel_stack))
            fmt::print("    {}\n", frame);
        fmt::print("\n");
    }
}

void Compactsnoop::print_histograms(compactsnoop_bpf &skel) {
    std::map<std::pair<uint32_t, uint32_t>, Log2Hist> now;
    for (uint32_t kind = 0; kind < COMPACTSNOOP_KINDS; ++kind)
        for (uint32_t row = 0; row < COMPACTSNOOP_ORDER_ROWS; ++row) {
            // Without -O the orders of a kind are summed into one histogram (row 0).
            auto &slots = now[{kind, o_.per_order ? row : 0}];
            for (int i = 0; i < MEMLAT_HIST_SLOTS; ++i)
                slots[i] += skel.bss->hist[kind][row][i];
        }
    json hists = json::array();
    if (!o_.common.json && (o_.common.timestamp || o_.common.interval > 0))
        fmt::print("\n{}\n", wall_clock_time());
    for (const auto &[key, d] : hists_.next(std::move(now))) {
        const char *kind = compactsnoop::kind_name(key.first);
        const int order = static_cast<int>(key.second) - 1;
        if (o_.common.json) {
            json h = log2_hist_json(d, "usecs");
            h["kind"] = kind;
            if (o_.per_order)
                h["order"] =
                    key.second == COMPACTSNOOP_ORDER_ROWS - 1 ? json(nullptr) : json(order);
            hists.push_back(h);
            continue;
        }
        if (!o_.per_order)
            fmt::print("\n{} compaction:\n", kind);
        else if (order < 0)
            fmt::print("\n{} compaction, order -1 (whole zone):\n", kind);
        else
            fmt::print("\n{} compaction, order {}{}:\n", kind, order,
                       key.second == COMPACTSNOOP_ORDER_ROWS - 1 ? " and above" : "");
        fmt::print("{}", render_log2_hist(d, "usecs"));
    }
    // Runs of this interval whose start had no room in the per-thread table: its histograms
    // lack them.
    const uint64_t full =
        skel.bss->table_full - std::exchange(table_full_before_, skel.bss->table_full);
    if (o_.common.json)
        print_json_line(interval_line,
                        {{"time", wall_clock_time()}, {"histograms", hists}, {"table_full", full}});
    else if (full != 0)
        fmt::print("\n{} compaction runs of this interval missing: a BPF table was full.\n", full);
}

void Compactsnoop::print_summary(compactsnoop_bpf &skel, const EventReader *events) {
    const auto *bss = skel.bss;
    compactsnoop::SummaryCounts c;
    std::copy(&bss->summary[0][0],
              &bss->summary[0][0] + COMPACTSNOOP_KINDS * COMPACTSNOOP_MAX_STATUS, &c.summary[0][0]);
    std::copy(std::begin(bss->deferred), std::end(bss->deferred), std::begin(c.deferred));
    c.direct_entries = bss->direct_entries;
    c.direct_entries_run = bss->direct_entries_run;
    c.kcompactd_wakes = bss->kcompactd_wakes;
    c.unpaired_ends = bss->unpaired_ends;
    c.table_full = bss->table_full;
    // Records the BPF side could not reserve or write, and those a perf buffer lost.
    c.lost_events = events != nullptr ? events->lost(bss->dropped_events) : bss->dropped_events;
    if (events != nullptr)
        c.events_name = events->name();
    c.skipped_runs = recursion_misses(skel.obj);
    c.kind_mask = kind_mask_;
    if (o_.common.json) {
        print_json_line(summary_line, compactsnoop::summary_json(c, names_));
        return;
    }
    // The text summary goes to stderr: stdout carries the header and the rows only, so that
    // a pipe into awk or sort reads rows and nothing else (BCC's tools print no summary),
    // while the summary still shows on the terminal and in logs. The rows printed go first
    // (and a stdout that cannot be written fails the tool here, as at each interval).
    flush_output();
    fmt::print(stderr, "{}", compactsnoop::summary_text(c, names_));
}

void Compactsnoop::write_profile(compactsnoop_bpf &skel) {
    if (!stacks_)
        stacks_.emplace(skel.maps.stacks, ksyms_ ? &*ksyms_ : nullptr);
    StackProfileBuilder builder(*stacks_, {{"runs", "count"}, {"compaction_time", "nanoseconds"}},
                                1);
    for (const auto &[key, value] : profiled_) {
        const auto &[kind, pid, comm, kernel_stack] = key;
        const char *kind_name = compactsnoop::kind_name(kind);
        // The kind, then the process, as the root frames; kernel stacks only.
        builder.add({kind_name, fmt::format("{}-{}", comm, pid)}, kernel_stack,
                    MEMLAT_STACK_NO_USER, pid, {value.first, value.second},
                    {{.key = "kind", .text = kind_name},
                     {.key = "pid", .number = pid},
                     {.key = "comm", .text = comm}});
    }
    profile::Profile p = builder.take(started_);
    p.comments.push_back("memlat compactsnoop: compaction runs and their time by kind, process "
                         "and the kernel stack that began them");
    profile_out_.write(p, 1);
}

CountedLosses Compactsnoop::collect(prometheus::Exposition &out) {
    compactsnoop::Counts &c = counts_;
    const auto *bss = skel().bss;
    for (uint32_t k = 0; k < COMPACTSNOOP_KINDS; ++k) {
        std::copy(std::begin(bss->summary[k]), std::end(bss->summary[k]), c.summary[k].begin());
        for (uint32_t row = 0; row < COMPACTSNOOP_ORDER_ROWS; ++row) {
            std::copy(std::begin(bss->hist[k][row]), std::end(bss->hist[k][row]),
                      c.hist_us[k][row].begin());
            c.hist_sum_ns[k][row] = bss->hist_sum_ns[k][row];
        }
        c.deferred[k] = bss->deferred[k];
    }
    c.kcompactd_wakes = bss->kcompactd_wakes;
    compactsnoop::collect_metrics(
        c, [this](int32_t st) { return compactsnoop::status_name(st, names_); }, getpagesize(),
        out);
    return CountedLosses{bss->dropped_events, bss->table_full, bss->unpaired_ends};
}

} // namespace memlat::compactsnoop
