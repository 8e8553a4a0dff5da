// memlat top: which memory cgroups are stalled on memory right now, by what, next to their
// memory, limits, limit events and PSI, and the host's; refreshed every INTERVAL seconds.
// The stall time is memstall's (its BPF side loaded with no filter, memstall_source.h); the
// rest is what the kernel's files say (kernel/memory_state.h), read only for the rows shown.
//
// On a terminal it is a keyboard-driven screen (cli/terminal.h, ncurses): rows to select, sorted by
// a column the user picks, filtered, a cgroup opened into its processes and a process into its
// threads, held, with a help page. -b prints text rows per interval for a pipe, -j JSON lines.
// -o records the intervals (top_record.h), which -r replays on the same screen, or as -b and -j
// print them, without the BPF side; -s adds a process's most stalled stacks to its threads.
#include <sys/resource.h>
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
#include "cachestat/cachestat_source.h"
#include "cli/multicall.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/run_loop.h"
#include "cli/terminal.h"
#include "kernel/cgroup_names.h"
#include "kernel/cgroups.h"
#include "kernel/memory_state.h"
#include "loading/flush_path.h"
#include "memlat/top_format.h"
#include "memlat/top_record.h"
#include "memstall/memstall_source.h"
#include "prometheus/process_metrics.h"

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
memory.pressure "some" share (cgroup v2). RECL/s is the pages the cgroup's
own tasks freed per second in direct and limit reclaim (kswapd's are in the
header's rates only). HIT% is the share of its tasks' page-cache accesses
that hit, as cachestat counts them (cachestat -h), and the header's Mem line
gives the host's; its programs run on every read and page fault of the host
(--no-page-cache leaves them off).

Rows are the cgroups that stalled in the interval, busiest first (-a: every
memory cgroup). A screen too narrow for every cause (under 133 columns) gives
the causes with the most stall time a column each and sums the others in REST;
RECL/s and HIT% come after two causes (88 and 96 columns); header lines fold;
-b -w COLUMNS does the same to text rows. On a terminal
the screen is redrawn each interval; -b prints the rows as text per interval
(as top -b), -j as JSON lines.

Keys on the screen: Up/Down (k/j), PgUp/PgDn, Home/End select a cgroup;
Enter or Right opens it into its processes (and there a process into its
threads), Esc, Left or Backspace goes back;
< and > sort by another column; a shows every cgroup or only the stalled;
/ filters the rows by a text in their path or name; n shows the paths in
place of the names of pods, containers and units;
space holds the screen as it is (and space again goes on; the counting goes
on meanwhile); d or s changes the interval; h or ? shows the keys; q quits.
Rows that stalled are yellow, red from a STALL% of 10 (NO_COLOR: none).

-o FILE records every interval, with all its rows and the stalls of each
thread, as JSON lines (the objects of -j, docs/output.md); -r FILE replays a
record afterwards, without privileges: on the screen (one interval per
INTERVAL seconds; t and T step to the next and the previous, space holds),
or with -b or -j at once. A file of -j lines replays too, without the
processes and threads.)";

constexpr const char *examples = R"(Examples:
  memlat top                the live view, every second
  memlat top 5              every 5 seconds
  memlat top -b 1 10        ten intervals of text rows, for a pipe or a log
  memlat top -j -d 60 > stalls.json
                            JSON lines for a minute
  memlat top -a -b 2 1      one interval of every memory cgroup
  memlat top -o incident.json
                            the live view, recorded
  memlat top -r incident.json
                            the record replayed, with the same keys

)";

struct TopOptions {
    CommonOptions common;
    bool batch = false;
    bool all = false;
    uint32_t rows = 0;       // 0: what fits the terminal, 20 in batch and JSON
    std::string record_path; // -o
    std::string replay_path; // -r
    bool stacks = false;     // -s
    size_t width = 0;        // -w: -b's line width (0: every column, the path 32 wide)
    bool page_cache = true;  // --no-page-cache: none
};
// STALL% from which a row is drawn in red (else yellow, when it stalled at all).
constexpr double alarm_share = 10;
// -s: the stacks shown under a process's threads, per cause.
constexpr size_t stacks_per_cause = 1;

constexpr size_t min_path_width = 16, batch_path_width = 32;
// The smallest terminal the screen is drawn on: the header and a few rows.
constexpr size_t min_rows = 10, min_columns = 60;
// -a: the refreshes at which the cgroup tree is walked again for new cgroups.
constexpr uint64_t all_rescan_every = 5;

// The screen's state: what the user chose with the keys.
struct View {
    top::SortKey sort = top::SortKey::Stall;
    uint64_t selected = 0;              // the selected cgroup's id (0: the first row)
    std::optional<uint64_t> opened;     // the cgroup whose processes are shown
    uint64_t selected_pid = 0;          // the selected process there (0: the first)
    std::optional<uint64_t> opened_pid; // the process whose threads are shown
    size_t first_row = 0;               // the first row shown (scrolled)
    bool help = false;
    bool paused = false;
    bool names = true;                 // the CGROUP column shows what the path names, if known
    std::string filter;                // rows whose path or name has it (empty: every row)
    std::optional<std::string> typing; // the filter being typed after '/'...
    std::optional<std::string> typing_interval;          // ...or the interval after 'd'
    std::string message;                                 // said on the status line...
    std::chrono::steady_clock::time_point message_until; // ...until then
    void say(std::string text) {
        message = std::move(text);
        message_until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    }
};

