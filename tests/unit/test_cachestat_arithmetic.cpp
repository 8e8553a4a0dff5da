#include <gtest/gtest.h>

#include "cachestat/cachestat_format.h"

using namespace memlat;
using cachestat::Counts;
using cachestat::counts_of;

// A read(2) of 8 cold pages: its read-ahead adds 32 (misses first), the access matches 8 of
// them; the next read of 8 matches 8 more; a read of another file is all hits.
TEST(CachestatMatch, ReadAheadMissesMatchTheReadsThatFollow) {
    cachestat_match m{};
    EXPECT_EQ(cachestat_match_miss(&m, 0xA, 32), 0u);
    EXPECT_EQ(cachestat_settle_owed(&m), 0u);
    EXPECT_EQ(cachestat_match_access(&m, 0xA, 8, false), 0u);
    EXPECT_EQ(cachestat_match_access(&m, 0xA, 8, false), 0u);
    EXPECT_EQ(m.pending, 16u);
    EXPECT_EQ(cachestat_match_access(&m, 0xB, 8, false), 8u);
    // Back in the first file: 16 misses are still pending; 20 accessed, 4 hit.
    EXPECT_EQ(cachestat_match_access(&m, 0xA, 20, false), 4u);
    EXPECT_EQ(m.pending, 0u);
}

// A miss in another file replaces what was pending: those pages were never read by the
// thread, and must not turn later hits of that file into misses.
TEST(CachestatMatch, PendingMissesBelongToOneFile) {
    cachestat_match m{};
    cachestat_match_miss(&m, 0xA, 32);
    cachestat_match_miss(&m, 0xB, 4);
    EXPECT_EQ(m.pending, 4u);
    EXPECT_EQ(cachestat_match_access(&m, 0xA, 10, false), 10u);
}

// An mmap fault: the access comes first and is owed; the read-ahead it starts matches it.
// A fault on a cached page is owed too, and turns into a hit at the next access.
TEST(CachestatMatch, FaultAccessWaitsForItsReadAhead) {
    cachestat_match m{};
    EXPECT_EQ(cachestat_match_access(&m, 0xA, 1, true), 0u);
    EXPECT_EQ(m.owed, 1u);
    EXPECT_EQ(cachestat_match_miss(&m, 0xA, 32), 0u); // the owed page was a miss
    EXPECT_EQ(m.owed, 0u);
    EXPECT_EQ(m.pending, 31u);
    // Fault-around over 16 of the pages read ahead: matched, nothing owed.
    EXPECT_EQ(cachestat_match_access(&m, 0xA, 16, true), 0u);
    EXPECT_EQ(m.owed, 0u);
    EXPECT_EQ(cachestat_match_access(&m, 0xA, 16, true), 0u);
    EXPECT_EQ(m.owed, 1u); // 15 matched, one page beyond the read-ahead
    EXPECT_EQ(cachestat_settle_owed(&m), 1u);
    EXPECT_EQ(m.owed, 0u);
}

// An owed access followed by a miss in another file was a hit.
TEST(CachestatMatch, OwedAccessIsAHitWhenTheNextMissIsElsewhere) {
    cachestat_match m{};
    cachestat_match_access(&m, 0xA, 3, true);
    EXPECT_EQ(cachestat_match_miss(&m, 0xB, 5), 3u);
    EXPECT_EQ(m.owed, 0u);
    EXPECT_EQ(m.pending, 5u);
}

// A write that creates pages: misses the dirtying takes off again, so the writer's later
// reads of the file are hits.
TEST(CachestatMatch, PagesAWriteCreatedAreNotPending) {
    cachestat_match m{};
    cachestat_match_miss(&m, 0xA, 4);
    cachestat_match_dirty(&m, 0xA, 4);
    EXPECT_EQ(m.pending, 0u);
    cachestat_match_dirty(&m, 0xA, 4); // never below 0
    EXPECT_EQ(m.pending, 0u);
    EXPECT_EQ(cachestat_match_access(&m, 0xA, 4, false), 4u);
}

TEST(CachestatArithmetic, RatioIsHitsOverAccessesAndUndefinedWithoutAccesses) {
    EXPECT_DOUBLE_EQ(*cachestat::hit_ratio({200, 50, 0, 150}), 75.0);
    EXPECT_DOUBLE_EQ(*cachestat::hit_ratio({16384, 0, 0, 16384}), 100.0);
    EXPECT_DOUBLE_EQ(*cachestat::hit_ratio({10, 500, 0, 0}), 0.0);
    // A hit owed from the interval before: at most 100%.
    EXPECT_DOUBLE_EQ(*cachestat::hit_ratio({10, 0, 0, 11}), 100.0);
    EXPECT_FALSE(cachestat::hit_ratio({0, 0, 0, 0}).has_value());
    EXPECT_FALSE(cachestat::hit_ratio({0, 4096, 4096, 0}).has_value()); // a pure writer
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
    Counts a{100, 20, 3, 80}, b{40, 5, 1, 35};
    EXPECT_EQ(a.since(b), (Counts{60, 15, 2, 45}));
    EXPECT_EQ(b.since(a), (Counts{0, 0, 0, 0})); // never negative
    a += b;
    EXPECT_EQ(a, (Counts{140, 25, 4, 115}));
    EXPECT_EQ(a.activity(), 169u);
    // Hits alone (settled at a thread's exit) still make a row.
    EXPECT_TRUE((Counts{0, 0, 0, 16}).counted_any());
    EXPECT_FALSE((Counts{}).counted_any());
    cachestat_counts raw{};
    raw.c[CACHESTAT_ACCESSES] = 7;
    raw.c[CACHESTAT_MISSES] = 8;
    raw.c[CACHESTAT_DIRTIES] = 9;
    raw.c[CACHESTAT_HITS] = 6;
    EXPECT_EQ(counts_of(raw), (Counts{7, 8, 9, 6}));
}
