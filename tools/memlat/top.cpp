// memlat top: which memory cgroups are stalled on memory right now, by what, next to their
// memory, limits, limit events and PSI, and the host's; refreshed every INTERVAL seconds.
// The stall time is memstall's (its BPF side loaded with no filter, memstall_source.h); the
// rest is what the kernel's files say (kernel/memory_state.h), read only for the rows shown.
//
// This first step draws the screen by clearing it and printing the rows again (-b: text rows
// per interval for a pipe, -j: JSON lines); the keyboard-driven view (sorting, drilling into
// processes and stacks, replay) is issue 30's next step.
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/errors.h"
#include "base/files.h"
#include "cli/multicall.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/run_loop.h"
#include "kernel/cgroups.h"
#include "kernel/memory_state.h"
#include "memlat/top_format.h"
#include "memstall/memstall_source.h"

namespace memlat {

namespace {

constexpr const char *command_name = "memlat top";

constexpr const char *description =
    R"(Show which memory cgroups are stalled on memory right now and by what, with
their memory, limits and limit events, under the host's memory, PSI, stall
time per cause and reclaim rates; refreshed every INTERVAL seconds (default 1).

The stall time per cause is memstall's (memstall -h explains the causes and
what each needs); a cause this host cannot measure shows "-" in the header,
and -j lists it with the reason. STALL% is a cgroup's stall time as a share
of the interval: several stalled tasks can pass 100%. USAGE and LIMIT are
memory.current and memory.max (cgroup v2; memory.high instead when lower,
marked h) or memory.usage_in_bytes and memory.limit_in_bytes (v1); EVENTS
counts the limit being met since top started: max (v1: memory.failcnt),
then /high on cgroup v2, and Kn for n OOM kills. PSI% is the cgroup's own
memory.pressure "some" share (cgroup v2).

Rows are the cgroups that stalled in the interval, busiest first (-a: every
memory cgroup). On a terminal the screen is redrawn each interval; -b prints
the rows as text per interval (as top -b), -j as JSON lines.)";

constexpr const char *examples = R"(Examples:
  memlat top                the live view, every second
  memlat top 5              every 5 seconds
  memlat top -b 1 10        ten intervals of text rows, for a pipe or a log
  memlat top -j -d 60 > stalls.json
                            JSON lines for a minute
  memlat top -a -b 2 1      one interval of every memory cgroup

)";

struct TopOptions {
    CommonOptions common;
    bool batch = false;
    bool all = false;
    uint32_t rows = 0; // 0: what fits the terminal, 20 in batch and JSON
};

// The terminal's size, or nothing when stdout is none.
std::optional<winsize> terminal_size() {
    winsize ws{};
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0 || ws.ws_col == 0)
        return std::nullopt;
    return ws;
}

// Columns of a row besides the path (top_format.cpp's row_text()).
constexpr size_t fixed_columns = 21 + 8 * MEMSTALL_CAUSES + 16;
constexpr size_t min_path_width = 16, batch_path_width = 32;

class Top {
  public:
    Top(const TopOptions &o, std::unique_ptr<memstall::StallSource> source, bool full_screen)
        : o_(o), source_(std::move(source)), full_screen_(full_screen),
          v1_(source_->memcg_on_v1()) {
        before_ = source_->take_snapshot();
        host_before_ = read_host_memory();
        rescan_cgroups();
        // The events and PSI of every cgroup now: what they reach is counted from here. A
        // cgroup made later counts from 0, which is when it began.
        for (const auto &[id, dir] : dirs_) {
            CgroupMemory m = read_cgroup_memory(dir, v1_);
            events_at_start_[id] = m.events;
            if (m.pressure)
                psi_before_[id] = {m.pressure->some->total_us, 0};
        }
        last_ = std::chrono::steady_clock::now();
    }

    void refresh();

  private:
    void rescan_cgroups();
    top::CgroupInterval cgroup_row(uint64_t id, const top::CauseTimes &stalls);
    void print(const top::HostInterval &host, std::vector<top::CgroupInterval> rows);

