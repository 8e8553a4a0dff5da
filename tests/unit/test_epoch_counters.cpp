// EpochCounters (epoch_table.h): counters kept one set per epoch, read as what the closed epochs
// added since the baseline. The "programs" here are writes to two arrays under an epoch
// variable this test flips as the tools do.
#include <gtest/gtest.h>

#include "loading/epoch_table.h"

using namespace memlat;

namespace {

struct Count {
    uint64_t n = 0;
    Count since(const Count &before) const { return {n - before.n}; }
    Count &operator+=(const Count &more) {
        n += more.n;
        return *this;
    }
};

// Two sets of counters, one per epoch, and the epoch variable the writers read.
struct Counters {
    uint64_t by_epoch[2] = {0, 0};
    uint32_t epoch = 0;
    void count(uint64_t n) { by_epoch[epoch & 1] += n; }
    void flip() { epoch ^= 1; }
};

} // namespace

TEST(EpochCounters, WhatCameBeforeTheBaselineIsLeftOut) {
    Counters c;
    EpochCounters<Count> e([&](uint32_t epoch) { return Count{c.by_epoch[epoch & 1]}; });
    c.count(100); // before the baseline: in epoch 0
    e.begin(c.epoch);
    c.flip();
    c.count(7); // the first interval, epoch 1
    EXPECT_EQ(7u, e.close(c.epoch, [&] { c.flip(); }).n);
    c.count(5); // epoch 0 again, which held the 100 before the baseline
    EXPECT_EQ(12u, e.close(c.epoch, [&] { c.flip(); }).n);
    c.count(3); // epoch 1
    EXPECT_EQ(15u, e.close(c.epoch, [&] { c.flip(); }).n);
    EXPECT_EQ(15u, e.totals().n);
}

TEST(EpochCounters, AWriteInFlightAtTheBaselineIsNoIntervals) {
    Counters c;
    EpochCounters<Count> e([&](uint32_t epoch) { return Count{c.by_epoch[epoch & 1]}; });
    e.begin(c.epoch);
    c.flip();
    c.by_epoch[0] += 2; // a writer that read epoch 0 before the flip, landing after it
    c.count(4);
    EXPECT_EQ(4u, e.close(c.epoch, [&] { c.flip(); }).n);
    c.count(1);
    EXPECT_EQ(5u, e.close(c.epoch, [&] { c.flip(); }).n);
}

TEST(EpochCounters, EachIntervalTakesWhatItsEpochAdded) {
    Counters c;
    EpochCounters<Count> e([&](uint32_t epoch) { return Count{c.by_epoch[epoch & 1]}; });
    e.begin(c.epoch);
    c.flip();
    uint64_t expected = 0;
    for (uint64_t interval = 1; interval <= 6; ++interval) {
        c.count(interval);
        expected += interval;
        // A write that read the epoch just before the flip lands in the closing epoch, before
        // the close reads it (the grace period): this interval's.
        EXPECT_EQ(expected + 1, e.close(c.epoch, [&] {
                                     c.flip();
                                     c.by_epoch[(c.epoch ^ 1) & 1] += 1;
                                 }).n);
        expected += 1;
    }
}
