#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "compactsnoop/compactsnoop_format.h"

using namespace memlat;
using namespace memlat::compactsnoop;

namespace {

// The names as the tool reads them from BTF (kernel_enum_names), for a 6.x x86 kernel.
Names names() {
    Names n;
    n.zones = {{0, "dma"}, {1, "dma32"}, {2, "normal"}, {3, "movable"}, {4, "device"}};
    n.statuses = {{0, "not_suitable_zone"}, {1, "skipped"},   {2, "deferred"},
                  {3, "no_suitable_page"},  {4, "continue"},  {5, "complete"},
                  {6, "partial_skipped"},   {7, "contended"}, {8, "success"}};
    n.modes = {{0, "async"}, {1, "sync_light"}, {2, "sync"}};
    n.prios = {{0, "sync_full"}, {1, "sync_light"}, {2, "async"}};
    return n;
}

const GfpNames &gfp() {
    static const GfpNames names = GfpNames::builtin();
    return names;
}

compactsnoop_event sample() {
    compactsnoop_event e{};
    e.ts_ns = 5'000'000'000;
    e.lat_ns = 2'345'678;
    e.gfp = (1u << 10) | (1u << 11) | (1u << 6) | (1u << 7); // GFP_KERNEL on any layout
    e.migrated = 512;
    e.failed = 3;
    e.pid = 4242;
    e.tid = 4243;
    e.kind = COMPACTSNOOP_DIRECT;
    e.flags = COMPACTSNOOP_HAVE_CC;
    e.nid = 0;
    e.zone = 2;
    e.order = 9;
    e.mode = 0;
    e.status = 8;
    e.prio = -1;
    e.kernel_stack = -1;
    std::strcpy(e.comm, "postgres");
    return e;
}

// Whether `text` has `part`; the message shows the text either way.
testing::AssertionResult contains(const std::string &text, std::string_view part) {
    if (text.find(part) == std::string::npos)
        return testing::AssertionFailure() << "no \"" << part << "\" in:\n" << text;
    return testing::AssertionSuccess() << "\"" << part << "\" in:\n" << text;
}

// Free blocks per order 0..10 of a zone with nothing of order 3 or above.
const std::vector<uint64_t> small_blocks{10, 5, 2, 0, 0, 0, 0, 0, 0, 0, 0};

// sample() asking for order 3 in the zone of small_blocks (28 free pages), with its watermarks
// as the run's beginning saw them.
compactsnoop_event sample_with_zone_state(uint64_t wmark_min, uint64_t wmark_low,
                                          uint64_t wmark_high) {
    auto e = sample();
    e.flags |= COMPACTSNOOP_HAVE_ZONE_STATE;
    e.nr_orders = 11;
    std::copy(small_blocks.begin(), small_blocks.end(), e.nr_free);
    e.order = 3;
    e.free_pages = 28;
    e.wmark_min = wmark_min;
    e.wmark_low = wmark_low;
    e.wmark_high = wmark_high;
    return e;
}

} // namespace

// ---- the kernel's fill_contig_page_info() and __fragmentation_index(), by hand

TEST(CompactsnoopFragindex, ContigInfoSumsLikeTheKernel) {
    auto info = contig_info(small_blocks, 3);
    EXPECT_EQ(info.free_pages, 10u + 5 * 2 + 2 * 4); // 28 base pages
    EXPECT_EQ(info.free_blocks_total, 17u);
    EXPECT_EQ(info.free_blocks_suitable, 0u);
    // For order 1: the order-1 blocks count once, each order-2 block twice.
    info = contig_info(small_blocks, 1);
    EXPECT_EQ(info.free_blocks_suitable, 5u + 2 * 2);
}

TEST(CompactsnoopFragindex, FragmentedZone) {
    // requested = 8; 1000 - (1000 + 28 * 1000 / 8) / 17 = 1000 - 4500 / 17 = 1000 - 264.
    EXPECT_EQ(fragmentation_index(3, contig_info(small_blocks, 3)), 736);
    EXPECT_EQ(fragmentation_index(small_blocks, 3), 736);
    EXPECT_EQ(fragindex_text(736), "0.736");
}

