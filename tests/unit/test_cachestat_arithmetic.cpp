#include <gtest/gtest.h>

#include "cachestat/cachestat_format.h"

using namespace memlat;
using cachestat::Counts;

TEST(CachestatArithmetic, HitsAreAccessesMinusMissesClampedAtZero) {
    EXPECT_EQ(cachestat::hits({16384, 0, 0}), 16384u);
    EXPECT_EQ(cachestat::hits({16384, 16384, 0}), 0u);
    EXPECT_EQ(cachestat::hits({100, 30, 7}), 70u);
    // Read-ahead ran ahead of the reads in this window: no negative hits.
    EXPECT_EQ(cachestat::hits({10, 500, 0}), 0u);
}

TEST(CachestatArithmetic, RatioIsHitsOverAccessesAndUndefinedWithoutAccesses) {
    EXPECT_DOUBLE_EQ(*cachestat::hit_ratio({200, 50, 0}), 75.0);
    EXPECT_DOUBLE_EQ(*cachestat::hit_ratio({16384, 0, 0}), 100.0);
    EXPECT_DOUBLE_EQ(*cachestat::hit_ratio({10, 500, 0}), 0.0);
    EXPECT_FALSE(cachestat::hit_ratio({0, 0, 0}).has_value());
    EXPECT_FALSE(cachestat::hit_ratio({0, 4096, 4096}).has_value()); // a pure writer
}

TEST(CachestatArithmetic, OrderToPages) {
    EXPECT_EQ(cachestat::order_pages(0), 1u);
    EXPECT_EQ(cachestat::order_pages(2), 4u);
    EXPECT_EQ(cachestat::order_pages(9), 512u);
    EXPECT_EQ(cachestat::order_pages(18), 262144u);
    EXPECT_EQ(cachestat::order_pages(CACHESTAT_MAX_ORDER + 1), 1u); // garbage is one page
    EXPECT_EQ(cachestat::order_pages(255), 1u);
}

TEST(CachestatArithmetic, FilePages) {
    EXPECT_EQ(cachestat_file_pages(0, 12), 0u);
    EXPECT_EQ(cachestat_file_pages(-1, 12), 0u);
    EXPECT_EQ(cachestat_file_pages(1, 12), 1u);
    EXPECT_EQ(cachestat_file_pages(4096, 12), 1u);
    EXPECT_EQ(cachestat_file_pages(4097, 12), 2u);
    EXPECT_EQ(cachestat_file_pages(64ll << 20, 12), 16384u);
}

TEST(CachestatArithmetic, ReadBatchesOfOneReadCountOnce) {
    // A 1 MiB read at 0 of a large file: the kernel reports [0,255], then [31,255], [62,255]...
    cachestat_cursor cur{};
    EXPECT_EQ(cachestat_read_pages(&cur, 0xA, 0, 255, 16384), 256u);
    EXPECT_EQ(cachestat_read_pages(&cur, 0xA, 31, 255, 16384), 0u);
    EXPECT_EQ(cachestat_read_pages(&cur, 0xA, 62, 255, 16384), 0u);
    // The next read continues where this one ended: all new.
    EXPECT_EQ(cachestat_read_pages(&cur, 0xA, 256, 511, 16384), 256u);
    // Reading the same range again is a new look-up (a second pass).
    EXPECT_EQ(cachestat_read_pages(&cur, 0xA, 256, 511, 16384), 256u);
    EXPECT_EQ(cachestat_read_pages(&cur, 0xA, 0, 255, 16384), 256u);
}

TEST(CachestatArithmetic, ContinuationThatReachesFurtherCountsTheRest) {
    cachestat_cursor cur{};
    EXPECT_EQ(cachestat_read_pages(&cur, 1, 10, 20, ~0ull), 11u);
    EXPECT_EQ(cachestat_read_pages(&cur, 1, 15, 25, ~0ull), 5u);
    EXPECT_EQ(cachestat_read_pages(&cur, 1, 21, 25, ~0ull), 0u);
}

TEST(CachestatArithmetic, OtherFileIsNotAContinuation) {
    cachestat_cursor cur{};
    EXPECT_EQ(cachestat_read_pages(&cur, 1, 0, 255, ~0ull), 256u);
    EXPECT_EQ(cachestat_read_pages(&cur, 2, 31, 255, ~0ull), 225u);
}

TEST(CachestatArithmetic, ReadsPastTheEndOfTheFileAreClamped) {
    cachestat_cursor cur{};
    // A 1 MiB read at 0 of a 10-page file looks up 10 pages.
    EXPECT_EQ(cachestat_read_pages(&cur, 1, 0, 255, 10), 10u);
    // Entirely past the end, or an empty file: nothing, and the cursor is forgotten.
    EXPECT_EQ(cachestat_read_pages(&cur, 1, 10, 20, 10), 0u);
    EXPECT_EQ(cur.mapping, 0u);
    EXPECT_EQ(cachestat_read_pages(&cur, 1, 0, 0, 0), 0u);
    // Unknown size: the pages asked for.
    EXPECT_EQ(cachestat_read_pages(&cur, 1, 0, 255, CACHESTAT_SIZE_UNKNOWN), 256u);
}

TEST(CachestatArithmetic, CountsSinceAndSum) {
    Counts a{100, 20, 3}, b{40, 5, 1};
    EXPECT_EQ(a.since(b), (Counts{60, 15, 2}));
    EXPECT_EQ(b.since(a), (Counts{0, 0, 0})); // never negative
    a += b;
    EXPECT_EQ(a, (Counts{140, 25, 4}));
    EXPECT_EQ(a.activity(), 169u);
    cachestat_counts raw{};
    raw.c[CACHESTAT_ACCESSES] = 7;
    raw.c[CACHESTAT_MISSES] = 8;
    raw.c[CACHESTAT_DIRTIES] = 9;
    EXPECT_EQ(Counts::from(raw), (Counts{7, 8, 9}));
}
