#include <gtest/gtest.h>

#include <unistd.h>

#include "numamove/numamove_format.h"

using namespace memlat;
using numamove::ParamKind;

namespace {

numamove_count sample_count() {
    return {.calls = 290,
            .succeeded = 31356,
            .failed = 34,
            .thp_succeeded = 2,
            .thp_failed = 1,
            .thp_split = 3,
            .large_split = 4,
            .paired = 289,
            .total_ns = 61'997'025};
}

bool have_kernel_btf() {
    return access("/sys/kernel/btf/vmlinux", R_OK) == 0;
}

// mm_migrate_pages's arguments in Linux 6.18: __data, six counts (the last the large folios
// split), the migrate mode, and the reason as an int.
const std::vector<ParamKind> linux_6_18{
    ParamKind::Pointer,      ParamKind::UnsignedLong, ParamKind::UnsignedLong,
    ParamKind::UnsignedLong, ParamKind::UnsignedLong, ParamKind::UnsignedLong,
    ParamKind::UnsignedLong, ParamKind::MigrateMode,  ParamKind::Int};

} // namespace

// ---------------------------------------------------------------- reason names

TEST(NumamoveReasons, BuiltinTableNamesTheKernelReasons) {
    auto names = numamove::ReasonNames::builtin();
    EXPECT_TRUE(names.fallback());
    EXPECT_EQ(names.name(0), "compaction");
    EXPECT_EQ(names.name(3), "syscall");
    EXPECT_EQ(names.name(4), "mempolicy_mbind");
    EXPECT_EQ(names.name(5), "numa_misplaced");
    EXPECT_EQ(names.name(8), "demotion");
    EXPECT_EQ(names.value("numa_misplaced"), 5);
    EXPECT_EQ(names.value("no_such_reason"), std::nullopt);
}

TEST(NumamoveReasons, UnknownValuesAndTheCatchAllSlot) {
    numamove::ReasonNames names({{0, "compaction"}, {7, "numa_misplaced"}});
    EXPECT_FALSE(names.fallback());
    EXPECT_EQ(names.name(7), "numa_misplaced"); // by the kernel's value, not a fixed one
    EXPECT_EQ(names.value("numa_misplaced"), 7);
    EXPECT_EQ(names.name(11), "reason_11");
    EXPECT_EQ(names.name(NUMAMOVE_MAX_REASONS - 1), "other");
}

TEST(NumamoveReasons, FromTheRunningKernel) {
    if (!have_kernel_btf())
        GTEST_SKIP() << "no kernel BTF";
    auto names = numamove::ReasonNames::from_kernel();
    EXPECT_FALSE(names.fallback());
    // The names every kernel with the migrate tracepoints has, MR_ removed and lower-cased;
    // MR_TYPES is not a reason and must not be listed.
    EXPECT_TRUE(names.value("compaction").has_value());
    EXPECT_TRUE(names.value("numa_misplaced").has_value());
    EXPECT_TRUE(names.value("syscall").has_value());
    EXPECT_FALSE(names.value("types").has_value());
    for (const auto &[value, name] : names.all())
        EXPECT_EQ(name.find("mr_"), std::string::npos) << name;
}

// ---------------------------------------------------------------- tp_btf argument layout

TEST(NumamoveLayout, Linux6_18WithLargeFolioSplit) {
    std::string why;
    auto l = numamove::migrate_pages_layout(linux_6_18, why);
    ASSERT_TRUE(l) << why;
    EXPECT_EQ(l->succeeded, 0);
    EXPECT_EQ(l->failed, 1);
    EXPECT_EQ(l->thp_succeeded, 2);
    EXPECT_EQ(l->thp_failed, 3);
    EXPECT_EQ(l->thp_split, 4);
    EXPECT_EQ(l->large_split, 5);
    EXPECT_EQ(l->mode, 6);
    EXPECT_EQ(l->reason, 7);
    EXPECT_EQ(l->describe(), "succeeded=0 failed=1 thp_succeeded=2 thp_failed=3 thp_split=4 "
                             "large_folio_split=5 mode=6 reason=7");
}

TEST(NumamoveLayout, Linux6_1WithoutLargeFolioSplit) {
    std::string why;
    auto l = numamove::migrate_pages_layout({ParamKind::Pointer, ParamKind::UnsignedLong,
                                             ParamKind::UnsignedLong, ParamKind::UnsignedLong,
                                             ParamKind::UnsignedLong, ParamKind::UnsignedLong,
                                             ParamKind::MigrateMode, ParamKind::Int},
                                            why);
    ASSERT_TRUE(l) << why;
    EXPECT_EQ(l->thp_split, 4);
    EXPECT_EQ(l->large_split, NUMAMOVE_NO_ARG);
    EXPECT_EQ(l->mode, 5);
    EXPECT_EQ(l->reason, 6);
}

