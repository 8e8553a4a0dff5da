#include "top/top_live.h"

#include <sys/resource.h>

#include <algorithm>
#include <fmt/format.h>

#include "kernel/cgroups.h"
#include "kernel/workloads.h"
#include "loading/flush_path.h"
#include "prometheus/process_metrics.h"

namespace memlat::top {

namespace {

// User and system CPU time of this process so far, in seconds.
double own_cpu_seconds() {
    rusage usage{};
    if (getrusage(RUSAGE_SELF, &usage) != 0)
        return 0;
    auto seconds = [](const timeval &t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
    return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

} // namespace

Top::Top(TopOptions &o, std::unique_ptr<memstall::StallSource> source,
         std::unique_ptr<cachestat::CacheSource> cache, std::unique_ptr<CgroupBirths> births,
         FullScreen *screen, OutputFile *record)
    : o_(o), source_(std::move(source)), cache_(std::move(cache)), births_(std::move(births)),
      screen_(screen), record_(record), v1_(source_->memcg_on_v1()), all_(o.all) {
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
    cpu_before_ = own_cpu_seconds();
    if (screen_ != nullptr)
        screen_->draw({"memlat top: counting the first interval..."});
}
Top::Top(TopOptions &o, const top::Recording &recording, FullScreen *screen)
    : o_(o), screen_(screen), replay_(&recording), v1_(false), all_(false) {
    if (screen_ != nullptr)
        show_recorded(0);
}

void Top::rescan_cgroups() {
    dirs_ = cgroup_dirs(v1_);
    names_.forget_others(dirs_);
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
        // Gone since the walk: its path and names as it was made, when it was made while this
        // ran; otherwise its id.
        const auto born = births_ ? births_->find(id) : std::nullopt;
        row.path = born ? born->path : fmt::format("(cgroup id {}, gone)", id);
        if (born) {
            row.name = born->workload.display();
            row.workload = workload_json(born->workload);
        }
        row.files_read = true; // nothing to read
        return row;
    }
    row.path = dir->second.substr(std::min(mount_.size(), dir->second.size()));
    if (row.path.empty())
        row.path = "/";
    const Workload &workload = names_.of(id, row.path);
    row.name = workload.display();
    row.workload = workload_json(workload);
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
        host.self = top::SelfCost{
            (cpu - cpu_before_) / host.interval_s, usage->resident_bytes,
            source_->map_memory_bytes() + (cache_ ? cache_->map_memory_bytes() : 0) +
                (births_ ? prometheus::object_map_memory_bytes(births_->object()) : 0)};
        cpu_before_ = cpu;
    }

    // A cgroup id not seen before is a cgroup made since: look at the hierarchy again. -a
    // lists every cgroup, so it also looks every few intervals for new idle ones (the walk
    // reads every cgroup's directory).
    if ((all_ && refreshes_ % all_rescan_every == 0) ||
        std::any_of(stalled.begin(), stalled.end(),
                    [&](const memstall::Row &r) { return !dirs_.contains(r.id); }))
        rescan_cgroups();
    // What the cgroups made since were named as they were made: a record gone since (a
    // container's, with it) still names its cgroup.
    if (births_)
        births_->teach(names_);
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
    if (births_)
        births_->interval_ended();
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
    record_->write(stamped_json_text(interval_line, j) + "\n");
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
    recorded_stamp_.emplace(std::move(interval.timestamp), std::move(interval.epoch_ms));
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
        if (recorded_stamp_) {
            j["timestamp"] = recorded_stamp_->first;
            j["epoch_ms"] = recorded_stamp_->second;
        }
        print_json_line(interval_line, j);
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

} // namespace memlat::top
