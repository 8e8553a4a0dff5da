#include <gtest/gtest.h>

#include "cachestat/cachestat_format.h"

using namespace memlat;
using cachestat::Counts;

namespace {

cachestat::Meminfo mem() {
    return cachestat::parse_meminfo("MemTotal:       24684000 kB\n"
                                    "Buffers:          247296 kB\n"
                                    "Cached:          2723840 kB\n"
                                    "SwapCached:            0 kB\n");
}

} // namespace

TEST(CachestatFormat, MeminfoBuffersAndCachedInMiB) {
    auto m = mem();
    EXPECT_DOUBLE_EQ(*m.buffers_mb, 241.5);
    EXPECT_DOUBLE_EQ(*m.cached_mb, 2660.0); // not SwapCached
    auto none = cachestat::parse_meminfo("MemTotal: 1 kB\n");
    EXPECT_FALSE(none.buffers_mb || none.cached_mb);
}

TEST(CachestatFormat, DefaultLineHasBccColumns) {
    cachestat::LineFormat f;
    EXPECT_EQ(cachestat::header(f), "    HITS   MISSES  DIRTIES HITRATIO   BUFFERS_MB  CACHED_MB");
    EXPECT_EQ(cachestat::line({1132, 4, 7, 1128}, mem(), f, "12:00:00"),
              "    1128        4        7   99.65%          242       2660");
}

TEST(CachestatFormat, TimestampColumn) {
    cachestat::LineFormat f{true, true};
    EXPECT_EQ(cachestat::header(f),
              "TIME         HITS   MISSES  DIRTIES HITRATIO   BUFFERS_MB  CACHED_MB");
    EXPECT_EQ(cachestat::line({0, 0, 0}, mem(), f, "12:34:56"),
              "12:34:56        0        0        0        -          242       2660");
}

TEST(CachestatFormat, UnavailableHitsPrintAsDash) {
    cachestat::LineFormat f{false, false};
    EXPECT_EQ(cachestat::line({999, 16384, 0}, {}, f, ""),
              "       -    16384        0        -            -          -");
    auto j = cachestat::json_counts({999, 16384, 0}, false);
    EXPECT_TRUE(j["hits"].is_null());
    EXPECT_TRUE(j["accesses"].is_null());
    EXPECT_TRUE(j["hit_ratio_pct"].is_null());
    EXPECT_EQ(j["misses"], 16384);
}

TEST(CachestatFormat, TotalLine) {
    EXPECT_EQ("Total over 12.0 s: HITS 150 MISSES 50 DIRTIES 3 HITRATIO 75.00% (ACCESSES 200)",
              cachestat::total_line({200, 50, 3, 150}, 12.04, true));
    // Accesses not known: neither are hits nor the ratio.
    EXPECT_EQ("Total over 1.5 s: HITS - MISSES 50 DIRTIES 0 HITRATIO - (ACCESSES -)",
              cachestat::total_line({0, 50, 0}, 1.5, false));
    // Nothing accessed: no ratio.
    EXPECT_EQ("Total over 1.0 s: HITS 0 MISSES 0 DIRTIES 2 HITRATIO - (ACCESSES 0)",
              cachestat::total_line({0, 0, 2}, 1.0, true));
}

TEST(CachestatFormat, JsonCounts) {
    auto j = cachestat::json_counts({200, 50, 3, 150}, true);
    EXPECT_EQ(j["accesses"], 200);
    EXPECT_EQ(j["hits"], 150);
    EXPECT_EQ(j["misses"], 50);
    EXPECT_EQ(j["dirties"], 3);
    EXPECT_DOUBLE_EQ(j["hit_ratio_pct"].get<double>(), 75.0);
    EXPECT_TRUE(cachestat::json_counts({0, 5, 0}, true)["hit_ratio_pct"].is_null());
}

TEST(CachestatFormat, ProcessTable) {
    cachestat::ProcRow r{4242, 1000, "postgres", {16384, 384, 12, 16000}};
    EXPECT_EQ(cachestat::proc_header(),
              "    PID    UID COMM                  HITS    MISSES   DIRTIES READ_HIT%");
    EXPECT_EQ(cachestat::proc_line(r, true),
              "   4242   1000 postgres             16000       384        12    97.66%");
    auto j = cachestat::proc_json(r, true);
    EXPECT_EQ(j["pid"], 4242);
    EXPECT_EQ(j["uid"], 1000);
    EXPECT_EQ(j["comm"], "postgres");
    EXPECT_EQ(j["hits"], 16000);
    EXPECT_EQ(cachestat::table_title("10:00:00", mem()),
              "10:00:00 Buffers MB: 242 / Cached MB: 2660");
}

TEST(CachestatFormat, RowsSortedByActivity) {
    std::vector<cachestat::ProcRow> rows{
        {1, 0, "a", {10, 0, 0}}, {2, 0, "b", {0, 50, 0}}, {3, 0, "c", {5, 5, 0}}};
    cachestat::sort_rows(rows);
    EXPECT_EQ(rows[0].pid, 2u);
    EXPECT_EQ(rows[1].pid, 1u); // ties: lower PID first
    EXPECT_EQ(rows[2].pid, 3u);
}

TEST(CachestatFormat, FileTable) {
    uint32_t dev = (254u << 20) | 3;
    EXPECT_EQ(cachestat::dev_name(dev), "254:3");
    EXPECT_EQ(cachestat::dev_major(dev), 254u);
    EXPECT_EQ(cachestat::dev_minor(dev), 3u);
    cachestat::FileRow r{dev, 10962084, std::string("/data/base/16384/2619"), {100, 100, 0}};
    EXPECT_EQ(cachestat::file_header(),
              "      DEV          INO      HITS    MISSES   DIRTIES  HITRATIO PATH");
    EXPECT_EQ(cachestat::file_line(r, true),
              "    254:3     10962084         0       100         0     0.00% "
              "/data/base/16384/2619");
    r.path.reset();
    EXPECT_EQ(cachestat::file_line(r, true).back(), '-');
    auto j = cachestat::file_json(r, true);
    EXPECT_EQ(j["dev"], "254:3");
    EXPECT_EQ(j["ino"], 10962084);
    EXPECT_TRUE(j["path"].is_null());
}