TEST(NumamoveLayout, OldKernelsWithoutThpCounts) {
    std::string why;
    auto l = numamove::migrate_pages_layout({ParamKind::Pointer, ParamKind::UnsignedLong,
                                             ParamKind::UnsignedLong, ParamKind::MigrateMode,
                                             ParamKind::Int},
                                            why);
    ASSERT_TRUE(l) << why;
    EXPECT_EQ(l->succeeded, 0);
    EXPECT_EQ(l->failed, 1);
    EXPECT_EQ(l->thp_succeeded, NUMAMOVE_NO_ARG);
    EXPECT_EQ(l->thp_split, NUMAMOVE_NO_ARG);
    EXPECT_EQ(l->reason, 3);
    EXPECT_EQ(l->describe(), "succeeded=0 failed=1 thp_succeeded=- thp_failed=- thp_split=- "
                             "large_folio_split=- mode=2 reason=3");
}

TEST(NumamoveLayout, UnknownShapesAreRefusedWithAReason) {
    using P = ParamKind;
    const std::vector<std::vector<ParamKind>> bad{
        {},
        {P::UnsignedLong, P::UnsignedLong, P::MigrateMode, P::Int},     // no __data
        {P::Pointer, P::UnsignedLong, P::UnsignedLong, P::UnsignedLong, // 3 counts
         P::MigrateMode, P::Int},
        {P::Pointer, P::UnsignedLong, P::UnsignedLong, P::Int, P::Int},                 // no mode
        {P::Pointer, P::UnsignedLong, P::UnsignedLong, P::MigrateMode},                 // no reason
        {P::Pointer, P::UnsignedLong, P::UnsignedLong, P::MigrateMode, P::Int, P::Int}, // extra
        {P::Pointer, P::UnsignedLong, P::Other, P::MigrateMode, P::Int},
    };
    for (const auto &params : bad) {
        std::string why;
        EXPECT_FALSE(numamove::migrate_pages_layout(params, why)) << params.size();
        EXPECT_FALSE(why.empty());
    }
}

TEST(NumamoveLayout, FromTheRunningKernel) {
    if (!have_kernel_btf())
        GTEST_SKIP() << "no kernel BTF";
    std::string why;
    auto prototype = tracepoint_prototype("mm_migrate_pages", why);
    ASSERT_TRUE(prototype) << why;
    auto l = numamove::migrate_pages_layout(*prototype, why);
    ASSERT_TRUE(l) << why;
    EXPECT_EQ(l->succeeded, 0);
    EXPECT_EQ(l->failed, 1);
    EXPECT_EQ(l->reason, l->mode + 1);
}

// ---------------------------------------------------------------- output

TEST(NumamoveFormat, DefaultViewMatchesTheAnchorsColumns) {
    EXPECT_EQ(numamove::default_header(), "TIME          NUMA_migrations NUMA_migrations_ms");
    EXPECT_EQ(numamove::default_line("22:48:46", 0, 0),
              "22:48:46                    0              0.000");
}

TEST(NumamoveFormat, MillisecondsComeFromSummedNanoseconds) {
    // 30,000 migrations of 12.345 us each: truncating each to whole milliseconds, as
    // libbpf-tools does, would print 0.
    EXPECT_EQ(numamove::default_line("22:48:47", 30000, 30000ull * 12345),
              "22:48:47                30000            370.350");
    EXPECT_EQ(numamove::default_line("22:48:48", 1, 999), "22:48:48                    1 "
                                                          "             0.001");
}

TEST(NumamoveFormat, ReasonTable) {
    auto names = numamove::ReasonNames::builtin();
    EXPECT_EQ(numamove::reasons_header(), "REASON              CALLS  SUCCEEDED   FAILED  THP_OK "
                                          "THP_FAIL THP_SPLIT   TOTAL(ms)   AVG(us)");
    EXPECT_EQ(numamove::reason_line({0, sample_count()}, names),
              "compaction            290      31356       34       2        1         3      "
              "61.997    214.52");
    auto j = numamove::reason_json({5, sample_count()}, names);
    EXPECT_EQ(j["reason"], "numa_misplaced");
    EXPECT_EQ(j["reason_id"], 5);
    EXPECT_EQ(j["calls"], 290);
    EXPECT_EQ(j["succeeded"], 31356);
    EXPECT_EQ(j["failed"], 34);
    EXPECT_EQ(j["thp_succeeded"], 2);
    EXPECT_EQ(j["thp_failed"], 1);
    EXPECT_EQ(j["thp_split"], 3);
    EXPECT_EQ(j["large_folio_split"], 4);
    EXPECT_EQ(j["timed_calls"], 289);
    EXPECT_EQ(j["total_ns"], 61997025);
    EXPECT_DOUBLE_EQ(j["total_ms"].get<double>(), 61.997025);
}

