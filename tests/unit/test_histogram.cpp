#include "cli/histogram.h"

#include <array>
#include <gtest/gtest.h>
#include <sstream>
#include <vector>

namespace memlat {
namespace {

std::vector<std::string> lines(const std::string &text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        out.push_back(line);
    return out;
}

TEST(Histogram, EmptyRendersNothing) {
    std::array<uint64_t, 32> slots{};
    EXPECT_EQ(render_log2_hist(slots, "usecs"), "");
    EXPECT_EQ(render_log2_hist({}, "usecs"), "");
}

TEST(Histogram, RendersHeaderRangesAndBars) {
    std::array<uint64_t, 32> slots{};
    slots[0] = 10;
    slots[1] = 5;
    slots[3] = 1;
    const auto out = lines(render_log2_hist(slots, "usecs"));
    ASSERT_EQ(out.size(), 5u); // header and slots 0..3, nothing after the last non-empty one
    EXPECT_EQ(out[0], "     usecs               : count    distribution");
    EXPECT_EQ(out[1], "         0 -> 1          : 10       |" + std::string(40, '*') + "|");
    EXPECT_EQ(out[2], "         2 -> 3          : 5        |" + std::string(20, '*') +
                          std::string(20, ' ') + "|");
    EXPECT_EQ(out[3], "         4 -> 7          : 0        |" + std::string(40, ' ') + "|");
    EXPECT_EQ(out[4], "         8 -> 15         : 1        |****" + std::string(36, ' ') + "|");
}

TEST(Histogram, StartsAtSlotZeroAndHandlesLargeCounts) {
    std::array<uint64_t, 64> slots{};
    slots[63] = UINT64_MAX;
    slots[62] = UINT64_MAX / 2;
    const auto out = lines(render_log2_hist(slots, "nsecs"));
    ASSERT_EQ(out.size(), 65u);
    EXPECT_NE(out[1].find("0 -> 1"), std::string::npos);
    EXPECT_NE(out[64].find("9223372036854775808 -> 18446744073709551615"), std::string::npos);
    EXPECT_NE(out[64].find(std::string(40, '*')), std::string::npos);
    EXPECT_NE(out[63].find("|" + std::string(20, '*') + " "), std::string::npos);
    // Wide bounds and counts widen their columns, so the bars stay aligned with the header.
    const auto bar_column = out[0].find("distribution");
    for (size_t i = 1; i < out.size(); ++i)
        EXPECT_EQ(out[i].find('|'), bar_column) << out[i];
}

TEST(Histogram, JsonListsNonEmptyBuckets) {
    std::array<uint64_t, 32> slots{};
    slots[0] = 3;
    slots[4] = 2;
    const auto json = log2_hist_json(slots, "usecs");
    EXPECT_EQ(json["unit"], "usecs");
    EXPECT_EQ(json["count"], 5);
    ASSERT_EQ(json["buckets"].size(), 2u);
    EXPECT_EQ(json["buckets"][0], (nlohmann::json{{"low", 0}, {"high", 1}, {"count", 3}}));
    EXPECT_EQ(json["buckets"][1], (nlohmann::json{{"low", 16}, {"high", 31}, {"count", 2}}));
}

TEST(Histogram, JsonOfEmptyHistogram) {
    std::array<uint64_t, 32> slots{};
    const auto json = log2_hist_json(slots, "msecs");
    EXPECT_EQ(json["count"], 0);
    EXPECT_TRUE(json["buckets"].is_array());
    EXPECT_TRUE(json["buckets"].empty());
}

TEST(Histogram, Total) {
    const std::array<uint64_t, 4> slots{1, 2, 0, 7};
    EXPECT_EQ(hist_total(slots), 10u);
    EXPECT_EQ(hist_total({}), 0u);
}

TEST(Histogram, SinceIsTheSlotBySlotDifference) {
    Log2Hist before{}, now{};
    before[0] = 3;
    before[5] = 10;
    now[0] = 3;
    now[5] = 14;
    now[31] = 2;
    const Log2Hist d = hist_since(now, before);
    EXPECT_EQ(0u, d[0]);
    EXPECT_EQ(4u, d[5]);
    EXPECT_EQ(2u, d[31]);
    EXPECT_EQ(6u, hist_total(d));
    EXPECT_EQ(0u, hist_total(hist_since(now, now)));
}

TEST(Histogram, IntervalHistsGiveEachKeysGrowthAndLeaveOutTheIdle) {
    IntervalHists<int> hists;
    Log2Hist a{}, b{};
    a[2] = 5;
    // The first reading is all growth; a key that never counted is left out.
    auto first = hists.next({{1, a}, {2, b}});
    ASSERT_EQ(1u, first.size());
    EXPECT_EQ(5u, first.at(1)[2]);
    // Then what each key added since: key 1 nothing (left out), key 2 three in slot 4.
    b[4] = 3;
    auto second = hists.next({{1, a}, {2, b}});
    ASSERT_EQ(1u, second.size());
    EXPECT_EQ(3u, second.at(2)[4]);
    EXPECT_EQ(3u, hist_total(second.at(2)));
    // After reset() a reading is taken whole again (tables the BPF side empties).
    hists.reset();
    auto whole = hists.next({{1, a}});
    ASSERT_EQ(1u, whole.size());
    EXPECT_EQ(5u, whole.at(1)[2]);
}

} // namespace
} // namespace memlat
