// memstall, what is read back: the intervals' rows, the stalled stacks, the profiles (files
// and /debug/pprof/memstall) and the Prometheus families.
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <utility>

#include "base/errors.h"
#include "base/files.h"
#include "base/profile.h"
#include "cli/multicall.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/profile_output.h"
#include "cli/run_loop.h"
#include "kernel/cgroups.h"
#include "kernel/features.h"
#include "kernel/tasks.h"
#include "kernel/types.h"
#include "loading/events.h"
#include "loading/loader.h"
#include "loading/stack_profile.h"
#include "loading/stacks.h"
#include "loading/symbols.h"
#include "memlat/memstall.h"
#include "memstall.skel.h"
#include "memstall_metrics.h"
#include "prometheus/exporter.h"
#include "prometheus/metrics_serving.h"
#include "prometheus/process_metrics.h"
#include "sources/stall_source.h"
#include "sources/stalls.h"
#include "tool/tool.h"
using nlohmann::json;

#include "memstall_tool.h"

namespace memlat::memstall {

void Memstall::print_interval(memstall_bpf &skel) {
    const auto now_time = std::chrono::steady_clock::now();
    const double interval_s = std::chrono::duration<double>(now_time - last_print_).count();
    last_print_ = now_time;
    memstall::Snapshot now = take_snapshot();
    const auto grouping = o_.per_cgroup ? memstall::Grouping::Cgroup : memstall::Grouping::Process;
    std::map<uint64_t, std::string> paths;
    if (o_.per_cgroup) {
        paths = cgroup_paths(memcg_on_v1_);
        if (births_) {
            births_->add_to(paths);
            births_->teach(names_);
        }
    }
    auto rows = memstall::rows(now, before_, grouping, paths);
    // Only what stalled; with -p the process asked for has a row even at zero.
    std::erase_if(rows, [](const memstall::Row &r) { return r.total_ns() == 0; });
    if (grouping == memstall::Grouping::Process && o_.pid &&
        std::none_of(rows.begin(), rows.end(), [&](const memstall::Row &r) {
            return r.id == static_cast<uint64_t>(*o_.pid);
        })) {
        memstall::Row zero;
        zero.id = *o_.pid;
        zero.name = read_text_file(fmt::format("/proc/{}/comm", *o_.pid)).value_or("");
        while (!zero.name.empty() && zero.name.back() == '\n')
            zero.name.pop_back();
        rows.push_back(zero);
    }
    // Rows -r leaves out are summed, not dropped: rows + left_out_total = total.
    memstall::ShownRows shown = memstall::cut_rows(std::move(rows), o_.max_rows);
    // Titles and names of the rows shown only: a title's read takes the process's mmap_lock,
    // a name's reads the runtime's records.
    if (grouping == memstall::Grouping::Process)
        for (memstall::Row &r : shown.rows)
            r.title = titles_.of(static_cast<uint32_t>(r.id));
    if (o_.per_cgroup) {
        names_.forget_others(paths);
        for (memstall::Row &r : shown.rows)
            if (paths.contains(r.id))
                r.workload = names_.of(r.id, r.name);
    }

    if (o_.common.json) {
        json list = json::array();
        for (const auto &r : shown.rows)
            list.push_back(memstall::json_row(r, interval_s, grouping));
        json out = {{"time", wall_clock_time()},
                    {"interval_s", interval_s},
                    {o_.per_cgroup ? "cgroups" : "processes", list},
                    {"table_full", skel.bss->table_full},
                    {"unpaired_ends", skel.bss->unpaired_ends},
                    {"stack_failures", skel.bss->stack_failures},
                    {"unseen_switch_ins", skel.bss->unseen_switch_ins},
                    {"frames_unnamed", skel.bss->frames_unnamed}};
        // What this host cannot measure, so that a 0 is not read as "no stall".
        json unmeasured = json::object();
        for (const auto &[cause, why] : unmeasured_)
            unmeasured[memstall::cause_name(cause)] = why;
        out["unmeasured_causes"] = unmeasured;
        memstall::json_totals(shown, out);
        // The interval's share of the program runs the kernel skipped: stalls not counted.
        const uint64_t skipped = recursion_misses(skel.obj);
        out[skipped_runs_field] = skipped - skipped_runs_before_;
        skipped_runs_before_ = skipped;
        print_json_line(interval_line, out);
    } else {
        fmt::print("\n{}  memory stalls over {:.1f} s\n{}\n", wall_clock_time(), interval_s,
                   memstall::header(grouping));
        for (const auto &r : shown.rows)
            fmt::print("{}\n", memstall::line(r, interval_s, grouping));
        if (const std::string more = memstall::left_out_line(shown, grouping); !more.empty())
            fmt::print("{}\n", more);
        if (skel.bss->table_full != 0)
            fmt::print("{} stalls not counted so far: a BPF table was full (--max-entries).\n",
                       skel.bss->table_full);
    }
    before_ = std::move(now);
    if (births_)
        births_->interval_ended();
}

memstall::Snapshot Memstall::take_snapshot() {
    memstall_bpf &skel = this->skel();
    const auto entries = read_hash_map<memstall_key, memstall_value>(skel.maps.stalls);
    memstall::Snapshot now;
    for (const auto &[key, value] : entries)
        now[{key.tid, key.cause}] = value;
    // Threads that are gone stall no more: their totals are in this snapshot, their entries
    // go, and the table keeps room for the threads that live.
    delete_exited_tasks(skel.maps.stalls, entries, [](const memstall_key &k) { return k.tid; });
    return now;
}

std::vector<memstall::StallStack> Memstall::stalled_stacks(std::optional<uint32_t> pid,
                                                           size_t per_cause) const {
    StackSymbolizer symbolizer(skel().maps.stack_traces);
    auto rows = read_hash_map<memstall_stack_key, memstall_stack_value>(skel().maps.stack_totals);
    if (pid)
        std::erase_if(rows, [&](const memstall::StackRow &r) { return r.first.pid != *pid; });
    std::vector<memstall::StallStack> stacks;
    for (auto &row : memstall::most_stalled_stacks(std::move(rows), per_cause)) {
        auto kernel = symbolizer.kernel(row.first.kernel_stack);
        auto user = symbolizer.user(row.first.user_stack, row.first.pid);
        stacks.push_back({row, std::move(kernel), std::move(user)});
    }
    return stacks;
}

void Memstall::print_stacks() {
    const auto stacks = stalled_stacks(std::nullopt, stacks_per_cause);
    if (o_.common.json) {
        json out = memstall::stacks_json(stacks);
        out["stacks_lost"] = skel().bss->stacks_lost;
        print_json_line(summary_line, out);
    } else {
        fmt::print("{}", memstall::stacks_text(stacks));
    }
}

profile::Profile Memstall::stall_profile(StackSymbolizer &symbolizer,
                                         std::chrono::system_clock::time_point began) {
    StackProfileBuilder builder(symbolizer, {{"stalls", "count"}, {"stall_time", "nanoseconds"}},
                                1);
    const auto paths = cgroup_paths(memcg_on_v1_);
    for (const auto &[key, value] :
         read_hash_map<memstall_stack_key, memstall_stack_value>(skel().maps.stack_totals)) {
        const std::string comm = memstall::stack_comm(value);
        const auto path = paths.find(value.cgroup_id);
        std::vector<profile::Label> labels{
            {.key = "cause", .text = memstall::cause_name(key.cause)},
            {.key = "pid", .number = key.pid},
            {.key = "comm", .text = comm}};
        if (path != paths.end())
            labels.push_back({.key = "cgroup", .text = path->second});
        // The cause, then the process, as the root frames of a flame graph.
        builder.add({memstall::cause_name(key.cause), fmt::format("{}-{}", comm, key.pid)},
                    key.kernel_stack, key.user_stack, key.pid,
                    {static_cast<int64_t>(value.stalls), static_cast<int64_t>(value.total_ns)},
                    std::move(labels));
    }
    profile::Profile p = builder.take(began);
    p.comments.push_back("memlat memstall: wall time of memory stalls ended in the profile, by "
                         "cause (label cause), process and stack");
    return p;
}

void Memstall::begin() {
    // What the last profile left (and what a program still running when it ended added),
    // and stacks no stall refers to any more.
    clear_map<memstall_stack_key>(skel().maps.stack_totals);
    clear_map<uint32_t>(skel().maps.stack_traces);
    profile_began_ = std::chrono::system_clock::now();
    __atomic_store_n(&skel().bss->stacks_paused, 0, __ATOMIC_RELEASE);
}

std::string Memstall::end() {
    __atomic_store_n(&skel().bss->stacks_paused, 1, __ATOMIC_RELEASE);
    // Kernel frames as the kernel describes them; without that (before 5.16) they cannot be
    // told from the BPF machinery and are left out: an empty table says so.
    const KernelSymbols none;
    StackSymbolizer symbolizer(skel().maps.stack_traces,
                               profile_symbols_ ? &*profile_symbols_ : &none);
    profile::Profile p = stall_profile(symbolizer, profile_began_);
    if (!profile_symbols_)
        p.comments.push_back("kernel frames left out: the kernel cannot describe addresses to "
                             "this exporter (Linux 5.16 or later can)");
    return profile::gzip(profile::encode_pprof(p));
}

void Memstall::write_profiles() {
    StackSymbolizer symbolizer(skel().maps.stack_traces);
    const profile::Profile p = stall_profile(symbolizer, started_);
    profile_out_.write(p, o_.folded_counts ? 0 : 1);
    if (skel().bss->table_full != 0)
        fmt::print(stderr,
                   "memstall: {} stalls are not in the profile: a BPF table was full "
                   "(--max-entries)\n",
                   skel().bss->table_full);
}

CountedLosses Memstall::collect(prometheus::Exposition &out) {
    memstall_bpf &skel = this->skel();
    memstall::Counts &counts = counts_;
    std::copy(std::begin(skel.bss->totals), std::end(skel.bss->totals), counts.totals.begin());
    if (o_.prom.label("cgroup")) {
        counts.threads = read_hash_map<memstall_key, memstall_value>(skel.maps.stalls);
        counts.cgroup_paths = cgroup_cache_.paths_of(
            counts.threads, [](const auto &entry) { return entry.second.cgroup_id; });
        counts.cgroup_exists = [this](const std::string &path) {
            return cgroup_cache_.exists(path);
        };
        counts.cgroup_workloads = metric_names_.of_each(counts.cgroup_paths, counts.cgroup_exists);
    }
    metrics_->collect(counts, out);
    // Threads that are gone stall no more: their counts are in the series now, their
    // entries go, and the table keeps room for the threads that live.
    delete_exited_tasks(skel.maps.stalls, counts.threads,
                        [](const memstall_key &k) { return k.tid; });
    return CountedLosses{0, skel.bss->table_full, skel.bss->unpaired_ends,
                         o_.serve_profiles ? std::optional<uint64_t>(skel.bss->stacks_lost)
                                           : std::nullopt};
}

} // namespace memlat::memstall
