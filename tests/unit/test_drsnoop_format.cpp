#include <gtest/gtest.h>

#include <cstring>

#include "drsnoop/drsnoop_format.h"

using namespace memlat;

namespace {

drsnoop_event sample() {
    drsnoop_event e{};
    e.ts_ns = 2'000'000'000;
    e.lat_ns = 1'234'567;
    e.nr_reclaimed = 944;
    e.gfp = (1u << 10) | (1u << 11) | (1u << 6) | (1u << 7); // GFP_KERNEL on any layout
    e.free_pages = 1000;
    e.cgroup_id = 3896;
    e.pid = 4242;
    e.tid = 4243;
    e.uid = 1000;
    e.kind = DRSNOOP_MEMCG;
    e.order = 2;
    e.nid = -1;
    std::strcpy(e.comm, "postgres");
    return e;
}

const GfpNames &gfp() {
    static const GfpNames names = GfpNames::builtin();
    return names;
}

} // namespace

TEST(DrsnoopFormat, DefaultLineHasBccColumnsPlusKindAndOrder) {
    drsnoop::LineFormat f;
    EXPECT_EQ(drsnoop::header(f), "COMM             PID       LAT(ms)    PAGES KIND      ORDER");
    EXPECT_EQ(drsnoop::line(sample(), 0, f, gfp()),
              "postgres         4242        1.235      944 memcg         2");
}

TEST(DrsnoopFormat, TimestampUidAndExtendedColumns) {
    drsnoop::LineFormat f{true, true, true, 4};
    EXPECT_EQ(drsnoop::header(f), "TIME(s)       UID    COMM             PID       LAT(ms)    "
                                  "PAGES   FREE(KB) KIND      ORDER TID         CGROUP GFP");
    EXPECT_EQ(drsnoop::line(sample(), 1.5, f, gfp()),
              "1.500000      1000   postgres         4242        1.235      944       4000 memcg  "
              "       2 4243          3896 GFP_KERNEL");
}

// BCC's drsnoop -t names the id column TID and prints the thread there.
TEST(DrsnoopFormat, ThreadFilterNamesTheColumnTid) {
    drsnoop::LineFormat f;
    f.by_thread = true;
    EXPECT_EQ(drsnoop::header(f), "COMM             TID       LAT(ms)    PAGES KIND      ORDER");
    EXPECT_EQ(drsnoop::line(sample(), 0, f, gfp()),
              "postgres         4243        1.235      944 memcg         2");
    f.extended = true;
    EXPECT_EQ(drsnoop::header(f),
              "COMM             TID       LAT(ms)    PAGES   FREE(KB) KIND      "
              "ORDER PID         CGROUP GFP");
    EXPECT_EQ(
        drsnoop::line(sample(), 0, f, gfp()),
        "postgres         4243        1.235      944       4000 memcg         2 4242          "
        "3896 GFP_KERNEL");
}

TEST(DrsnoopFormat, UnknownFreeMemoryIsADash) {
    auto e = sample();
    e.free_pages = -1;
    drsnoop::LineFormat f{false, false, true, 4};
    EXPECT_NE(drsnoop::line(e, 0, f, gfp()).find("      944          - memcg"), std::string::npos);
    EXPECT_TRUE(drsnoop::json_event(e, 0, f, gfp())["free_kb"].is_null());
}

TEST(DrsnoopFormat, JsonCarriesEveryField) {
    drsnoop::LineFormat f{false, false, true, 4};
    auto j = drsnoop::json_event(sample(), 0.25, f, gfp());
    EXPECT_EQ(j["comm"], "postgres");
    EXPECT_EQ(j["pid"], 4242);
    EXPECT_EQ(j["tid"], 4243);
    EXPECT_EQ(j["kind"], "memcg");
    EXPECT_EQ(j["order"], 2);
    EXPECT_EQ(j["pages"], 944);
    EXPECT_EQ(j["lat_ns"], 1234567);
    EXPECT_DOUBLE_EQ(j["lat_ms"].get<double>(), 1.234567);
    EXPECT_EQ(j["gfp"], "GFP_KERNEL");
    EXPECT_EQ(j["free_kb"], 4000);
    EXPECT_EQ(j["cgroup_id"], 3896);
    EXPECT_FALSE(j.contains("nid"));
}

TEST(DrsnoopFormat, KindNames) {
    EXPECT_STREQ(drsnoop::kind_name(DRSNOOP_DIRECT), "direct");
    EXPECT_STREQ(drsnoop::kind_name(DRSNOOP_SOFTLIMIT), "softlimit");
    EXPECT_STREQ(drsnoop::kind_name(DRSNOOP_NODE), "node");
    EXPECT_STREQ(drsnoop::kind_name(99), "unknown");
}