constexpr const char *help_text[] = {
    "memlat top: keys",
    "",
    "  Up, k / Down, j     select the cgroup above / below",
    "  PgUp / PgDn         a screen up / down",
    "  Home / End          the first / the last cgroup",
    "  Enter, Right        open the selected cgroup into its processes, and there the",
    "                      selected process into its threads",
    "  Esc, Left, Bksp     back: from the threads to the processes, to the cgroups",
    "  < / >               sort by the column before / after",
    "  a                   every memory cgroup, or only those that stalled",
    "  /                   only the cgroups whose path or name has a text (Enter sets",
    "                      it, Esc leaves it as it was; an empty text shows all)",
    "  n                   names (pods, containers, units) or the cgroups' paths",
    "  space               hold the screen as it is / go on (counting goes on)",
    "  d, s                change the interval (seconds)",
    "  t / T               replay (-r): the next / the previous interval",
    "  h, ?                this page (any key returns)",
    "  q                   quit",
    "",
    "Columns: memlat top -h. Causes: memstall -h.",
};

// User and system CPU time of this process so far, in seconds.
double own_cpu_seconds() {
    rusage usage{};
    if (getrusage(RUSAGE_SELF, &usage) != 0)
        return 0;
    auto seconds = [](const timeval &t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
    return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

class Top {
  public:
    // Live: `source` is memstall's BPF side; each interval is appended to `record` (-o) unless
    // it is null. `o.common.interval` is changed by the d key.
    // `cache`: cachestat's, or null (not loaded: no page-cache columns).
    Top(TopOptions &o, std::unique_ptr<memstall::StallSource> source,
        std::unique_ptr<cachestat::CacheSource> cache, FullScreen *screen, OutputFile *record)
        : o_(o), source_(std::move(source)), cache_(std::move(cache)), screen_(screen),
          record_(record), v1_(source_->memcg_on_v1()), all_(o.all) {
        before_ = source_->take_snapshot();
        if (cache_)
            cache_before_ = cache_->take_snapshot();
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
        if (screen_ != nullptr)
            screen_->draw({"memlat top: counting the first interval..."});
    }
    // The replay of `recording` (-r): on the screen its first interval at once, and the next
    // at each refresh; with -b or -j, one interval each refresh.
    Top(TopOptions &o, const top::Recording &recording, FullScreen *screen)
        : o_(o), screen_(screen), replay_(&recording), v1_(false), all_(false) {
        if (screen_ != nullptr)
            show_recorded(0);
    }

    // An interval ends: its rows are read and shown.
    void refresh();
    // Keys pressed on the screen.
    void on_keys(const std::vector<Key> &keys);

  private:
    void rescan_cgroups();
    // The interval's page-cache counts of the host and per cgroup (none without cachestat's).
    void count_page_cache(top::HostInterval &host,
                          std::map<uint64_t, cachestat::Counts> &per_cgroup);
    // -r: shows the recorded interval `index` (the last when past it).
    void show_recorded(size_t index);
    // -o: appends the interval to the record.
    void record(const top::HostInterval &host, std::vector<top::CgroupInterval> &rows,
                const nlohmann::json &threads, const std::string &time);
    // A row's id, path, name and stall time; its files are read by read_files(), only for
    // the rows shown when the sort does not need them (-a with 1,000 cgroups: 5% of a core
    // reading every cgroup's files each second, bench/top_scale.py).
    top::CgroupInterval cgroup_row(uint64_t id, const top::CauseTimes &stalls);
    void read_files(top::CgroupInterval &row);
    size_t rows_wanted() const;
    void print_lines() const;
    void draw();
    // The processes of a cgroup, or the threads of one of its processes, that stalled in the
    // last interval, stalled the longest first.
    std::vector<memstall::Row> stalled_in(uint64_t cgroup, std::optional<uint64_t> pid) const;
    void draw_opened(std::vector<std::string> &lines, size_t fit, std::string &status);
    void add_stacks(std::vector<std::string> &lines, uint32_t pid) const;
    void move_in_processes(const Key &k);
    size_t table_rows() const;
    std::string full_header() const;
    // The rows the filter lets through, in order.
    std::vector<size_t> visible() const; // indices into rows_
    size_t selected_index() const;
    void select_index(size_t index);
    bool on_typing(const Key &k);

    TopOptions &o_;
    std::unique_ptr<memstall::StallSource> source_; // null in a replay
    std::unique_ptr<cachestat::CacheSource> cache_; // null in a replay or --no-page-cache
    cachestat::CgroupSnapshot cache_before_;
    FullScreen *screen_;                     // null with -b and -j
    const top::Recording *replay_ = nullptr; // -r
    size_t replay_at_ = 0;                   // the interval of the record shown
    bool threads_recorded_ = true;           // whether the replay has processes
    OutputFile *record_ = nullptr;           // -o
    const bool v1_;
    bool all_;
    View view_;
    memstall::Snapshot before_;
    // The last interval: its snapshots (for the processes of a cgroup), host and rows.
    memstall::Snapshot interval_before_, interval_now_;
    top::HostInterval host_;
    // Each cause's stall time over the intervals shown: which causes keep a column of their
    // own when the line is too narrow for all (top::fit_layout()).
    top::CauseTimes weights_{};
    std::vector<top::CgroupInterval> rows_;
    std::string time_; // when the interval ended
    std::map<uint32_t, std::string> unmeasured_;
    uint64_t table_full_ = 0;
    bool have_interval_ = false;
    // -s: the stacks of a process, as read at a refresh: (pid, refresh) and the stacks.
    mutable std::optional<
        std::pair<std::pair<uint32_t, uint64_t>, std::optional<std::vector<memstall::StallStack>>>>
        stacks_cache_;
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
    double cpu_before_ = own_cpu_seconds(); // at the last refresh
};

void Top::rescan_cgroups() {
    dirs_ = cgroup_paths(v1_);
    mount_.clear();
    for (const auto &[id, dir] : dirs_)
        if (mount_.empty() || dir.size() < mount_.size())
            mount_ = dir;
}

void Top::count_page_cache(top::HostInterval &host,
                           std::map<uint64_t, cachestat::Counts> &per_cgroup) {
    if (!cache_)
        return;
    cachestat::CgroupSnapshot now = cache_->take_snapshot();
    const bool accesses = cache_->accesses_known();
    host.page_cache =
        top::PageCache{now.total.since(cache_before_.total), accesses, now.table_full};
    // A cgroup id not in the tree is one made since the last walk, or one that is gone: walk
    // it again, and forget those still missing.
    if (std::any_of(now.cgroups.begin(), now.cgroups.end(),
                    [&](const auto &entry) { return !dirs_.contains(entry.first); }))
        rescan_cgroups();
    for (auto it = now.cgroups.begin(); it != now.cgroups.end();) {
        auto was = cache_before_.cgroups.find(it->first);
        per_cgroup[it->first] =
            was == cache_before_.cgroups.end() ? it->second : it->second.since(was->second);
        if (dirs_.contains(it->first)) {
            ++it;
        } else {
            cache_->forget(it->first);
            it = now.cgroups.erase(it);
        }
    }
    cache_before_ = std::move(now);
}

top::CgroupInterval Top::cgroup_row(uint64_t id, const top::CauseTimes &stalls) {
    top::CgroupInterval row;
    row.id = id;
    row.stalls = stalls;
    auto dir = dirs_.find(id);
    if (dir == dirs_.end()) {
        row.path = fmt::format("(cgroup id {}, gone)", id);
        row.files_read = true; // nothing to read
        return row;
    }
    row.path = dir->second.substr(std::min(mount_.size(), dir->second.size()));
    if (row.path.empty())
        row.path = "/";
    row.name = workload_name(row.path);
    return row;
}

void Top::read_files(top::CgroupInterval &row) {
    if (row.files_read)
        return;
    row.files_read = true;
    auto dir = dirs_.find(row.id);
    if (dir == dirs_.end())
        return;
    row.memory = read_cgroup_memory(dir->second, v1_);
    const auto &start = events_at_start_[row.id];
    for (const auto &[name, count] : row.memory.events) {
        auto was = start.find(name);
        row.events_since_start[name] =
            count - std::min(count, was != start.end() ? was->second : 0);
    }
    if (row.memory.pressure) {
        const uint64_t total = row.memory.pressure->some->total_us;
        auto was = psi_before_.find(row.id);
        if (was != psi_before_.end() && was->second.second + 1 == refreshes_)
            row.psi_some_us = total - std::min(total, was->second.first);
        psi_before_[row.id] = {total, refreshes_};
    }
}

void Top::refresh() {
    if (replay_ != nullptr) {
        // A held screen stays on its interval; -b and -j print one after the other.
        if (screen_ == nullptr)
            show_recorded(have_interval_ ? replay_at_ + 1 : 0);
        else if (!view_.paused)
            show_recorded(replay_at_ + 1);
        return;
    }
    ++refreshes_;
    const auto now_time = std::chrono::steady_clock::now();
    top::HostInterval host;
    host.interval_s = std::chrono::duration<double>(now_time - last_).count();
    last_ = now_time;

    // A paused screen keeps what it shows, the last interval before the pause; the counting
    // goes on underneath, so the interval after the pause is whole.
    const bool shown = screen_ == nullptr || !view_.paused;
    memstall::Snapshot now = source_->take_snapshot();
    const nlohmann::json threads =
        record_ != nullptr ? top::threads_json(now, before_) : nlohmann::json();
    auto stalled = memstall::rows(now, before_, memstall::Grouping::Cgroup, {});
    if (screen_ != nullptr && shown) {
        interval_before_ = std::move(before_);
        interval_now_ = now;
    }
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
    if (host.now.tlb_shootdowns && host_before_.tlb_shootdowns)
        host.tlb_shootdowns = *host.now.tlb_shootdowns -
                              std::min(*host.now.tlb_shootdowns, *host_before_.tlb_shootdowns);
    host.remote_flushes = this_hypervisor().remote_flushes;
    host_before_ = host.now;
    host.stalls = top::total_stalls(stalled);
    host.cgroups_stalled = stalled.size();
    // Its own cost: CPU from getrusage (microseconds; /proc/self/stat counts 10 ms ticks, too
    // coarse for a 1 s interval), RSS, and the BPF maps' memory.
    if (const auto usage = prometheus::own_process_usage()) {
        const double cpu = own_cpu_seconds();
        host.self =
            top::SelfCost{(cpu - cpu_before_) / host.interval_s, usage->resident_bytes,
                          source_->map_memory_bytes() + (cache_ ? cache_->map_memory_bytes() : 0)};
        cpu_before_ = cpu;
    }

    // A cgroup id not seen before is a cgroup made since: look at the hierarchy again. -a
    // lists every cgroup, so it also looks every few intervals for new idle ones (the walk
    // reads every cgroup's directory).
    if ((all_ && refreshes_ % all_rescan_every == 0) ||
        std::any_of(stalled.begin(), stalled.end(),
                    [&](const memstall::Row &r) { return !dirs_.contains(r.id); }))
        rescan_cgroups();
    std::map<uint64_t, cachestat::Counts> cache_of;
    count_page_cache(host, cache_of);
    std::vector<top::CgroupInterval> rows;
    std::map<uint64_t, top::CauseTimes> stalls_of;
    for (const auto &r : stalled)
        stalls_of[r.id] = r.causes;
    if (all_) {
        for (const auto &[id, dir] : dirs_)
            rows.push_back(cgroup_row(id, stalls_of[id]));
    } else {
        for (const auto &[id, causes] : stalls_of)
            rows.push_back(cgroup_row(id, causes));
    }
    if (host.page_cache)
        for (auto &r : rows) {
            auto counts = cache_of.find(r.id);
            r.page_cache =
                top::PageCache{counts != cache_of.end() ? counts->second : cachestat::Counts{},
                               host.page_cache->accesses_known};
        }
    // The files of the rows to be shown, or of all when the sort needs them.
    if (top::sort_needs_files(view_.sort)) {
        for (auto &r : rows)
            read_files(r);
        top::sort_rows(rows, view_.sort);
    } else {
        top::sort_rows(rows, view_.sort);
        for (size_t i = 0; i < rows.size() && i < rows_wanted(); ++i)
            read_files(rows[i]);
    }
    const std::string time = wall_clock_time();
    unmeasured_ = source_->unmeasured();
    table_full_ = source_->table_full();
    if (record_ != nullptr) // held or not
        record(host, rows, threads, time);
    if (!shown)
        return;
    for (uint32_t cause = 0; cause < MEMSTALL_CAUSES; ++cause)
        weights_[cause].ns += host.stalls[cause].ns;
    host_ = std::move(host);
    rows_ = std::move(rows);
    time_ = time;
    have_interval_ = true;
    if (screen_ == nullptr)
        print_lines();
    else
        draw();
}

// Every row with its files, so that the replay sorts by any column, and the stalls per thread.
void Top::record(const top::HostInterval &host, std::vector<top::CgroupInterval> &rows,
                 const nlohmann::json &threads, const std::string &time) {
    for (auto &r : rows)
        read_files(r);
    auto j = top::snapshot_json(host, rows, unmeasured_, time);
    j["table_full"] = table_full_;
    j["threads"] = threads;
    record_->write(json_text(j) + "\n");
}

void Top::show_recorded(size_t index) {
    index = std::min(index, replay_->size() - 1);
    if (have_interval_ && index == replay_at_)
        return; // the end of the record: it stays
    top::RecordedInterval interval = replay_->at(index);
    replay_at_ = index;
    for (uint32_t cause = 0; cause < MEMSTALL_CAUSES; ++cause)
        weights_[cause].ns += interval.host.stalls[cause].ns;
    host_ = std::move(interval.host);
    rows_ = std::move(interval.rows);
    top::sort_rows(rows_, view_.sort);
    time_ = std::move(interval.time);
    unmeasured_ = std::move(interval.unmeasured);
    table_full_ = interval.table_full;
    threads_recorded_ = interval.threads.has_value();
    interval_before_.clear();
    interval_now_ = interval.threads ? std::move(*interval.threads) : memstall::Snapshot();
    have_interval_ = true;
    if (screen_ == nullptr)
        print_lines();
    else
        draw();
}

// The rows whose files an interval reads when the sort does not need them all: those -b and
// -j print, or those the screen shows (more are read when the screen scrolls to them).
size_t Top::rows_wanted() const {
    if (screen_ == nullptr)
        return o_.rows != 0 ? o_.rows : 20;
    return view_.first_row + table_rows();
}

void Top::print_lines() const {
    const std::string &time = time_;
    const auto &unmeasured = unmeasured_;
    const size_t shown = std::min<size_t>(rows_.size(), o_.rows != 0 ? o_.rows : 20);
    const std::vector<top::CgroupInterval> rows(rows_.begin(), rows_.begin() + shown);
    if (o_.common.json) {
        auto j = top::snapshot_json(host_, rows, unmeasured, time);
        j["table_full"] = table_full_;
        print_json_line(j);
        return;
    }
    const top::TableLayout layout = o_.width != 0
                                        ? top::fit_layout(o_.width, min_path_width, weights_)
                                        : top::full_layout(batch_path_width);
    const std::string header = full_header();
    fmt::print("\n{}{}\n", o_.width != 0 ? top::fold_lines(header, o_.width) : header,
               top::table_heading(layout));
    for (const auto &r : rows)
        fmt::print("{}\n", top::row_text(r, host_.interval_s, layout));
    flush_output();
}

// The header and the full-table warning, as -b prints them (the screen folds them).
std::string Top::full_header() const {
    std::string header = top::header_text(host_, unmeasured_, time_);
    if (const uint64_t lost = table_full_; lost != 0)
        header += fmt::format("{} stalls not counted so far: memstall's table was full "
                              "(--max-entries)\n",
                              lost);
    if (host_.page_cache && host_.page_cache->table_full != 0)
        header += fmt::format("{} page-cache events in no cgroup's HIT% so far: cachestat's "
                              "table of cgroups was full (--max-entries)\n",
                              host_.page_cache->table_full);
    return header;
}

// The rows of the table that fit under the header and above the status line.
size_t Top::table_rows() const {
    // The header's lines as the screen folds them, the table's heading, the status.
    const auto [screen_rows, columns] = screen_->size();
    const std::string header = have_interval_ ? top::fold_lines(full_header(), columns) : "";
    const size_t header_rows =
        have_interval_ ? static_cast<size_t>(std::count(header.begin(), header.end(), '\n'))
                       : top::header_lines;
    const size_t around = header_rows + 1 + 1;
    size_t fit = screen_rows > around ? screen_rows - around : 1;
    return o_.rows != 0 ? std::min<size_t>(fit, o_.rows) : fit;
}

std::vector<size_t> Top::visible() const {
    std::vector<size_t> out;
    for (size_t i = 0; i < rows_.size(); ++i)
        if (top::row_matches(rows_[i], view_.filter))
            out.push_back(i);
    return out;
}

size_t Top::selected_index() const {
    const auto rows = visible();
    for (size_t i = 0; i < rows.size(); ++i)
        if (rows_[rows[i]].id == view_.selected)
            return i;
    return 0;
}

void Top::select_index(size_t index) {
    const auto rows = visible();
    if (rows.empty())
        return;
    index = std::min(index, rows.size() - 1);
    view_.selected = rows_[rows[index]].id;
    const size_t fit = table_rows();
    if (index < view_.first_row)
        view_.first_row = index;
    else if (index >= view_.first_row + fit)
        view_.first_row = index + 1 - fit;
}

// The processes of cgroup `id` that stalled in the last interval, memstall's table.
std::vector<memstall::Row> Top::stalled_in(uint64_t id, std::optional<uint64_t> pid) const {
    auto in_cgroup = [&](const memstall::Snapshot &s) {
        memstall::Snapshot out;
        for (const auto &[key, value] : s)
            if (value.cgroup_id == id && (!pid || value.pid == *pid))
                out.emplace(key, value);
        return out;
    };
    auto rows = memstall::rows(in_cgroup(interval_now_), in_cgroup(interval_before_),
                               pid ? memstall::Grouping::Thread : memstall::Grouping::Process, {});
    std::erase_if(rows, [](const memstall::Row &r) { return r.total_ns() == 0; });
    return rows;
}

// A cgroup opened: its processes, the selected one in reverse video; or one process opened:
// its threads.
void Top::draw_opened(std::vector<std::string> &lines, size_t fit, std::string &status) {
    const uint64_t id = *view_.opened;
    auto row = std::find_if(rows_.begin(), rows_.end(), [&](const auto &r) { return r.id == id; });
    const std::string path = row != rows_.end()
                                 ? row->path
                                 : (dirs_.contains(id) ? dirs_.at(id).substr(mount_.size())
                                                       : fmt::format("cgroup id {}", id));
    const auto grouping =
        view_.opened_pid ? memstall::Grouping::Thread : memstall::Grouping::Process;
    const auto stalled = stalled_in(id, view_.opened_pid);
    if (view_.opened_pid)
        lines.push_back(fmt::format("Threads of process {} in {}:", *view_.opened_pid,
                                    path.empty() ? "/" : path));
    else
        lines.push_back(fmt::format("Processes of {}:", path.empty() ? "/" : path));
    lines.push_back(std::string(bold) + memstall::header(grouping) + std::string(normal_video));
    size_t selected = 0;
    for (size_t i = 0; i < stalled.size(); ++i)
        if (stalled[i].id == view_.selected_pid)
            selected = i;
    for (size_t i = 0; i < stalled.size() && i + 1 < fit; ++i) {
        std::string line = memstall::line(stalled[i], host_.interval_s, grouping);
        if (!view_.opened_pid && i == selected)
            line = std::string(reverse_video) + line + std::string(normal_video);
        lines.push_back(std::move(line));
    }
    if (!threads_recorded_)
        lines.emplace_back("(the record has no processes: -j wrote it, not -o)");
    else if (stalled.empty())
        lines.emplace_back(view_.opened_pid
                               ? "(no thread of this process stalled in the interval)"
                               : "(no process of this cgroup stalled in the interval)");
    if (view_.opened_pid)
        add_stacks(lines, static_cast<uint32_t>(*view_.opened_pid));
    status =
        view_.opened_pid ? "Esc back  h help  q quit" : "Enter threads  Esc back  h help  q quit";
}

// Under a process's threads, its stacks that stalled the longest per cause since top started
// (-s), as many lines of them as fit.
void Top::add_stacks(std::vector<std::string> &lines, uint32_t pid) const {
    // Above the status line: the threads may have taken every row.
    const size_t last = screen_->size().first - 1;
    if (lines.size() + 2 > last)
        return;
    // Symbolized once an interval: the screen is drawn again at every key.
    if (!stacks_cache_ || stacks_cache_->first != std::pair{pid, refreshes_})
        stacks_cache_.emplace(std::pair{pid, refreshes_},
                              source_ ? source_->stacks_of(pid, stacks_per_cause) : std::nullopt);
    const auto &stacks = stacks_cache_->second;
    lines.emplace_back();
    if (!stacks) {
        lines.emplace_back(source_ ? "(the stacks of a process: memlat top -s)"
                                   : "(the stacks are not recorded)");
        return;
    }
    if (stacks->empty()) {
        lines.emplace_back("(no stack of this process stalled since memlat top started)");
        return;
    }
    const std::string text = memstall::stacks_text(*stacks);
    std::string_view rest = text;
    for (std::string_view line; next_line(rest, line) && lines.size() < last;)
        if (!line.empty() || !lines.back().empty())
            lines.emplace_back(line);
}

// Up, Down, Home, End and Enter among a cgroup's processes.
void Top::move_in_processes(const Key &k) {
    const auto stalled = stalled_in(*view_.opened, std::nullopt);
    if (stalled.empty())
        return;
    size_t at = 0;
    for (size_t i = 0; i < stalled.size(); ++i)
        if (stalled[i].id == view_.selected_pid)
            at = i;
    if (k.special == Key::Up || (k.special == Key::None && k.ch == 'k'))
        at = at > 0 ? at - 1 : 0;
    else if (k.special == Key::Down || (k.special == Key::None && k.ch == 'j'))
        at = std::min(at + 1, stalled.size() - 1);
    else if (k.special == Key::Home)
        at = 0;
    else if (k.special == Key::End)
        at = stalled.size() - 1;
    view_.selected_pid = stalled[at].id;
    if (k.special == Key::Enter || k.special == Key::Right)
        view_.opened_pid = stalled[at].id;
}

void Top::draw() {
    if (view_.help) {
        screen_->draw(std::vector<std::string>(std::begin(help_text), std::end(help_text)));
        return;
    }
    if (!have_interval_)
        return;
    const auto [screen_rows, columns] = screen_->size();
    if (screen_rows < min_rows || columns < min_columns) {
        screen_->draw({fmt::format("terminal too small: {}x{}", columns, screen_rows),
                       fmt::format("memlat top needs {}x{}", min_columns, min_rows), "(q quits)"});
        return;
    }
    const top::TableLayout layout = top::fit_layout(columns, min_path_width, weights_);
    std::vector<std::string> lines;
    const std::string header = top::fold_lines(full_header(), columns);
    std::string_view rest = header;
    for (std::string_view line; next_line(rest, line);)
        lines.emplace_back(line);
    const size_t fit = table_rows();
    std::string status;
    if (view_.opened) {
        draw_opened(lines, fit, status);
    } else {
        // The heading, the sorted column's name in bold.
        std::string heading = top::table_heading(layout);
        const std::string key = top::sort_key_name(view_.sort);
        if (auto at = heading.find(key); at != std::string::npos)
            heading = heading.substr(0, at) + std::string(reverse_video) + key +
                      std::string(normal_video) + std::string(bold) +
                      heading.substr(at + key.size());
        lines.push_back(std::string(bold) + heading + std::string(normal_video));
        const auto rows = visible();
        const size_t selected = selected_index();
        if (view_.first_row > selected || view_.first_row >= rows.size())
            view_.first_row = std::min(selected, view_.first_row);
        if (selected >= view_.first_row + fit)
            view_.first_row = selected + 1 - fit;
        for (size_t i = view_.first_row; i < rows.size() && i < view_.first_row + fit; ++i) {
            read_files(rows_[rows[i]]);
            top::CgroupInterval shown = rows_[rows[i]];
            if (view_.names && !shown.name.empty())
                shown.path = shown.name;
            std::string line = top::row_text(shown, host_.interval_s, layout);
            // Stalled at all in yellow, a tenth of the interval or more in red; the selected
            // row in reverse video as well.
            const double share = memstall::share_percent(shown.stall_ns(), host_.interval_s);
            std::string style = share >= alarm_share ? std::string(alarm_colour)
                                : share > 0          ? std::string(warning_colour)
                                                     : std::string();
            if (i == selected) {
                line.resize(std::max(line.size(), columns), ' ');
                style += reverse_video;
            }
            if (!style.empty())
                line = style + line + std::string(normal_video);
            lines.push_back(std::move(line));
        }
        if (rows.empty())
            lines.emplace_back(!view_.filter.empty()
                                   ? "(no cgroup matches the filter; /: change it, Esc: drop it)"
                               : all_ ? "(no memory cgroup)"
                                      : "(no memory cgroup stalled in the interval; a: all)");
        const std::string matching =
            view_.filter.empty() ? "" : fmt::format(" matching '{}'", view_.filter);
        // A replay shows the rows recorded: no a key.
        const std::string all_key =
            replay_ != nullptr ? "" : (all_ ? "  a stalled only" : "  a all");
        status =
            fmt::format("{} of {}{}  Enter processes  < > sort: {}  / filter{}  n {}  "
                        "h help  q quit",
                        rows.empty() ? 0 : selected + 1, rows.size(), matching,
                        top::sort_key_name(view_.sort), all_key, view_.names ? "paths" : "names");
    }
    if (replay_ != nullptr)
        status = fmt::format("REPLAY {} of {}{} (t/T)  ", replay_at_ + 1, replay_->size(),
                             replay_at_ + 1 == replay_->size() ? ", the end" : "") +
                 status;
    if (!view_.message.empty() && std::chrono::steady_clock::now() < view_.message_until)
        status = view_.message + "  " + status;
    if (view_.typing)
        status = fmt::format("filter: {}_  (Enter: set, Esc: leave it)", *view_.typing);
    if (view_.typing_interval)
        status = fmt::format("interval in seconds: {}_  (Enter: set, Esc: leave it as {:g})",
                             *view_.typing_interval, o_.common.interval);
    if (view_.paused)
        status = "PAUSED (space: go on)  " + status;
    while (lines.size() + 1 < screen_rows)
        lines.emplace_back();
    // One column short of the width: curses does not write the last line's last cell.
    lines.push_back(std::string(reverse_video) + top::fit_status(status, columns - 1) +
                    std::string(normal_video));
    screen_->draw(lines);
}

// A key while the filter or the interval is typed: true when it was taken.
bool Top::on_typing(const Key &k) {
    std::optional<std::string> &typing = view_.typing ? view_.typing : view_.typing_interval;
    if (!typing)
        return false;
    if (k.special == Key::Enter) {
        if (view_.typing) {
            view_.filter = *typing;
            view_.first_row = 0;
        } else if (!typing->empty()) {
            try {
                o_.common.interval = parse_seconds(*typing, "the interval", min_interval);
                view_.say(fmt::format("interval {:g} s", o_.common.interval));
            } catch (const UsageError &e) {
                view_.say(e.what());
            }
        }
        typing.reset();
    } else if (k.special == Key::Escape) {
        typing.reset();
    } else if (k.special == Key::Backspace) {
        if (!typing->empty())
            typing->pop_back();
    } else if (k.special == Key::None && k.ch >= 0x20 && k.ch < 0x7f && typing->size() < 64) {
        *typing += k.ch;
    }
    return true;
}

void Top::on_keys(const std::vector<Key> &keys) {
    for (const Key &k : keys) {
        if (view_.help) { // any key leaves the help page
            view_.help = false;
            continue;
        }
        if (on_typing(k))
            continue;
        // Inside an opened cgroup the moving keys select a process, Enter opens it.
        const bool moves = k.special == Key::Up || k.special == Key::Down ||
                           k.special == Key::Home || k.special == Key::End ||
                           k.special == Key::Enter || k.special == Key::Right ||
                           (k.special == Key::None && (k.ch == 'j' || k.ch == 'k'));
        if (view_.opened && moves) {
            if (!view_.opened_pid)
                move_in_processes(k);
            continue;
        }
        const size_t at = selected_index();
        const size_t page = table_rows();
        switch (k.special) {
        case Key::Up:
            select_index(at > 0 ? at - 1 : 0);
            break;
        case Key::Down:
            select_index(at + 1);
            break;
        case Key::PageUp:
            select_index(at > page ? at - page : 0);
            break;
        case Key::PageDown:
            select_index(at + page);
            break;
        case Key::Home:
            select_index(0);
            break;
        case Key::End:
            select_index(visible().size());
            break;
        case Key::Enter:
        case Key::Right:
            if (const auto rows = visible(); !rows.empty() && !view_.opened)
                view_.opened = rows_[rows[at]].id;
            break;
        case Key::Escape:
        case Key::Left:
        case Key::Backspace:
            // Back from a process's threads, from a cgroup's processes; in the cgroups, Esc
            // drops the filter.
            if (view_.opened_pid) {
                view_.opened_pid.reset();
            } else if (view_.opened) {
                view_.opened.reset();
                view_.selected_pid = 0;
            } else if (k.special == Key::Escape)
                view_.filter.clear();
            break;
        case Key::None:
            switch (k.ch) {
            case 'q':
            case 'Q':
                request_stop();
                return;
            case 'h':
            case '?':
                view_.help = true;
                break;
            case 'k':
                select_index(at > 0 ? at - 1 : 0);
                break;
            case 'j':
                select_index(at + 1);
                break;
            case ' ':
                view_.paused = !view_.paused;
                break; // shown from the next interval
            case 'a':
                if (replay_ != nullptr)
                    view_.say("a replay shows the rows recorded");
                else
                    all_ = !all_;
                break; // from the next interval
            case 'd':
            case 's':
                view_.typing_interval = "";
                break;
            case 't':
            case 'T':
                if (replay_ != nullptr)
                    show_recorded(k.ch == 't' ? replay_at_ + 1
                                              : (replay_at_ > 0 ? replay_at_ - 1 : 0));
                break;
            case 'n':
                view_.names = !view_.names;
                break;
            case '/':
                if (!view_.opened)
                    view_.typing = view_.filter;
                break;
            case '<':
            case '>': {
                const auto &keys_list = top::sort_keys;
                size_t i =
                    std::find(keys_list.begin(), keys_list.end(), view_.sort) - keys_list.begin();
                i = k.ch == '>' ? (i + 1) % keys_list.size()
                                : (i + keys_list.size() - 1) % keys_list.size();
                view_.sort = keys_list[i];
                if (top::sort_needs_files(view_.sort))
                    for (auto &r : rows_)
                        read_files(r);
                top::sort_rows(rows_, view_.sort);
                break;
            }
            default:
                break;
            }
            break;
        default:
            break;
        }
    }
    draw();
}

// The screen until q, a stop signal, -d or COUNT: keys as they are pressed, and a refresh
// each interval.
void run_screen(const TopOptions &o, FullScreen &screen, Top &top) {
    auto read_keys = [&](std::chrono::milliseconds timeout) {
        if (auto keys = screen.read_keys(timeout); !keys.empty())
            top.on_keys(keys);
    };
    run_until_stopped(o.common, read_keys, [&] { top.refresh(); });
}

// cachestat's counting per memory cgroup, or null where it cannot load: then the screen goes
// on without the page-cache columns, and says why once.
std::unique_ptr<cachestat::CacheSource> load_page_cache(const CommonOptions &common) {
    try {
        auto cache = cachestat::load_cache_source(common);
        if (!cache->accesses_known())
            fmt::print(stderr,
                       "{}: HIT% shows - : this kernel counts no page-cache accesses "
                       "(cachestat -h says why)\n",
                       command_name);
        return cache;
    } catch (const RuntimeError &e) {
        fmt::print(stderr, "{}: no page-cache columns (HIT%, the header's hit ratio): {}\n",
                   command_name, e.what());
        return nullptr;
    }
}

// -r: the record on the screen, one interval each INTERVAL seconds; with -b or -j, each
// interval printed at once.
int replay(TopOptions &o, bool full_screen) {
    if (!o.record_path.empty())
        throw UsageError("-r replays a record and -o writes one: not both at once");
    if (o.all)
        throw UsageError("-a: a replay shows the rows that were recorded (record with -a)");
    if (o.stacks)
        throw UsageError("-s: a record holds no stacks (they are shown live only)");
    if (o.common.max_entries != 0)
        throw UsageError("--max-entries sizes memstall's table: a replay loads none");
    const top::Recording recording(o.replay_path);
    if (recording.cut_short() != 0)
        fmt::print(stderr,
                   "{}: {} ends in part of line {} (its writer stopped while writing it): the {} "
                   "intervals before it are replayed\n",
                   command_name, o.replay_path, recording.cut_short(), recording.size());
    install_stop_signals();
    if (!full_screen) {
        Top top(o, recording, nullptr);
        for (size_t i = 0; i < recording.size() && (o.common.count == 0 || i < o.common.count) &&
                           !stop_requested();
             ++i)
            top.refresh();
        flush_output();
        return 0;
    }
    FullScreen screen;
    Top top(o, recording, &screen);
    run_screen(o, screen, top);
    return 0;
}

int run_top(int argc, char **argv) {
    TopOptions o;
    o.common.interval = 1;
    CommandLine cli(command_name, description,
                    examples + environment_help(true, tracepoint_hook_kinds));
    cli.flag('b', "batch", "Text rows per interval instead of the live screen (as top -b)",
             o.batch);
    cli.flag('a', "all", "A row for every memory cgroup, not only those that stalled", o.all);
    cli.option(0, "rows", "ROWS",
               "Show at most ROWS cgroups (default: what fits the terminal; 20 with -b, -j)",
               o.rows);
    cli.option('w', "width", "COLUMNS",
               "With -b: lines COLUMNS wide, the CGROUP column taking what the others leave "
               "(it is 32 wide otherwise, cut from the left); causes that do not fit beside a "
               "16-wide CGROUP share the REST column, and the header folds",
               [&o](const std::string &text) {
                   o.width = parse_number<size_t>(text, "-w");
                   if (o.width < 60 || o.width > 4096)
                       throw UsageError(fmt::format("-w takes 60 to 4096 columns, not {}", text));
               });
    cli.flag('s', "stacks",
             "Under a process's threads, the kernel and user stacks that stalled it the "
             "longest per cause since start (memstall -s: a table of 4096 stacks, and a stack "
             "walk per stall)",
             o.stacks);
    cli.flag(0, "no-page-cache",
             "Count no page-cache accesses (HIT% and the header's hit ratio show nothing): "
             "cachestat's programs then stay off every read and page fault of the host",
             [&o] { o.page_cache = false; });
    cli.option('o', "output", "FILE",
               "Record every interval in FILE (JSON lines, all the rows and the stalls of "
               "each thread) for -r",
               o.record_path);
    cli.option('r', "replay", "FILE",
               "Replay a record of -o (or of -j) instead of watching this host; needs no "
               "privilege",
               o.replay_path);
    cli.flag('j', "json",
             "JSON lines on stdout instead of the screen: one object per interval (schema in "
             "docs/output.md)",
             o.common.json);
    add_run_options(cli, o.common);
    add_max_entries_option(cli, o.common);
    add_interval_arguments(cli, o.common, "refresh every INTERVAL seconds (default 1)");
    cli.parse(argc, argv);
    if (o.width != 0 && !o.batch)
        throw UsageError("-w sets the width of -b's lines: the screen takes the terminal's, "
                         "-j has no columns");
    const bool full_screen = !o.batch && !o.common.json;
    if (full_screen && !isatty(STDOUT_FILENO))
        throw UsageError("stdout is not a terminal: -b prints text rows per interval (as "
                         "top -b), -j JSON lines");
    require_stdout();
    if (!o.replay_path.empty())
        return replay(o, full_screen);
    // Opened before loading, so that a path it cannot write is a usage error at once, but
    // emptied only once loaded: a run refused its privileges leaves an earlier record whole.
    OutputFile record;
    if (!o.record_path.empty())
        record = OutputFile(o.record_path, "-o", false);
    OutputFile *recording = record.is_open() ? &record : nullptr;
    auto source = memstall::load_stall_source(o.common, o.stacks);
    auto cache = o.page_cache ? load_page_cache(o.common) : nullptr;
    if (recording != nullptr)
        recording->truncate();
    install_stop_signals();
    announce_tracing("Watching memory stalls per cgroup...");
    if (!full_screen) {
        Top top(o, std::move(source), std::move(cache), nullptr, recording);
        // Stopped by a signal or -d within an interval: its rows too, so that every stall
        // since start is in some interval of -b and -j.
        if (!run_until_stopped(o.common, sleep_for, [&] { top.refresh(); }))
            top.refresh();
        flush_output();
        return 0;
    }
    FullScreen screen;
    Top top(o, std::move(source), std::move(cache), &screen, recording);
    run_screen(o, screen, top);
    return 0;
}

} // namespace

int top_main(int argc, char **argv) {
    return run_tool(command_name, [&] { return run_top(argc, argv); });
}

} // namespace memlat
