// memlat top's views (tools/memlat/top_format.h).
#include <gtest/gtest.h>

#include <algorithm>

#include "top/top_format.h"

using namespace memlat;
using namespace memlat::top;

TEST(TopFormat, HumanBytes) {
    EXPECT_EQ("0", human_bytes(0));
    EXPECT_EQ("1023", human_bytes(1023));
    EXPECT_EQ("1.0K", human_bytes(1024));
    EXPECT_EQ("32M", human_bytes(32u << 20));
    EXPECT_EQ("9.5G", human_bytes(9728ull << 20));
    EXPECT_EQ("24G", human_bytes(24684084ull * 1024));
}

namespace {

CgroupInterval row(uint64_t id, const std::string &path, uint64_t memcg_ns,
                   std::optional<uint64_t> psi = std::nullopt, uint64_t usage = 0) {
    CgroupInterval r;
    r.id = id;
    r.path = path;
    r.stalls[MEMSTALL_MEMCG_RECLAIM] = {10, memcg_ns, memcg_ns};
    r.psi_some_us = psi;
    r.memory.usage_bytes = usage;
    return r;
}

} // namespace

TEST(TopFormat, BusiestFirst) {
    std::vector<CgroupInterval> rows{row(1, "/a", 0, 5), row(2, "/b", 300), row(3, "/c", 900),
                                     row(4, "/d", 0, std::nullopt, 1 << 20), row(5, "/e", 0)};
    sort_busiest(rows);
    std::vector<std::string> order;
    for (const auto &r : rows)
        order.push_back(r.path);
    // Stall time, then PSI, then usage, then the path.
    EXPECT_EQ((std::vector<std::string>{"/c", "/b", "/a", "/d", "/e"}), order);
}

TEST(TopFormat, TotalStallsSumRows) {
    memstall::Row a, b;
    a.causes[MEMSTALL_MEMCG_RECLAIM] = {2, 2000, 1500};
    b.causes[MEMSTALL_MEMCG_RECLAIM] = {1, 3000, 3000};
    b.causes[MEMSTALL_THRASHING] = {4, 400, 200};
    auto sum = total_stalls({a, b});
    EXPECT_EQ(3u, sum[MEMSTALL_MEMCG_RECLAIM].stalls);
    EXPECT_EQ(5000u, sum[MEMSTALL_MEMCG_RECLAIM].ns);
    EXPECT_EQ(3000u, sum[MEMSTALL_MEMCG_RECLAIM].max_ns);
    EXPECT_EQ(400u, sum[MEMSTALL_THRASHING].ns);
}

TEST(TopFormat, RowText) {
    CgroupInterval r = row(7, "/system.slice/very-long-unit-name.service", 250'000'000);
    r.memory.usage_bytes = 30 << 20;
    r.memory.max_bytes = 32 << 20;
    r.events_since_start = {{"max", 12}, {"high", 3}, {"oom_kill", 1}};
    r.psi_some_us = 100'000;
    const std::string text = row_text(r, 0.5, full_layout(20));
    // The path cut from the left to 20 characters.
    EXPECT_EQ("<g-unit-name.service ", text.substr(0, 21));
    EXPECT_NE(std::string::npos, text.find("   30M    32M   50.0"));
    EXPECT_NE(std::string::npos, text.find("  250.0"));
    EXPECT_NE(std::string::npos, text.find("12/3 K1"));
    // PSI: 100 ms of 500.
    EXPECT_EQ(" 20.0", text.substr(text.size() - 5));
    EXPECT_EQ(table_heading(full_layout(20)).size(), text.size());
}

