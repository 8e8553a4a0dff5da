// tlbflush's per-event view (-t), text and JSON.
#include <gtest/gtest.h>

#include <cstring>

#include "tlbflush_format.h"

using namespace memlat;

namespace {

tlbflush_event sample() {
    tlbflush_event e{};
    e.ts_ns = 5'000'000'000;
    e.pages = 16;
    e.cpu = 1;
    e.pid = 4242;
    e.tid = 4243;
    e.reason = 1;
    std::strcpy(e.comm, "tlb_workload");
    return e;
}

} // namespace

TEST(TlbflushEvents, HeaderAndLineColumnsLineUp) {
    EXPECT_EQ("TIME(s)      CPU  PID      COMM             REASON                    PAGES\n",
              tlbflush::event_header(false));
    EXPECT_EQ("0.001500     1    4242     tlb_workload     remote_shootdown             16\n",
              tlbflush::event_line(sample(), 0.0015, "remote_shootdown", ""));
}

TEST(TlbflushEvents, TimestampColumnComesFirst) {
    EXPECT_EQ("TIME     TIME(s)      CPU  PID      COMM             REASON                    "
              "PAGES\n",
              tlbflush::event_header(true));
    EXPECT_EQ("12:34:56 2.000000     1    4242     tlb_workload     remote_shootdown             "
              "16\n",
              tlbflush::event_line(sample(), 2, "remote_shootdown", "12:34:56"));
}

TEST(TlbflushEvents, AFullFlushHasNoPageCount) {
    auto e = sample();
    e.pages = ~0ull;
    EXPECT_EQ("0.000000     1    4242     tlb_workload     flush_on_task_switch       full\n",
              tlbflush::event_line(e, 0, "flush_on_task_switch", ""));
    const auto json = tlbflush::event_json(e, 0, "flush_on_task_switch", "");
    EXPECT_TRUE(json["pages"].is_null());
    EXPECT_EQ(true, json["full"]);
}

TEST(TlbflushEvents, JsonCarriesEveryField) {
    const auto json = tlbflush::event_json(sample(), 1.25, "remote_shootdown", "");
    EXPECT_EQ((nlohmann::json{{"time_s", 1.25},
                              {"cpu", 1},
                              {"pid", 4242},
                              {"tid", 4243},
                              {"comm", "tlb_workload"},
                              {"reason", "remote_shootdown"},
                              {"pages", 16},
                              {"full", false}}),
              json);
    EXPECT_EQ("12:00:00",
              tlbflush::event_json(sample(), 1.25, "remote_shootdown", "12:00:00")["wall_time"]);
}

TEST(TlbflushEvents, CommIsCutAtItsEndEvenWithoutATerminator) {
    auto e = sample();
    std::memset(e.comm, 'x', sizeof(e.comm));
    EXPECT_EQ(std::string(sizeof(e.comm), 'x'),
              tlbflush::event_json(e, 0, "remote_shootdown", "")["comm"]);
}