    const TopOptions &o_;
    std::unique_ptr<memstall::StallSource> source_;
    const bool full_screen_;
    const bool v1_;
    memstall::Snapshot before_;
    HostMemory host_before_;
    std::map<uint64_t, std::string> dirs_; // cgroup id -> its directory
    std::string mount_;                    // the hierarchy's root directory
    std::map<uint64_t, std::map<std::string, uint64_t>> events_at_start_;
    // cgroup id -> memory.pressure's some total and the refresh it was read at (0: start): a
    // row has a PSI share only when its total was read at the refresh before, or else the
    // difference would span several intervals.
    std::map<uint64_t, std::pair<uint64_t, uint64_t>> psi_before_;
    uint64_t refreshes_ = 0;
    std::chrono::steady_clock::time_point last_;
};

void Top::rescan_cgroups() {
    dirs_ = cgroup_paths(v1_);
    mount_.clear();
    for (const auto &[id, dir] : dirs_)
        if (mount_.empty() || dir.size() < mount_.size())
            mount_ = dir;
}

top::CgroupInterval Top::cgroup_row(uint64_t id, const top::CauseTimes &stalls) {
    top::CgroupInterval row;
    row.id = id;
    row.stalls = stalls;
    auto dir = dirs_.find(id);
    if (dir == dirs_.end()) {
        row.path = fmt::format("(cgroup id {}, gone)", id);
        return row;
    }
    row.path = dir->second.substr(std::min(mount_.size(), dir->second.size()));
    if (row.path.empty())
        row.path = "/";
    row.memory = read_cgroup_memory(dir->second, v1_);
    const auto &start = events_at_start_[id];
    for (const auto &[name, count] : row.memory.events) {
        auto was = start.find(name);
        row.events_since_start[name] =
            count - std::min(count, was != start.end() ? was->second : 0);
    }
    if (row.memory.pressure) {
        const uint64_t total = row.memory.pressure->some->total_us;
        auto was = psi_before_.find(id);
        if (was != psi_before_.end() && was->second.second + 1 == refreshes_)
            row.psi_some_us = total - std::min(total, was->second.first);
        psi_before_[id] = {total, refreshes_};
    }
    return row;
}

void Top::refresh() {
    ++refreshes_;
    const auto now_time = std::chrono::steady_clock::now();
    top::HostInterval host;
    host.interval_s = std::chrono::duration<double>(now_time - last_).count();
    last_ = now_time;

    memstall::Snapshot now = source_->take_snapshot();
    auto stalled = memstall::rows(now, before_, memstall::Grouping::Cgroup, {});
    before_ = std::move(now);
    std::erase_if(stalled, [](const memstall::Row &r) { return r.total_ns() == 0; });

    host.now = read_host_memory();
    for (const auto &[name, value] : host.now.vmstat) {
        auto was = host_before_.vmstat.find(name);
        if (was != host_before_.vmstat.end() && value >= was->second)
            host.vmstat_delta[name] = value - was->second;
    }
    if (host.now.pressure && host_before_.pressure) {
        host.psi_some_us =
            host.now.pressure->some->total_us - host_before_.pressure->some->total_us;
        if (host.now.pressure->full && host_before_.pressure->full)
            host.psi_full_us =
                host.now.pressure->full->total_us - host_before_.pressure->full->total_us;
    }
    host_before_ = host.now;
    host.stalls = top::total_stalls(stalled);
    host.cgroups_stalled = stalled.size();

    // A cgroup id not seen before is a cgroup made since: look at the hierarchy again (-a
    // lists every cgroup, so it looks each time).
    if (o_.all || std::any_of(stalled.begin(), stalled.end(),
                              [&](const memstall::Row &r) { return !dirs_.contains(r.id); }))
        rescan_cgroups();
    std::vector<top::CgroupInterval> rows;
    std::map<uint64_t, top::CauseTimes> stalls_of;
    for (const auto &r : stalled)
        stalls_of[r.id] = r.causes;
    if (o_.all) {
        for (const auto &[id, dir] : dirs_)
            rows.push_back(cgroup_row(id, stalls_of[id]));
    } else {
        for (const auto &[id, causes] : stalls_of)
            rows.push_back(cgroup_row(id, causes));
    }
    top::sort_busiest(rows);
    print(host, std::move(rows));
}