// At 80 columns: EVENTS and PSI% stay, the causes with the most stall time keep a column,
// REST sums the others, and the line is 80 wide.
TEST(TopFormat, NarrowLineFoldsCausesIntoRest) {
    CauseTimes weights{};
    weights[MEMSTALL_THRASHING].ns = 900;
    weights[MEMSTALL_DIRECT_RECLAIM].ns = 500;
    weights[MEMSTALL_SWAPIN].ns = 100;
    const TableLayout layout = fit_layout(80, 16, weights);
    EXPECT_EQ((std::vector<uint32_t>{MEMSTALL_DIRECT_RECLAIM, MEMSTALL_THRASHING}), layout.causes);
    EXPECT_TRUE(layout.rest);
    EXPECT_EQ(80u, line_width(layout));
    CgroupInterval r = row(7, "/a", 0);
    r.stalls[MEMSTALL_DIRECT_RECLAIM].ns = 2'000'000;
    r.stalls[MEMSTALL_SWAPIN].ns = 3'000'000;
    r.stalls[MEMSTALL_MEMCG_RECLAIM].ns = 4'000'000;
    const std::string heading = table_heading(layout), text = row_text(r, 1, layout);
    EXPECT_EQ(80u, heading.size());
    EXPECT_EQ(80u, text.size());
    for (const char *column : {"DIRECT", "THRASH", "REST", "EVENTS", "PSI%"})
        EXPECT_NE(std::string::npos, heading.find(column)) << column;
    EXPECT_EQ(std::string::npos, heading.find("SWAPIN"));
    // DIRECT 2.0, THRASH 0.0, REST the swap-in and memcg time: 7.0 ms.
    EXPECT_NE(std::string::npos, text.find("     2.0     0.0     7.0 ")) << text;
    // Wide enough for every cause: no REST, the path takes the rest.
    const TableLayout wide = fit_layout(200, 16, weights);
    EXPECT_FALSE(wide.rest);
    EXPECT_EQ(size_t{MEMSTALL_CAUSES}, wide.causes.size());
    EXPECT_EQ(200u, line_width(wide));
    EXPECT_TRUE(wide.reclaim);
    // Narrower than a 16-wide path beside REST alone: no cause column, the path at 16.
    const TableLayout tiny = fit_layout(50, 16, weights);
    EXPECT_TRUE(tiny.causes.empty());
    EXPECT_FALSE(tiny.reclaim);
    EXPECT_EQ(16u, tiny.path_width);
    // 80 columns hold two causes and no RECL/s; it comes before a third cause.
    EXPECT_FALSE(layout.reclaim);
    const TableLayout room_for_three = fit_layout(88, 16, weights);
    EXPECT_TRUE(room_for_three.reclaim);
    EXPECT_EQ(2u, room_for_three.causes.size());
    EXPECT_EQ(88u, line_width(room_for_three));
    EXPECT_EQ(88u, table_heading(room_for_three).size());
    EXPECT_FALSE(room_for_three.hits);
    const TableLayout room_for_four = fit_layout(96, 16, weights);
    EXPECT_TRUE(room_for_four.reclaim && room_for_four.hits);
    EXPECT_EQ(2u, room_for_four.causes.size());
    EXPECT_EQ(96u, line_width(room_for_four));
}