TEST(CompactsnoopFragindex, ManyOrderZeroPagesAreAlmostFullyFragmented) {
    std::vector<uint64_t> blocks(11, 0);
    blocks[0] = 1000;
    // requested = 512; 1000 * 1000 / 512 = 1953; (1000 + 1953) / 1000 = 2; 1000 - 2.
    EXPECT_EQ(fragmentation_index(blocks, 9), 998);
    EXPECT_EQ(fragindex_text(998), "0.998");
}

TEST(CompactsnoopFragindex, ASuitableBlockMeansMinusOne) {
    EXPECT_EQ(fragmentation_index(small_blocks, 2), -1000);
    EXPECT_EQ(fragmentation_index(small_blocks, 0), -1000);
    EXPECT_EQ(fragindex_text(-1000), "-1.000");
}

TEST(CompactsnoopFragindex, NoFreeBlockAtAllIsZero) {
    std::vector<uint64_t> none(11, 0);
    EXPECT_EQ(fragmentation_index(none, 4), 0);
    EXPECT_EQ(fragindex_text(0), "0.000");
}

TEST(CompactsnoopFragindex, LackOfMemoryGoesBelowZero) {
    // One free block of order 8 (256 pages) for an order-9 request: requested = 512,
    // 256 * 1000 / 512 = 500, 1000 - (1000 + 500) / 1 = -500: failing for lack of memory.
    std::vector<uint64_t> blocks(11, 0);
    blocks[8] = 1;
    EXPECT_EQ(fragmentation_index(blocks, 9), -500);
    EXPECT_EQ(fragindex_text(-500), "-0.500");
}

TEST(CompactsnoopFragindex, WholeZoneAndOutOfRangeOrdersHaveNoIndex) {
    EXPECT_FALSE(fragmentation_index(small_blocks, -1).has_value());
    EXPECT_FALSE(fragmentation_index(small_blocks, 11).has_value());
    EXPECT_TRUE(fragmentation_index(small_blocks, 10).has_value());
}

// ---- output lines

TEST(CompactsnoopFormat, DefaultLineHasBccColumnsThenKind) {
    LineFormat f;
    EXPECT_EQ(header(f), "COMM             PID     NODE ZONE     ORDER MODE         LAT(ms) "
                         "STATUS           KIND");
    EXPECT_EQ(line(sample(), 0, f, names()),
              "postgres         4242       0 normal       9 async          2.346 success          "
              "direct");
}

TEST(CompactsnoopFormat, ManualRunWithTimestamp) {
    auto e = sample();
    e.kind = COMPACTSNOOP_MANUAL;
    e.order = -1;
    e.mode = 2;
    e.zone = 1;
    e.status = 5;
    LineFormat f{true, false};
    EXPECT_EQ(header(f).substr(0, 14), "TIME(s)       ");
    EXPECT_EQ(line(e, 1.25, f, names()),
              "1.250000      postgres         4242       0 dma32       -1 sync           2.346 "
              "complete         manual");
}

TEST(CompactsnoopFormat, ExtendedColumns) {
    const auto e = sample_with_zone_state(8997, 11246, 13495);
    LineFormat f{false, true};
    EXPECT_EQ(header(f), "COMM             PID     NODE ZONE     ORDER MODE       FRAGIDX      "
                         "MIN      LOW     HIGH     FREE   LAT(ms) STATUS           KIND      "
                         "MIGRATED FAILED");
    EXPECT_EQ(line(e, 0, f, names()),
              "postgres         4242       0 normal       3 async        0.736     8997    11246 "
              "   13495       28     2.346 success          direct         512      3");
}

