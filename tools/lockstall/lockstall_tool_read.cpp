// lockstall, what is read back: the waits' lines, the summary at exit and the Prometheus
// families.
#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <span>

#include "cli/output.h"
#include "loading/loader.h"
#include "loading/stack_profile.h"
#include "lockstall_tool.h"

using nlohmann::json;

namespace memlat::lockstall {

std::string Lockstall::operation(int32_t stack_id) {
    if (stack_id < 0 || !symbolizer_)
        return "?";
    return operation_of(symbolizer_->kernel(stack_id));
}

void Lockstall::profile_wait(const lockstall_wait &e, const std::vector<lockstall_hold> &holders,
                             const std::vector<std::string> &ops) {
    const lockstall_hold *root = holders.empty() ? nullptr : &holders[0];
    auto &[waits, ns] = profiled_[{e.pid, comm_text(e.comm), e.write != 0, e.stack_id,
                                   root ? root->pid : 0, root ? comm_text(root->comm) : "",
                                   root ? ops[0] : "", root ? root->stack_id : -1}];
    ++waits;
    ns += static_cast<int64_t>(e.wait_ns);
}

void Lockstall::write_profile() {
    StackProfileBuilder builder(*symbolizer_, {{"waits", "count"}, {"wait_time", "nanoseconds"}},
                                1);
    for (const auto &[key, value] : profiled_) {
        const auto &[pid, comm, write, stack, root_pid, root_comm, root_op, root_stack] = key;
        const std::string_view monitor = monitor_of(root_comm);
        // The waiter's process and mode as the root frames, its stack, then the hold it queued
        // behind and that holder's stack on top.
        const std::string link =
            root_pid == 0
                ? std::string("behind no hold kept (--min-hold)")
                : fmt::format("behind {}-{} {}{}", root_comm, root_pid, root_op,
                              monitor.empty() ? "" : fmt::format(" [monitor: {}]", monitor));
        std::vector<profile::Label> labels{{.key = "pid", .number = pid},
                                           {.key = "comm", .text = comm},
                                           {.key = "mode", .text = mode_name(write)}};
        if (root_pid != 0) {
            labels.push_back({.key = "root_pid", .number = root_pid});
            labels.push_back({.key = "root_comm", .text = root_comm});
            labels.push_back({.key = "root_op", .text = root_op});
            if (!monitor.empty())
                labels.push_back({.key = "monitor", .text = std::string(monitor)});
        }
        builder.add_chain(
            {fmt::format("mmap_lock {}", mode_name(write)), fmt::format("{}-{}", comm, pid)}, stack,
            link, root_stack, {value.first, value.second}, std::move(labels));
    }
    profile::Profile p = builder.take(started_);
    p.comments.push_back("memlat lockstall: waits for mmap_lock of -m or more and their time, by "
                         "waiter and its kernel stack, topped by the hold they queued behind");
    profile_out_.write(p, 1);
}

void Lockstall::print_event(const lockstall_wait &e) {
    if (first_ns_ == 0)
        first_ns_ = e.ts_ns - e.wait_ns;
    const double time_s = static_cast<double>(static_cast<int64_t>(e.ts_ns - first_ns_)) / 1e9;
    const std::string op = operation(e.stack_id);
    const std::vector<lockstall_hold> holders = holders_of(e);
    std::vector<std::string> ops;
    for (const lockstall_hold &h : holders)
        ops.push_back(operation(h.stack_id));
    if (profile_out_.wanted()) {
        profile_wait(e, holders, ops);
        if (profile_out_.replaces_output())
            return;
    }
    // What runs in the waiter's cgroup: a pod's container, a Docker or Podman container, a
    // unit (docs/names.md).
    const uint64_t cgroup_id = e.cgroup_id;
    const auto path = event_cgroups_.paths_of(std::span(&cgroup_id, 1));
    const Workload *workload =
        path.empty() ? nullptr : &event_names_.of(cgroup_id, path.begin()->second);
    if (o_.common.json) {
        json j = wait_json(e, time_s, op, holders, ops);
        j["cgroup"] = path.empty() ? json(nullptr) : json(path.begin()->second);
        j["workload"] = workload ? workload_json(*workload) : json(nullptr);
        if (o_.stacks) {
            j["stack"] = symbolizer_->kernel(e.stack_id);
            for (size_t i = 0; i < holders.size(); ++i)
                j["holders"][i]["stack"] = symbolizer_->kernel(holders[i].stack_id);
        }
        if (o_.common.timestamp)
            j["wall_time"] = wall_clock_time();
        print_json_line(event_line, j);
        return;
    }
    std::string line = wait_line(e, time_s, op, format_);
    if (workload != nullptr && (workload->kind == "container" || workload->kind == "pod"))
        line += fmt::format("  [{}]", workload->display());
    fmt::print("{}\n", line);
    if (o_.stacks)
        for (const std::string &frame : symbolizer_->kernel(e.stack_id))
            fmt::print("        {}\n", frame);
    for (size_t i = 0; i < holders.size(); ++i) {
        fmt::print("{}\n", holder_line(holders[i], i == 0, ops[i]));
        if (o_.stacks)
            for (const std::string &frame : symbolizer_->kernel(holders[i].stack_id))
                fmt::print("        {}\n", frame);
    }
    if (e.holders_missing)
        fmt::print("  (more holders than kept: the oldest are not shown)\n");
    else if (holders.empty())
        fmt::print("  (no hold of --min-hold or more ended during it)\n");
}

void Lockstall::print_summary(lockstall_bpf &skel, const EventReader *events) {
    const uint64_t lost =
        events != nullptr ? events->lost(skel.bss->dropped_events) : skel.bss->dropped_events;
    auto rows = read_hash_map<lockstall_proc_key, lockstall_summary>(skel.maps.summaries);
    std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
        return a.second.total_ns != b.second.total_ns ? a.second.total_ns > b.second.total_ns
                                                      : a.first.pid < b.first.pid;
    });
    const auto *bss = skel.bss;
    if (o_.common.json) {
        json list = json::array(), totals = json::array();
        for (const auto &[k, s] : rows)
            list.push_back({{"pid", k.pid},
                            {"comm", comm_text(s.comm)},
                            {"mode", mode_name(k.write)},
                            {"waits", s.waits},
                            {"total_ns", s.total_ns},
                            {"total_ms", s.total_ns / 1e6},
                            {"max_ns", s.max_ns},
                            {"max_ms", s.max_ns / 1e6}});
        for (int w = 0; w < 2; ++w)
            totals.push_back({{"mode", mode_name(w)},
                              {"waits", bss->totals[w].waits},
                              {"total_ns", bss->totals[w].total_ns},
                              {"slow_waits", bss->totals[w].slow_waits},
                              {"slow_ns", bss->totals[w].slow_ns}});
        print_json_line(summary_line, {{"summary", list},
                                       {"totals", totals},
                                       {"lost_events", lost},
                                       {"stacks_lost", bss->stacks_lost},
                                       {"table_full", bss->table_full},
                                       {skipped_runs_field, recursion_misses(skel.obj)}});
        return;
    }
    flush_output();
    fmt::print(stderr, "\nWaits for mmap_lock of {:g} ms or more, by process:\n", o_.min_wait_ms);
    fmt::print(stderr, "{:<7} {:<16} {:<5} {:>8} {:>12} {:>10}\n", "PID", "COMM", "MODE", "WAITS",
               "TOTAL(ms)", "MAX(ms)");
    for (const auto &[k, s] : rows)
        fmt::print(stderr, "{:<7} {:<16} {:<5} {:>8} {:>12.3f} {:>10.3f}\n", k.pid,
                   comm_text(s.comm), mode_name(k.write), s.waits, s.total_ns / 1e6,
                   s.max_ns / 1e6);
    for (int w = 0; w < 2; ++w)
        fmt::print(stderr, "All {} waits: {} ({:.3f} ms), {} of them slow ({:.3f} ms)\n",
                   mode_name(w), bss->totals[w].waits, bss->totals[w].total_ns / 1e6,
                   bss->totals[w].slow_waits, bss->totals[w].slow_ns / 1e6);
    if (lost != 0)
        fmt::print(stderr, "\nLost {} waits: the {} was full (the summary still counts them).\n",
                   lost, events != nullptr ? events->name() : "ring buffer");
    if (bss->table_full != 0)
        fmt::print(stderr, "\n{} waits or holds not counted: a BPF table was full.\n",
                   bss->table_full);
    // Their OP is '?'.
    note_stacks_lost(tool_name, bss->stacks_lost, bpf_map__max_entries(skel.maps.stacks));
}

