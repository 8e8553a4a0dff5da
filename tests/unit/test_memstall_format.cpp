#include <gtest/gtest.h>

#include <cstring>
#include <fmt/format.h>

#include "memstall_entry.h"
#include "sources/stalls.h"

using namespace memlat;
using memstall::Grouping;

namespace {

// The two snapshots of an interval: process 10's thread 10 stalled in memcg reclaim 3 times for
// 4 ms in it, process 20's thread 20 on dirty pages 3 times for 30 ms (its first stalls). The
// tests add process 10's other threads.
struct Interval {
    memstall::Snapshot before, now;
};

Interval reader_and_writer() {
    Interval i;
    i.before[{10, MEMSTALL_MEMCG_RECLAIM}] = memstall_entry(10, "reader", 7, 5, 5'000'000);
    i.now[{10, MEMSTALL_MEMCG_RECLAIM}] = memstall_entry(10, "reader", 7, 8, 9'000'000);
    i.now[{20, MEMSTALL_DIRTY}] = memstall_entry(20, "writer", 8, 3, 30'000'000);
    return i;
}

} // namespace

TEST(MemstallFormat, CauseNames) {
    EXPECT_STREQ(memstall::cause_name(MEMSTALL_MEMCG_RECLAIM), "memcg");
    EXPECT_STREQ(memstall::cause_name(MEMSTALL_THRASHING), "thrash");
    EXPECT_STREQ(memstall::cause_name(MEMSTALL_OTHER), "other");
    EXPECT_STREQ(memstall::cause_name(MEMSTALL_CAUSES), "unknown");
}

TEST(MemstallFormat, RowsAreIntervalDeltasPerProcessLargestFirst) {
    auto [before, now] = reader_and_writer();
    // Process 10's second thread; process 20, with one, still stalled more in this interval.
    now[{11, MEMSTALL_THRASHING}] = memstall_entry(10, "reader", 7, 2, 1'000'000);
    // A thread in `before` only (its entry was removed): it adds nothing.
    before[{12, MEMSTALL_OTHER}] = memstall_entry(10, "reader", 7, 1, 1);
    const auto rows = memstall::rows(now, before, Grouping::Process, {});
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].id, 20u);
    EXPECT_EQ(rows[0].name, "writer");
    EXPECT_EQ(rows[0].total_ns(), 30'000'000u);
    EXPECT_EQ(rows[1].id, 10u);
    EXPECT_EQ(rows[1].causes[MEMSTALL_MEMCG_RECLAIM].stalls, 3u);
    EXPECT_EQ(rows[1].causes[MEMSTALL_MEMCG_RECLAIM].ns, 4'000'000u);
    EXPECT_EQ(rows[1].causes[MEMSTALL_THRASHING].stalls, 2u);
    EXPECT_EQ(rows[1].total_ns(), 5'000'000u);
}

TEST(MemstallFormat, RowsPerThreadOfOneProcess) {
    auto [before, now] = reader_and_writer();
    // Process 10's threads 10 and 11 (each named by its own comm), process 20's thread 20.
    now[{11, MEMSTALL_THRASHING}] = memstall_entry(10, "worker", 7, 2, 6'000'000);
    const auto rows = memstall::rows(now, before, Grouping::Thread, {});
    ASSERT_EQ(rows.size(), 3u);
    EXPECT_EQ(rows[1].id, 11u);
    EXPECT_EQ(rows[1].name, "worker");
    EXPECT_EQ(rows[1].total_ns(), 6'000'000u);
    EXPECT_EQ(rows[2].id, 10u);
    EXPECT_EQ(rows[2].total_ns(), 4'000'000u);
    EXPECT_EQ(0u, memstall::header(Grouping::Thread).find("TID     COMM"));
    EXPECT_EQ(11, memstall::json_row(rows[1], 1.0, Grouping::Thread)["tid"]);
}

TEST(MemstallFormat, RowsPerCgroupNamedByPath) {
    memstall::Snapshot now;
    now[{10, MEMSTALL_MEMCG_RECLAIM}] = memstall_entry(10, "a", 7, 1, 100);
    now[{20, MEMSTALL_MEMCG_RECLAIM}] = memstall_entry(20, "b", 7, 1, 200);
    now[{30, MEMSTALL_OTHER}] = memstall_entry(30, "c", 9, 1, 50);
    const auto rows = memstall::rows(now, {}, Grouping::Cgroup, {{7, "/db"}});
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].name, "/db");
    EXPECT_EQ(rows[0].total_ns(), 300u);
    EXPECT_EQ(rows[1].name, "9"); // a cgroup removed since: its id
}