TEST(CompactsnoopFormat, ExtendedWithoutZoneStateShowsDashes) {
    auto e = sample();
    e.flags = 0; // classic tracepoints: no struct compact_control
    e.mode = -1;
    e.sync = 1;
    LineFormat f{false, true};
    EXPECT_EQ(line(e, 0, f, names()),
              "postgres         4242       0 normal       9 sync             -        -        - "
              "       -        -     2.346 success          direct         512      3");
    auto j = json_event(e, 0, f, names(), gfp());
    EXPECT_TRUE(j["fragindex"].is_null());
    EXPECT_TRUE(j["free_pages"].is_null());
    EXPECT_FALSE(j.contains("gfp"));
    EXPECT_FALSE(j.contains("whole_zone"));
}

TEST(CompactsnoopFormat, UnknownValuesPrintAsNumbers) {
    auto e = sample();
    e.status = 42;
    e.zone = 7;
    e.nid = -1;
    LineFormat f;
    auto text = line(e, 0, f, names());
    EXPECT_TRUE(contains(text, "       - 7 "));
    EXPECT_TRUE(contains(text, " 42"));
    e.zone = -1;
    EXPECT_TRUE(json_event(e, 0, f, names(), gfp())["zone"].is_null());
}

TEST(CompactsnoopFormat, JsonCarriesEveryField) {
    auto e = sample_with_zone_state(1, 2, 3);
    e.flags |= COMPACTSNOOP_HAVE_ENTRY;
    e.prio = 1;
    e.whole_zone = 1;
    e.wmark_boost = 1;
    auto j = json_event(e, 0.5, LineFormat{false, true}, names(), gfp());
    EXPECT_EQ(j["comm"], "postgres");
    EXPECT_EQ(j["pid"], 4242);
    EXPECT_EQ(j["tid"], 4243);
    EXPECT_EQ(j["nid"], 0);
    EXPECT_EQ(j["zone"], "normal");
    EXPECT_EQ(j["zone_idx"], 2);
    EXPECT_EQ(j["order"], 3);
    EXPECT_EQ(j["mode"], "async");
    EXPECT_EQ(j["kind"], "direct");
    EXPECT_EQ(j["status"], "success");
    EXPECT_EQ(j["status_raw"], 8);
    EXPECT_EQ(j["lat_ns"], 2345678);
    EXPECT_DOUBLE_EQ(j["lat_ms"].get<double>(), 2.345678);
    EXPECT_EQ(j["migrated"], 512);
    EXPECT_EQ(j["failed"], 3);
    EXPECT_EQ(j["whole_zone"], true);
    EXPECT_EQ(j["gfp"], "GFP_KERNEL");
    EXPECT_EQ(j["priority"], "sync_light");
    EXPECT_DOUBLE_EQ(j["fragindex"].get<double>(), 0.736);
    EXPECT_EQ(j["free_pages"], 28);
    EXPECT_EQ(j["wmark_high"], 3);
    EXPECT_EQ(j["wmark_boost"], 1);
    EXPECT_EQ(j["nr_free"].size(), 11u);
    EXPECT_EQ(j["nr_free"][0], 10);
}

TEST(CompactsnoopFormat, KindNames) {
    EXPECT_STREQ(kind_name(COMPACTSNOOP_DIRECT), "direct");
    EXPECT_STREQ(kind_name(COMPACTSNOOP_KCOMPACTD), "kcompactd");
    EXPECT_STREQ(kind_name(COMPACTSNOOP_PROACTIVE), "proactive");
    EXPECT_STREQ(kind_name(COMPACTSNOOP_MANUAL), "manual");
    EXPECT_STREQ(kind_name(99), "unknown");
}

// ---- the exit summary ----

namespace {

Names summary_names() {
    Names n;
    n.statuses = {{1, "skipped"}, {3, "success"}, {5, "complete"}};
    return n;
}

compactsnoop_summary runs(uint64_t count, uint64_t total_ns, uint64_t max_ns, uint64_t migrated,
                          uint64_t failed) {
    return {count, total_ns, max_ns, migrated, failed};
}

} // namespace

