// memlat top's record and replay (tools/memlat/top_record.h).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "base/errors.h"
#include "base/files.h"
#include "top/top_record.h"

using namespace memlat;
using namespace memlat::top;

namespace {

memstall_value value(uint64_t stalls, uint64_t ns, uint32_t pid, uint64_t cgroup,
                     const char *comm) {
    memstall_value v{};
    v.stalls = stalls;
    v.total_ns = ns;
    v.max_ns = ns / std::max<uint64_t>(stalls, 1);
    v.pid = pid;
    v.cgroup_id = cgroup;
    std::strncpy(v.comm, comm, sizeof(v.comm) - 1);
    return v;
}

// An interval with what every field of the screen shows set to something else than its default.
std::pair<HostInterval, std::vector<CgroupInterval>> an_interval() {
    HostInterval host;
    host.interval_s = 1.0004213;
    host.now.meminfo = {{"MemTotal", 8ull << 30}, {"MemAvailable", 6ull << 30}, {"Dirty", 12288}};
    host.vmstat_delta = {{"pgsteal_direct", 200}, {"allocstall_normal", 6}};
    host.psi_some_us = 1500;
    host.stalls[MEMSTALL_MEMCG_RECLAIM] = {3, 9000, 0};
    host.cgroups_stalled = 1;
    host.tlb_shootdowns = 77;
    host.remote_flushes = FlushPath::Mixed;
    host.self = SelfCost{0.0013, 1.5 * (1 << 20), 2621440};
    host.page_cache =
        PageCache{{.accesses = 900, .misses = 90, .dirties = 9, .hits = 810}, true, 3};
    CgroupInterval a;
    a.id = 42;
    a.path = "/kubepods/pod1";
    a.name = "pod1";
    a.stalls[MEMSTALL_MEMCG_RECLAIM] = {3, 9000, 0, 1234};
    a.memory.usage_bytes = 30 << 20;
    a.memory.max_bytes = 32 << 20;
    a.memory.high_bytes = 31 << 20;
    a.events_since_start = {{"max", 12}, {"oom_kill", 1}};
    a.psi_some_us = 700;
    a.page_cache = PageCache{{.accesses = 100, .misses = 50, .hits = 50}, true};
    a.files_read = true;
    CgroupInterval b;
    b.id = 7;
    b.path = "/idle";
    b.files_read = true;
    return {host, {a, b}};
}

// A file of this test's own in the temporary directory.
std::string temp_path(const std::string &name) {
    return (std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid())))
        .string();
}

} // namespace

// What the screen and -b draw from a replayed interval is what they drew live.
TEST(TopRecord, AnIntervalReadBackDrawsTheSame) {
    auto [host, rows] = an_interval();
    const std::map<uint32_t, std::string> unmeasured{{MEMSTALL_OTHER, "no PSI"}};
    auto j = snapshot_json(host, rows, unmeasured, "12:00:01");
    j["table_full"] = 5;
    const RecordedInterval back = interval_from_json(nlohmann::json::parse(j.dump()));
    EXPECT_EQ("12:00:01", back.time);
    EXPECT_EQ(5u, back.table_full);
    EXPECT_FALSE(back.threads.has_value()); // a line of -j: no threads
    EXPECT_EQ(std::optional<uint64_t>(77), back.host.tlb_shootdowns);
    EXPECT_EQ(FlushPath::Mixed, back.host.remote_flushes);
    EXPECT_EQ(header_text(host, unmeasured, "12:00:01"),
              header_text(back.host, back.unmeasured, back.time));
    ASSERT_EQ(rows.size(), back.rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
        EXPECT_EQ(row_text(rows[i], host.interval_s, full_layout(20)),
                  row_text(back.rows[i], back.host.interval_s, full_layout(20)));
        EXPECT_EQ(rows[i].name, back.rows[i].name);
        EXPECT_EQ(rows[i].id, back.rows[i].id);
    }
    ASSERT_TRUE(back.host.page_cache.has_value());
    EXPECT_EQ(host.page_cache->counts, back.host.page_cache->counts);
    EXPECT_EQ(3u, back.host.page_cache->table_full);
    EXPECT_FALSE(back.rows[1].page_cache.has_value());
    // A record made before the page cache was counted: none, and HIT% "-".
    auto old = j;
    old["host"].erase("page_cache");
    for (auto &row : old["cgroups"])
        row.erase("page_cache");
    const RecordedInterval before_counting = interval_from_json(old);
    EXPECT_FALSE(before_counting.host.page_cache.has_value());
    EXPECT_FALSE(before_counting.rows[0].page_cache.has_value());
    // Rows named by their workload read back whole; a record made before names were looked
    // up (no "workload") reads as none.
    auto named = j;
    named["cgroups"][0]["workload"] = {{"kind", "container"}, {"container", "web"}};
    EXPECT_EQ("web", interval_from_json(named).rows[0].workload["container"]);
    for (auto &row : old["cgroups"])
        row.erase("workload");
    EXPECT_TRUE(interval_from_json(old).rows[0].workload.is_null());
}