// HIT%: the cgroup's hits over its accesses; "-" where none were counted. The header's Mem
// line: the host's accesses per second and hit ratio, or its misses where accesses are not
// counted; nothing without cachestat's programs.
TEST(TopFormat, PageCacheHitRatio) {
    CgroupInterval r = row(7, "/a", 0);
    const TableLayout layout = full_layout(10);
    const size_t column = table_heading(layout).find("    HIT%");
    ASSERT_NE(std::string::npos, column);
    EXPECT_EQ("       -", row_text(r, 1, layout).substr(column, 8));
    r.page_cache = PageCache{{.accesses = 400, .misses = 100, .hits = 300}, true};
    EXPECT_EQ("    75.0", row_text(r, 1, layout).substr(column, 8));
    r.page_cache->accesses_known = false;
    EXPECT_EQ("       -", row_text(r, 1, layout).substr(column, 8));

    HostInterval host;
    host.interval_s = 2;
    EXPECT_EQ(std::string::npos, header_text(host, {}, "t").find("page cache"));
    host.page_cache = PageCache{{.accesses = 4000, .misses = 1000, .hits = 3000}, true};
    EXPECT_NE(std::string::npos,
              header_text(host, {}, "t").find("; page cache 2000 pages/s, hit 75.0%\n"))
        << header_text(host, {}, "t");
    host.page_cache->accesses_known = false;
    EXPECT_NE(std::string::npos,
              header_text(host, {}, "t").find("; page cache 500 misses/s (accesses not counted"));
    const auto j = snapshot_json(host, {r}, {}, "t");
    EXPECT_TRUE(j["host"]["page_cache"]["accesses"].is_null());
    EXPECT_EQ(1000u, j["host"]["page_cache"]["misses"]);
    EXPECT_EQ(100u, j["cgroups"][0]["page_cache"]["misses"]);
    EXPECT_EQ(0u, j["host"]["page_cache"]["table_full"]);
    EXPECT_FALSE(j["cgroups"][0]["page_cache"].contains("table_full")); // the host's only
}

// RECL/s: the pages the cgroup's direct and limit reclaim freed, per second; the JSON row has
// them too, and each reclaim cause's share.
TEST(TopFormat, ReclaimedPagesPerSecond) {
    CgroupInterval r = row(7, "/a", 0);
    r.stalls[MEMSTALL_MEMCG_RECLAIM] = {.stalls = 3, .ns = 9000, .reclaimed_pages = 3000};
    r.stalls[MEMSTALL_DIRECT_RECLAIM] = {.stalls = 1, .ns = 10, .reclaimed_pages = 32};
    r.stalls[MEMSTALL_SWAPIN] = {.stalls = 1, .ns = 10};
    const TableLayout layout = full_layout(10);
    const std::string heading = table_heading(layout), text = row_text(r, 2, layout);
    const size_t column = heading.find(" RECL/s");
    ASSERT_NE(std::string::npos, column);
    EXPECT_EQ("   1516", text.substr(column, 7)) << text;
    HostInterval host;
    host.interval_s = 2;
    const auto j = snapshot_json(host, {r}, {}, "12:00:00");
    EXPECT_EQ(3032u, j["cgroups"][0]["reclaimed_pages"]);
    EXPECT_EQ(3000u, j["cgroups"][0]["causes"]["memcg"]["reclaimed_pages"]);
    EXPECT_FALSE(j["cgroups"][0]["causes"]["swapin"].contains("reclaimed_pages"));
}

// pgsteal_anon + pgsteal_file count every reclaim; the global reclaimers' counters less.
TEST(TopFormat, MemcgReclaimFromVmstat) {
    EXPECT_EQ(std::optional<uint64_t>(700), memcg_reclaim_pages({{"pgsteal_anon", 100},
                                                                 {"pgsteal_file", 900},
                                                                 {"pgsteal_kswapd", 200},
                                                                 {"pgsteal_direct", 50},
                                                                 {"pgsteal_khugepaged", 50}}));
    EXPECT_EQ(std::nullopt, memcg_reclaim_pages({{"pgsteal_kswapd", 200}})); // before 5.8
    // Counters read a moment apart: never below 0.
    EXPECT_EQ(
        std::optional<uint64_t>(0),
        memcg_reclaim_pages({{"pgsteal_anon", 0}, {"pgsteal_file", 10}, {"pgsteal_kswapd", 12}}));
}

TEST(TopFormat, StatusLineKeepsItsKeys) {
    const std::string status =
        "1 of 3  Enter processes  < > sort: STALL%  / filter  a all  n names  h help  q quit";
    EXPECT_EQ(status, fit_status(status, 100));
    const std::string fitted = fit_status(status, 60);
    EXPECT_EQ(60u, fitted.size());
    EXPECT_TRUE(fitted.ends_with("...  h help  q quit")) << fitted;
    EXPECT_TRUE(fitted.starts_with("1 of 3  Enter processes")) << fitted;
}