void Top::print(const top::HostInterval &host, std::vector<top::CgroupInterval> rows) {
    const std::string time = wall_clock_time();
    const auto &unmeasured = source_->unmeasured();
    if (o_.common.json) {
        if (rows.size() > (o_.rows != 0 ? o_.rows : 20))
            rows.resize(o_.rows != 0 ? o_.rows : 20);
        auto j = top::snapshot_json(host, rows, unmeasured, time);
        j["table_full"] = source_->table_full();
        print_json_line(j);
        return;
    }
    std::string header = top::header_text(host, unmeasured, time);
    if (const uint64_t lost = source_->table_full(); lost != 0)
        header += fmt::format("{} stalls not counted so far: memstall's table was full "
                              "(--max-entries)\n",
                              lost);
    if (!full_screen_) {
        const size_t shown = o_.rows != 0 ? o_.rows : 20;
        if (rows.size() > shown)
            rows.resize(shown);
        fmt::print("\n{}{}\n", header, top::table_heading(batch_path_width));
        for (const auto &r : rows)
            fmt::print("{}\n", top::row_text(r, host.interval_s, batch_path_width));
        flush_output();
        return;
    }
    // The screen: cleared, then the header and as many rows as fit, each cut to its width.
    const winsize ws = terminal_size().value_or(winsize{24, 80, 0, 0});
    const size_t columns = ws.ws_col;
    const size_t path_width =
        columns > fixed_columns + min_path_width ? columns - fixed_columns : min_path_width;
    const size_t header_lines = std::count(header.begin(), header.end(), '\n') + 1;
    size_t fit = ws.ws_row > header_lines + 1 ? ws.ws_row - header_lines - 1 : 0;
    if (o_.rows != 0)
        fit = std::min<size_t>(fit, o_.rows);
    if (rows.size() > fit)
        rows.resize(fit);
    std::vector<std::string> lines;
    std::string_view rest = header;
    for (std::string_view line; next_line(rest, line);)
        lines.emplace_back(line);
    lines.push_back(top::table_heading(path_width));
    for (const auto &r : rows)
        lines.push_back(top::row_text(r, host.interval_s, path_width));
    // Home and clear, then each line cut to the width; the last without its newline, so that
    // a full screen does not scroll.
    std::string out = "\033[H\033[2J";
    for (size_t i = 0; i < lines.size(); ++i) {
        out += lines[i].substr(0, std::min(lines[i].size(), columns));
        if (i + 1 < lines.size())
            out += '\n';
    }
    fmt::print("{}", out);
    flush_output();
}

int run_top(int argc, char **argv) {
    TopOptions o;
    o.common.interval = 1;
    CommandLine cli(command_name, description,
                    examples + environment_help(true, tracepoint_hook_kinds));
    cli.flag('b', "batch", "Text rows per interval instead of the live screen (as top -b)",
             o.batch);
    cli.flag('a', "all", "A row for every memory cgroup, not only those that stalled", o.all);
    cli.option('r', "rows", "ROWS",
               "Show at most ROWS cgroups (default: what fits the terminal; 20 with -b, -j)",
               o.rows);
    cli.flag('j', "json",
             "JSON lines on stdout instead of the screen: one object per interval (schema in "
             "docs/output.md)",
             o.common.json);
    add_run_options(cli, o.common);
    add_max_entries_option(cli, o.common);
    add_interval_arguments(cli, o.common, "refresh every INTERVAL seconds (default 1)");
    cli.parse(argc, argv);
    const bool full_screen = !o.batch && !o.common.json;
    if (full_screen && !isatty(STDOUT_FILENO))
        throw UsageError("stdout is not a terminal: -b prints text rows per interval (as "
                         "top -b), -j JSON lines");
    require_stdout();
    auto source = memstall::load_stall_source(o.common);
    install_stop_signals();
    Top top(o, std::move(source), full_screen);
    announce_tracing("Watching memory stalls per cgroup...");
    const bool done = run_until_stopped(o.common, sleep_for, [&] { top.refresh(); });
    // Stopped by a signal or -d within an interval: its rows too, so that every stall since
    // start is in some interval of -b and -j.
    if (!done && !full_screen)
        top.refresh();
    if (full_screen)
        fmt::print("\n");
    flush_output();
    return 0;
}

} // namespace

int top_main(int argc, char **argv) {
    return run_tool(command_name, [&] { return run_top(argc, argv); });
}

} // namespace memlat
