// memlat top's live view (tools/top/top.cpp has its options and its run): Top reads an
// interval of memstall's and cachestat's counts and the cgroups' files (top_live.cpp) and shows
// it on the screen with its keys (top_screen.cpp), or prints it as -b and -j; in a replay
// (--replay) the intervals come from a record.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/options.h"
#include "cli/output.h"
#include "cli/terminal.h"
#include "kernel/memory_state.h"
#include "kernel/process_titles.h"
#include "kernel/workloads.h"
#include "loading/cgroup_births.h"
#include "sources/page_cache.h"
#include "sources/stall_source.h"
#include "top/top_format.h"
#include "top/top_record.h"

namespace memlat::top {

struct TopOptions {
    CommonOptions common;
    bool batch = false;
    bool all = false;
    uint32_t rows = 0;       // 0: what fits the terminal, 20 in batch and JSON
    std::string record_path; // -o
    std::string replay_path; // --replay
    bool stacks = false;     // -s
    size_t width = 0;        // -w: -b's line width (0: every column, the path 32 wide)
    bool page_cache = true;  // --no-page-cache: none
};
// STALL% from which a row is drawn in red (else yellow, when it stalled at all).
inline constexpr double alarm_share = 10;
// -s: the stacks shown under a process's threads, per cause.
inline constexpr size_t stacks_per_cause = 1;

inline constexpr size_t min_path_width = 16, batch_path_width = 32;
// The smallest terminal the screen is drawn on: the header and a few rows.
inline constexpr size_t min_rows = 10, min_columns = 60;
// -a: the refreshes at which the cgroup tree is walked again for new cgroups.
inline constexpr uint64_t all_rescan_every = 5;

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

class Top {
  public:
    // Live: `source` is memstall's BPF side; each interval is appended to `record` (-o) unless
    // it is null. `o.common.interval` is changed by the d key.
    // `cache`: cachestat's, or null (not loaded: no page-cache columns). `births`: the cgroups
    // made while it runs (null: only those its walks find are named).
    Top(TopOptions &o, std::unique_ptr<memstall::StallSource> source,
        std::unique_ptr<cachestat::CacheSource> cache, std::unique_ptr<CgroupBirths> births,
        FullScreen *screen, OutputFile *record);
    // The replay of `recording` (--replay): on the screen its first interval at once, and the next
    // at each refresh; with -b or -j, one interval each refresh.
    Top(TopOptions &o, const top::Recording &recording, FullScreen *screen);

    // An interval ends: its rows are read and shown.
    void refresh();
    // Keys pressed on the screen.
    void on_keys(const std::vector<Key> &keys);

  private:
    void rescan_cgroups();
    // The interval's page-cache counts of the host and per cgroup (none without cachestat's).
    void count_page_cache(top::HostInterval &host,
                          std::map<uint64_t, cachestat::Counts> &per_cgroup);
    // --replay: shows the recorded interval `index` (the last when past it).
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
    std::unique_ptr<CgroupBirths> births_;          // cgroups made since start (null: refused)
    cachestat::CgroupSnapshot cache_before_;
    FullScreen *screen_;                     // null with -b and -j
    const top::Recording *replay_ = nullptr; // --replay
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
    // --replay: when the replayed line was written (null in an older record), which -j prints in
    // place of the time of the replay.
    std::optional<std::pair<nlohmann::json, nlohmann::json>> recorded_stamp_;
    std::map<uint32_t, std::string> unmeasured_;
    uint64_t table_full_ = 0;
    bool have_interval_ = false;
    // -s: the stacks of a process, as read at a refresh: (pid, refresh) and the stacks.
    mutable std::optional<
        std::pair<std::pair<uint32_t, uint64_t>, std::optional<std::vector<memstall::StallStack>>>>
        stacks_cache_;
    HostMemory host_before_;
    std::map<uint64_t, std::string> dirs_;       // cgroup id -> its directory
    WorkloadNames names_{o_.common.verbosity()}; // what runs in each cgroup of dirs_
    ProcessTitles titles_;                       // the process view's COMMAND column
    std::string mount_;                          // the hierarchy's root directory
    std::map<uint64_t, std::map<std::string, uint64_t>> events_at_start_;
    // cgroup id -> memory.pressure's some total and the refresh it was read at (0: start): a
    // row has a PSI share only when its total was read at the refresh before, or else the
    // difference would span several intervals.
    std::map<uint64_t, std::pair<uint64_t, uint64_t>> psi_before_;
    uint64_t refreshes_ = 0;
    std::chrono::steady_clock::time_point last_;
    double cpu_before_ = 0; // this process's CPU time at the last refresh
};

// The screen until q, a stop signal, -d or COUNT: keys as they are pressed, and a refresh
// each interval.
void run_screen(const TopOptions &o, FullScreen &screen, Top &top);

} // namespace memlat::top