TEST(TopFormat, FoldLinesBreaksAfterSeparators) {
    EXPECT_EQ("Per second: reclaim 1;\n  compaction 2\n",
              fold_lines("Per second: reclaim 1; compaction 2\n", 24));
    EXPECT_EQ("short\n", fold_lines("short\n", 24));
    // A line of one long word is cut where it must.
    EXPECT_EQ("abcdefghij\n  klmnop\n", fold_lines("abcdefghijklmnop\n", 10));
}

TEST(TopFormat, LimitShowsTheLowerOfHighAndMax) {
    CgroupInterval r = row(1, "/x", 0);
    r.memory.max_bytes = 64 << 20;
    r.memory.high_bytes = 48 << 20;
    EXPECT_NE(std::string::npos, row_text(r, 1, full_layout(8)).find(" 48Mh "));
    r.memory.max_bytes.reset();
    r.memory.high_bytes.reset();
    r.psi_some_us.reset();
    // No limit, no PSI.
    const std::string text = row_text(r, 1, full_layout(8));
    EXPECT_NE(std::string::npos, text.find("      - "));
    EXPECT_EQ("     -", text.substr(text.size() - 6));
}

TEST(TopFormat, HeaderSaysWhatIsNotMeasured) {
    HostInterval host;
    host.interval_s = 2;
    host.now.meminfo = {{"MemTotal", 8ull << 30}, {"MemAvailable", 6ull << 30}};
    host.vmstat_delta = {{"pgsteal_direct", 200},
                         {"allocstall_normal", 6},
                         {"allocstall_movable", 4},
                         {"compact_stall", 1},
                         {"workingset_refault_file", 30}};
    host.stalls[MEMSTALL_DIRECT_RECLAIM] = {10, 4'000'000, 1'000'000};
    const std::string text = header_text(host, {{MEMSTALL_OTHER, "no PSI"}}, "12:00:00");
    EXPECT_NE(std::string::npos, text.find("Mem: 8.0G total, 6.0G available"));
    EXPECT_NE(std::string::npos, text.find("PSI memory: not available"));
    EXPECT_NE(std::string::npos, text.find("direct 4.0"));
    EXPECT_NE(std::string::npos, text.find("other -"));
    // Per second over 2 s: 100 pages, 5 stalls, 0.5 compactions, 15 refaults.
    EXPECT_NE(std::string::npos, text.find("reclaim 100 direct (5.0 stalls)"));
    EXPECT_NE(std::string::npos, text.find("compaction 0.5 stalls"));
    EXPECT_NE(std::string::npos, text.find("refaults 15"));
    EXPECT_NE(std::string::npos, text.find("memlat top itself: not read"));
    host.self = SelfCost{0.0125, 2.5 * (1 << 20), 3 << 20};
    const std::string with_self = header_text(host, {}, "12:00:00");
    EXPECT_NE(std::string::npos,
              with_self.find("memlat top itself: 1.25% of a CPU, 2.5M RSS, 3.0M of BPF maps\n"))
        << with_self;
    EXPECT_EQ(header_lines,
              static_cast<size_t>(std::count(with_self.begin(), with_self.end(), '\n')));
}