TEST(MemstallFormat, TableAndJson) {
    memstall::Row row;
    row.id = 42;
    row.name = "reader";
    row.causes[MEMSTALL_MEMCG_RECLAIM] = {3, 250'000'000, 100'000'000};
    row.causes[MEMSTALL_OTHER] = {1, 250'000'000, 250'000'000};
    EXPECT_EQ(memstall::header(Grouping::Process),
              "PID     COMM             STALL%  TOTAL(ms)   DIRECT    MEMCG  COMPACT    DIRTY"
              "   SWAPIN     HIGH   THRASH    OTHER  COMMAND");
    EXPECT_EQ(memstall::line(row, 2.0, Grouping::Process),
              "42      reader             25.0      500.0      0.0    250.0      0.0      0.0"
              "      0.0      0.0      0.0    250.0");
    EXPECT_EQ(memstall::json_row(row, 2.0, Grouping::Process)["title"], nullptr);
    row.title = "reader --passes 2";
    EXPECT_TRUE(memstall::line(row, 2.0, Grouping::Process).ends_with("250.0  reader --passes 2"));
    // A thread's row has no COMMAND: its process's title is not its own.
    EXPECT_FALSE(memstall::header(Grouping::Thread).ends_with("COMMAND"));
    EXPECT_FALSE(memstall::line(row, 2.0, Grouping::Thread).ends_with("--passes 2"));
    const auto j = memstall::json_row(row, 2.0, Grouping::Process);
    EXPECT_EQ(j["title"], "reader --passes 2");
    EXPECT_EQ(j["pid"], 42);
    EXPECT_EQ(j["stall_ns"], 500'000'000u);
    EXPECT_DOUBLE_EQ(j["stall_pct"].get<double>(), 25.0);
    EXPECT_EQ(j["causes"]["memcg"]["stalls"], 3);
    EXPECT_FALSE(j["causes"].contains("direct"));
}

#include "memstall/memstall_metrics.h"