TEST(CompactsnoopSummary, RowsByKindAndStatusWithAnAllRowWhereAKindHasSeveral) {
    SummaryCounts c;
    c.summary[COMPACTSNOOP_DIRECT][3] = runs(2, 3'000'000, 2'000'000, 40, 1);
    c.summary[COMPACTSNOOP_DIRECT][5] = runs(1, 500'000, 500'000, 8, 0);
    c.summary[COMPACTSNOOP_KCOMPACTD][COMPACTSNOOP_MAX_STATUS - 1] =
        runs(4, 4'000'000, 1'500'000, 0, 0);
    c.direct_entries = 7;
    c.direct_entries_run = 3;
    c.deferred[COMPACTSNOOP_DIRECT] = 2;
    c.kcompactd_wakes = 9;
    const std::string text = summary_text(c, summary_names());
    EXPECT_TRUE(contains(text,
                         "direct     success                 2        3.000      2.000         40"
                         "        1\n"));
    // The direct kind had two statuses: their sums, and the longest run of either.
    EXPECT_TRUE(contains(text,
                         "direct     (all)                   3        3.500      2.000         48"
                         "        1\n"));
    // The last status slot collects what the tool has no slot for.
    EXPECT_TRUE(contains(text, "kcompactd  other                   4"));
    EXPECT_FALSE(contains(text, "kcompactd  (all)"));
    EXPECT_TRUE(contains(text, "Direct-compaction entries: 7 (3 ran compaction in a zone); "
                               "zones skipped as deferred: 2\n"));
    EXPECT_TRUE(contains(text, "kcompactd wake-ups: 9;"));
    // Runs to show, and nothing lost or left out.
    for (const char *part : {"(none)", "not counted", "Lost"})
        EXPECT_FALSE(contains(text, part));
}

TEST(CompactsnoopSummary, NothingRunLossesAndKindsNotTraced) {
    SummaryCounts c;
    c.kind_mask = 1u << COMPACTSNOOP_MANUAL; // -k manual
    c.unpaired_ends = 2;
    c.lost_events = 5;
    c.events_name = "perf buffers";
    c.table_full = 3;
    const std::string text = summary_text(c, summary_names());
    EXPECT_TRUE(contains(text, "(none)\n"));
    // Neither the direct nor the kcompactd line: those kinds were not traced.
    EXPECT_FALSE(contains(text, "Direct-compaction entries"));
    EXPECT_FALSE(contains(text, "kcompactd wake-ups"));
    EXPECT_TRUE(contains(text, "\n2 runs not counted: their begin was not seen"));
    EXPECT_TRUE(contains(text, "\nLost 5 events: the perf buffers was full"));
    EXPECT_TRUE(contains(text, "\n3 runs not counted: per-thread state could not be allocated"));
}

TEST(CompactsnoopSummary, JsonHasEveryRowAndCounter) {
    SummaryCounts c;
    c.summary[COMPACTSNOOP_MANUAL][5] = runs(1, 2'500'000, 2'500'000, 100, 4);
    c.deferred[COMPACTSNOOP_KCOMPACTD] = 6;
    c.skipped_runs = 1;
    c.lost_events = 2;
    const auto j = summary_json(c, summary_names());
    ASSERT_EQ(j["summary"].size(), 1u);
    EXPECT_EQ(j["summary"][0]["kind"], "manual");
    EXPECT_EQ(j["summary"][0]["status"], "complete");
    EXPECT_EQ(j["summary"][0]["runs"], 1);
    EXPECT_DOUBLE_EQ(j["summary"][0]["total_ms"].get<double>(), 2.5);
    EXPECT_EQ(j["summary"][0]["total_ns"], 2'500'000);
    EXPECT_EQ(j["summary"][0]["max_ns"], 2'500'000);
    EXPECT_EQ(j["summary"][0]["migrated"], 100);
    EXPECT_EQ(j["summary"][0]["failed"], 4);
    // Only the kinds that deferred zones.
    EXPECT_EQ(j["deferred"], nlohmann::json({{"kcompactd", 6}}));
    EXPECT_EQ(j["recursion_misses"], 1);
    EXPECT_EQ(j["lost_events"], 2);
    for (const char *field :
         {"direct_entries", "direct_entries_run", "kcompactd_wakes", "unpaired_ends", "table_full"})
        EXPECT_EQ(j[field], 0) << field;
}