// The threads of an interval: what it added, per thread and cause; entries that did not move
// are left out, and the replay's rows per process are the interval's.
TEST(TopRecord, ThreadsAreTheIntervalsStalls) {
    memstall::Snapshot before{{{100, MEMSTALL_MEMCG_RECLAIM}, value(2, 5000, 100, 42, "reader")},
                              {{101, MEMSTALL_DIRTY}, value(1, 300, 100, 42, "reader")}};
    memstall::Snapshot now = before;
    now[{100, MEMSTALL_MEMCG_RECLAIM}] = value(5, 9000, 100, 42, "reader");
    now[{100, MEMSTALL_MEMCG_RECLAIM}].reclaimed_pages = 96;
    now[{200, MEMSTALL_THRASHING}] = value(1, 700, 200, 7, "new");
    const auto j = threads_json(now, before);
    ASSERT_EQ(2u, j.size()); // 101 did not move
    EXPECT_EQ(100, j[0]["tid"]);
    EXPECT_EQ("memcg", j[0]["cause"]);
    EXPECT_EQ(3, j[0]["stalls"]);
    EXPECT_EQ(4000, j[0]["ns"]);
    EXPECT_EQ("reader", j[0]["comm"]);
    EXPECT_EQ(96, j[0]["reclaimed_pages"]);
    EXPECT_FALSE(j[1].contains("reclaimed_pages")); // thrashing frees nothing
    EXPECT_EQ(700, j[1]["ns"]);

    auto [host, rows] = an_interval();
    auto line = snapshot_json(host, rows, {}, "12:00:01");
    line["threads"] = j;
    const RecordedInterval back = interval_from_json(line);
    ASSERT_TRUE(back.threads.has_value());
    EXPECT_EQ(memstall::rows(now, before, memstall::Grouping::Process, {})[0].total_ns(),
              memstall::rows(*back.threads, {}, memstall::Grouping::Process, {})[0].total_ns());
    const auto threads = memstall::rows(*back.threads, {}, memstall::Grouping::Thread, {});
    ASSERT_EQ(2u, threads.size());
    EXPECT_EQ(96u, threads[0].causes[MEMSTALL_MEMCG_RECLAIM].reclaimed_pages);
    EXPECT_EQ("reader", threads[0].name);
}

TEST(TopRecord, WhatIsNotAnIntervalIsSaid) {
    EXPECT_THROW(interval_from_json(nlohmann::json::object()), RuntimeError);
    auto [host, rows] = an_interval();
    auto line = snapshot_json(host, rows, {}, "12:00:01");
    line["cgroups"][0]["usage_bytes"] = "a lot";
    try {
        interval_from_json(line);
        FAIL() << "a string for a number was taken";
    } catch (const RuntimeError &e) {
        EXPECT_NE(std::string::npos, std::string(e.what()).find("not an interval of memlat top"))
            << e.what();
        EXPECT_EQ(std::string::npos, std::string(e.what()).find("[json.exception")) << e.what();
    }
}

TEST(TopRecord, RecordingIndexesItsLines) {
    auto [host, rows] = an_interval();
    const std::string line = snapshot_json(host, rows, {}, "12:00:01").dump();
    const std::string path = temp_path("memlat_record");
    ASSERT_FALSE(write_whole_file(path, line + "\n\n" + line + "\n{\"time\": 1}\n"));
    const Recording rec(path);
    ASSERT_EQ(3u, rec.size());
    EXPECT_EQ("12:00:01", rec.at(1).time);
    try {
        rec.at(2);
        FAIL() << "a line that is no interval was taken";
    } catch (const RuntimeError &e) {
        EXPECT_NE(std::string::npos, std::string(e.what()).find(path + " line 4: ")) << e.what();
    }
    ASSERT_FALSE(write_whole_file(path, "\n"));
    EXPECT_THROW(Recording{path}, UsageError);
    std::filesystem::remove(path);
    EXPECT_THROW(Recording{path}, UsageError);
}

// A record whose writer stopped while writing its last line: the intervals before it replay.
TEST(TopRecord, ARecordCutShortKeepsItsWholeLines) {
    auto [host, rows] = an_interval();
    const std::string line = snapshot_json(host, rows, {}, "12:00:01").dump();
    const std::string path = temp_path("memlat_cut");
    ASSERT_FALSE(write_whole_file(path, line + "\n" + line + "\n" + line.substr(0, 40)));
    const Recording rec(path);
    EXPECT_EQ(2u, rec.size());
    EXPECT_EQ(3u, rec.cut_short());
    EXPECT_EQ("12:00:01", rec.at(1).time);
    // A whole last line without its newline is an interval.
    ASSERT_FALSE(write_whole_file(path, line + "\n" + line));
    EXPECT_EQ(2u, Recording(path).size());
    EXPECT_EQ(0u, Recording(path).cut_short());
    std::filesystem::remove(path);
}