TEST(NumamoveFormat, UntimedCallsDoNotDivideByZero) {
    auto c = sample_count();
    c.paired = 0;
    c.total_ns = 0;
    auto names = numamove::ReasonNames::builtin();
    EXPECT_EQ(numamove::reason_line({1, c}, names),
              "memory_failure        290      31356       34       2        1         3       "
              "0.000      0.00");
}

TEST(NumamoveFormat, ProcessTable) {
    auto names = numamove::ReasonNames::builtin();
    EXPECT_EQ(numamove::process_header(),
              "PID      COMM             REASON              CALLS  SUCCEEDED   FAILED  THP_OK "
              "THP_FAIL THP_SPLIT   TOTAL(ms)   AVG(us)");
    numamove::ProcessRow row{4242, "tidb-server", 5, sample_count()};
    EXPECT_EQ(numamove::process_line(row, names),
              "4242     tidb-server      numa_misplaced        290      31356       34       2"
              "        1         3      61.997    214.52");
    auto j = numamove::process_json(row, names);
    EXPECT_EQ(j["pid"], 4242);
    EXPECT_EQ(j["comm"], "tidb-server");
    EXPECT_EQ(j["reason"], "numa_misplaced");
    EXPECT_EQ(j["succeeded"], 31356);
}

TEST(NumamoveFormat, IntervalsAreDifferences) {
    auto a = sample_count();
    const numamove_count b{
        .calls = 90, .succeeded = 1356, .failed = 4, .paired = 89, .total_ns = 1'997'025};
    auto d = numamove::minus(a, b);
    EXPECT_EQ(d.calls, 200u);
    EXPECT_EQ(d.succeeded, 30000u);
    EXPECT_EQ(d.failed, 30u);
    EXPECT_EQ(d.thp_succeeded, 2u);
    EXPECT_EQ(d.large_split, 4u);
    EXPECT_EQ(d.paired, 200u);
    EXPECT_EQ(d.total_ns, 60'000'000u);
}

TEST(NumamoveLayout, Linux7_3ReasonIsAnEnum) {
    // 6.18's arguments, but for the reason's type: enum migrate_reason.
    auto params = linux_6_18;
    params.back() = ParamKind::MigrateReason;
    std::string why;
    auto l = numamove::migrate_pages_layout(params, why);
    ASSERT_TRUE(l) << why;
    EXPECT_EQ(l->mode, 6);
    EXPECT_EQ(l->reason, 7);
}

// -P -j: the rows plus left_out sum to the totals; without -r only NUMA balancing's reason.
TEST(NumamoveFormat, TotalsAndWhatNoRowHolds) {
    auto names = numamove::ReasonNames::builtin();
    std::array<numamove_count, NUMAMOVE_MAX_REASONS> interval{};
    interval[0] = {.calls = 10, .succeeded = 100};
    interval[5] = {.calls = 7, .succeeded = 70};
    const std::vector<numamove::ProcessRow> rows{{1, "a", 5, {.calls = 4, .succeeded = 40}},
                                                 {2, "b", 5, {.calls = 3, .succeeded = 30}},
                                                 {3, "c", 0, {.calls = 6, .succeeded = 60}}};
    nlohmann::json all;
    numamove::json_totals(interval, rows, std::nullopt, names, all);
    ASSERT_EQ(all["totals"].size(), 2u);
    EXPECT_EQ(all["totals"][0]["reason"], "compaction");
    EXPECT_EQ(all["totals"][0]["calls"], 10);
    // compaction's rows hold 6 of 10 calls; numa_misplaced's rows all 7.
    ASSERT_EQ(all["left_out"].size(), 1u);
    EXPECT_EQ(all["left_out"][0]["reason"], "compaction");
    EXPECT_EQ(all["left_out"][0]["calls"], 4);
    EXPECT_EQ(all["left_out"][0]["succeeded"], 40);
    nlohmann::json numa;
    numamove::json_totals(interval, rows, 5, names, numa);
    ASSERT_EQ(numa["totals"].size(), 1u);
    EXPECT_EQ(numa["totals"][0]["reason"], "numa_misplaced");
    EXPECT_TRUE(numa["left_out"].empty());
}