std::vector<const bpf_object *> Lockstall::helper_objects() const {
    if (kernel_symbols_ && kernel_symbols_->describer_object() != nullptr)
        return {kernel_symbols_->describer_object()};
    return {};
}

CountedLosses Lockstall::collect(prometheus::Exposition &out) {
    Counts counts;
    const auto *bss = skel().bss;
    for (int w = 0; w < 2; ++w) {
        counts.totals[w] = bss->totals[w];
        std::copy(std::begin(bss->hist[w]), std::end(bss->hist[w]), counts.hist_us[w].begin());
    }
    for (const auto &[key, value] :
         read_hash_map<lockstall_cause_key, lockstall_cause>(skel().maps.causes)) {
        const bool rooted = key.root_kind != LOCKSTALL_ROOT_NONE;
        counts.causes.push_back({key, value, operation(key.stack_id),
                                 rooted ? comm_text(key.root_comm) : "",
                                 rooted ? operation(key.root_stack_id) : ""});
    }
    if (o_.prom.label("cgroup")) {
        // Looked up after the table was read: a cgroup it has and this does not was removed,
        // and its entries go.
        counts.cgroup_paths = cgroup_paths_.paths_of(
            counts.causes, [](const Cause &cause) { return cause.key.cgroup_id; });
        for (const Cause &cause : counts.causes)
            if (!counts.cgroup_paths.contains(cause.key.cgroup_id))
                bpf_map__delete_elem(skel().maps.causes, &cause.key, sizeof(cause.key), 0);
        counts.cgroup_workloads =
            metric_names_.of_each(counts.cgroup_paths, [this](const std::string &path) {
                return cgroup_paths_.exists(path);
            });
    }
    metrics_->collect(counts, out);
    return CountedLosses{bss->dropped_events, bss->table_full, 0};
}

} // namespace memlat::lockstall