// TLB shootdowns per second where the CPUs handle them; a guest whose hypervisor flushes says
// so rather than 0; none where there is no TLB row (arm64).
TEST(TopFormat, HeaderTlbShootdowns) {
    HostInterval host;
    host.interval_s = 2;
    EXPECT_EQ(std::string::npos, header_text(host, {}, "12:00:00").find("TLB"));
    host.tlb_shootdowns = 3000;
    host.remote_flushes = FlushPath::Mixed;
    const std::string text = header_text(host, {}, "12:00:00");
    EXPECT_NE(std::string::npos, text.find("refaults 0; TLB shootdowns 1500\n")) << text;
    host.tlb_shootdowns = 0;
    host.remote_flushes = FlushPath::Hypervisor;
    EXPECT_NE(std::string::npos,
              header_text(host, {}, "12:00:00").find("TLB shootdowns - (the hypervisor flushes)"));
    const auto j = snapshot_json(host, {}, {}, "12:00:00");
    EXPECT_EQ(0, j["host"]["tlb_shootdowns"]);
    EXPECT_EQ("hypervisor", j["host"]["remote_flush_path"]);
}

TEST(TopFormat, Json) {
    HostInterval host;
    host.interval_s = 1;
    host.psi_some_us = 1500;
    host.stalls[MEMSTALL_MEMCG_RECLAIM] = {3, 9000, 5000};
    CgroupInterval r = row(9, "/a", 9000);
    r.memory.max_bytes = 4096;
    auto j = snapshot_json(host, {r}, {{MEMSTALL_OTHER, "why"}}, "12:00:00");
    EXPECT_EQ(1500, j["host"]["psi_some_us"]);
    EXPECT_TRUE(j["host"]["psi_full_us"].is_null());
    EXPECT_EQ(9000, j["host"]["causes"]["memcg"]["ns"]);
    ASSERT_EQ(1u, j["cgroups"].size());
    EXPECT_EQ("/a", j["cgroups"][0]["cgroup"]);
    EXPECT_TRUE(j["cgroups"][0]["name"].is_null());
    EXPECT_EQ(9000, j["cgroups"][0]["stall_ns"]);
    EXPECT_EQ(4096, j["cgroups"][0]["max_bytes"]);
    EXPECT_TRUE(j["cgroups"][0]["high_bytes"].is_null());
    EXPECT_EQ("why", j["unmeasured_causes"]["other"]);
    EXPECT_TRUE(j["self"].is_null());
    host.self = SelfCost{0.5, 4096, 8192};
    EXPECT_EQ(8192, snapshot_json(host, {}, {}, "12:00:00")["self"]["bpf_map_bytes"]);
}

TEST(TopFormat, SortByTheChosenColumn) {
    std::vector<CgroupInterval> rows{row(1, "/b", 100, 50, 3 << 20), row(2, "/a", 900, 10, 1 << 20),
                                     row(3, "/c", 0, 70, 2 << 20)};
    rows[2].events_since_start = {{"max", 4}, {"high", 1}};
    rows[0].events_since_start = {{"max", 2}};
    auto order = [&](SortKey key) {
        sort_rows(rows, key);
        std::string out;
        for (const auto &r : rows)
            out += r.path;
        return out;
    };
    EXPECT_EQ("/a/b/c", order(SortKey::Stall));
    EXPECT_EQ("/b/c/a", order(SortKey::Usage));
    EXPECT_EQ("/c/b/a", order(SortKey::Events)); // 5, 2, 0
    EXPECT_EQ("/c/b/a", order(SortKey::Psi));
    EXPECT_EQ("/a/b/c", order(SortKey::Path));
    EXPECT_EQ(5u, events_total(rows[2]));
    // Every key's name is a column of the heading, so the screen can mark it.
    for (SortKey key : sort_keys)
        EXPECT_NE(std::string::npos, table_heading(full_layout(20)).find(sort_key_name(key)))
            << sort_key_name(key);
}

TEST(TopFormat, FilterByPathOrName) {
    CgroupInterval r = row(1, "/system.slice/docker-4d5e.scope", 0);
    r.name = "docker 4d5e";
    EXPECT_TRUE(row_matches(r, ""));
    EXPECT_TRUE(row_matches(r, "system.slice"));
    EXPECT_TRUE(row_matches(r, "docker 4d"));
    EXPECT_FALSE(row_matches(r, "kubepods"));
}