TEST(MemstallMetrics, CausesAndCgroupsKeepCountingAfterThreadsGo) {
    PrometheusOptions options;
    options.labels = {"cgroup"};
    memstall::Metrics metrics(options, "");
    memstall::Counts counts;
    counts.causes[MEMSTALL_MEMCG_RECLAIM] = true;
    counts.totals[MEMSTALL_MEMCG_RECLAIM] = {5, 2'000'000'000};
    counts.cgroup_paths = {{7, "/db"}};
    counts.threads = {{{10, MEMSTALL_MEMCG_RECLAIM}, memstall_entry(10, "a", 7, 5, 2'000'000'000)}};
    {
        prometheus::Exposition out;
        metrics.collect(counts, out);
        const auto text = out.render(prometheus::Format::Text);
        EXPECT_NE(text.find("memlat_memstall_stalls_total{cause=\"memcg\"} 5"), std::string::npos)
            << text;
        // Not measured: no series of its own, and the gauge says so.
        EXPECT_EQ(text.find("memlat_memstall_stalls_total{cause=\"thrash\""), std::string::npos)
            << text;
        EXPECT_NE(text.find("memlat_memstall_cause_measured{cause=\"thrash\"} 0"),
                  std::string::npos)
            << text;
        EXPECT_NE(text.find("memlat_memstall_cause_measured{cause=\"memcg\"} 1"), std::string::npos)
            << text;
        EXPECT_NE(text.find("memlat_memstall_cgroup_stall_seconds_total{cause=\"memcg\","
                            "cgroup=\"/db\"} 2"),
                  std::string::npos)
            << text;
    }
    // The thread exited and its entry was removed: the cgroup's series keeps its count.
    counts.threads.clear();
    prometheus::Exposition out;
    metrics.collect(counts, out);
    const auto text = out.render(prometheus::Format::Text);
    EXPECT_NE(text.find("memlat_memstall_cgroup_stalls_total{cause=\"memcg\","
                        "cgroup=\"/db\"} 5"),
              std::string::npos)
        << text;
}

// ---- -s: the most stalled stacks ----

namespace {

memstall::StackRow stack_row(uint32_t pid, uint32_t cause, uint64_t total_ns, const char *comm) {
    memstall::StackRow row{};
    row.first.pid = pid;
    row.first.cause = cause;
    row.second.stalls = total_ns / 1000;
    row.second.total_ns = total_ns;
    std::strncpy(row.second.comm, comm, sizeof(row.second.comm));
    return row;
}

} // namespace

TEST(MemstallStacks, ThePerCauseLongestInCauseOrder) {
    const std::vector<memstall::StackRow> rows{
        stack_row(1, 1, 5'000, "a"), stack_row(2, 0, 9'000, "b"), stack_row(3, 1, 7'000, "c"),
        stack_row(4, 1, 6'000, "d"), stack_row(5, 0, 1'000, "e"), stack_row(6, 1, 7'000, "f")};
    const auto shown = memstall::most_stalled_stacks(rows, 2);
    std::vector<uint32_t> pids;
    for (const auto &r : shown)
        pids.push_back(r.first.pid);
    // Cause 0: b, e; cause 1: the two longest, c before f (equal: the table's order).
    EXPECT_EQ(pids, (std::vector<uint32_t>{2, 5, 3, 6}));
}

TEST(MemstallStacks, TextAndJson) {
    std::vector<memstall::StallStack> stacks{{stack_row(42, 0, 2'500'000, "reader"),
                                              {"shrink_node", "try_to_free_mem_cgroup_pages"},
                                              {"[no user stack]"}}};
    const std::string text = memstall::stacks_text(stacks);
    EXPECT_NE(text.find(fmt::format("\n{}: 2500 stalls, 2.5 ms, pid 42 (reader)\n"
                                    "    shrink_node\n    try_to_free_mem_cgroup_pages\n"
                                    "    --\n    [no user stack]\n",
                                    memstall::cause_name(0))),
              std::string::npos)
        << text;
    const auto j = memstall::stacks_json(stacks);
    ASSERT_EQ(j["stacks"].size(), 1u);
    EXPECT_EQ(j["stacks"][0]["cause"], memstall::cause_name(0));
    EXPECT_EQ(j["stacks"][0]["pid"], 42);
    EXPECT_EQ(j["stacks"][0]["comm"], "reader");
    EXPECT_EQ(j["stacks"][0]["ns"], 2'500'000);
    EXPECT_EQ(j["stacks"][0]["kernel_stack"].size(), 2u);
    EXPECT_EQ(j["stacks"][0]["user_stack"][0], "[no user stack]");
    EXPECT_EQ(memstall::stacks_json({}), nlohmann::json({{"stacks", nlohmann::json::array()}}));
}

// -r cuts rows, never stalls: the rows shown plus what was left out add up to the totals.
TEST(MemstallRows, RowsLeftOutAreSummed) {
    std::vector<memstall::Row> rows(3);
    for (size_t i = 0; i < rows.size(); ++i) {
        rows[i].id = 100 + i;
        rows[i].name = "reader";
        rows[i].causes[MEMSTALL_MEMCG_RECLAIM] = {
            .stalls = 10 - i, .ns = 1000000 * (3 - i), .max_ns = 5, .reclaimed_pages = 100 + i};
    }
    const auto shown = memstall::cut_rows(rows, 1);
    ASSERT_EQ(1u, shown.rows.size());
    EXPECT_EQ(100u, shown.rows[0].id);
    EXPECT_EQ(2u, shown.rows_left_out);
    EXPECT_EQ(3000000u, shown.left_out.total_ns());
    EXPECT_EQ(6000000u, shown.totals.total_ns());
    EXPECT_EQ(shown.totals.total_ns(), shown.rows[0].total_ns() + shown.left_out.total_ns());
    nlohmann::json j;
    memstall::json_totals(shown, j);
    EXPECT_EQ(27u, j["total"]["causes"]["memcg"]["stalls"]);
    EXPECT_EQ(303u, j["total"]["causes"]["memcg"]["reclaimed_pages"]);
    EXPECT_EQ(6000000u, j["total"]["stall_ns"]);
    EXPECT_EQ(203u, j["left_out_total"]["causes"]["memcg"]["reclaimed_pages"]);
    EXPECT_EQ(2u, j["left_out_total"]["rows"]);
    EXPECT_EQ(3000000u, j["left_out_total"]["stall_ns"]);
    EXPECT_EQ("2 more processes (3.0 ms of stalls) not shown: -r 1",
              memstall::left_out_line(shown, memstall::Grouping::Process));
    const auto all = memstall::cut_rows(rows, 20);
    EXPECT_EQ(0u, all.rows_left_out);
    EXPECT_EQ("", memstall::left_out_line(all, memstall::Grouping::Process));
}
