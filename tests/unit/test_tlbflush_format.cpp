// tlbflush's views, text and JSON: the counts table and the flush IPIs each CPU received,
// --culprits (with -s's stacks), -L's histograms, the interval around them, and -t's events.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "tlbflush/tlbflush_format.h"

using namespace memlat;
using nlohmann::json;
using tlbflush::Snapshot;

namespace {

// The reasons of Linux 6.x (enum tlb_flush_reason).
tlbflush::ViewFormat view() {
    tlbflush::ViewFormat f;
    f.reason_name = [](int64_t r) -> std::string {
        switch (r) {
        case 0:
            return "flush_on_task_switch";
        case 1:
            return "remote_shootdown";
        case 3:
            return "local_mm_shootdown";
        case 4:
            return "remote_send_ipi";
        case 5:
            return "remote_wrong_cpu";
        default:
            return "reason_" + std::to_string(r);
        }
    };
    return f;
}

// A view's text and the JSON it writes into an empty object, from the same rows.
struct Rendered {
    std::string text;
    json out;
};

template <typename Rows>
Rendered render(std::string (*text)(const Rows &, const tlbflush::ViewFormat &),
                void (*write_json)(const Rows &, const tlbflush::ViewFormat &, json &),
                const Rows &rows, const tlbflush::ViewFormat &f) {
    Rendered r{text(rows, f), json::object()};
    write_json(rows, f, r.out);
    return r;
}

tlbflush_count count(uint64_t n, uint64_t full, uint64_t pages) {
    return {n, full, pages, 0};
}

// CPU 1 received 30 remote shootdowns and 2 that found it on the wrong mm in the interval; CPU 0
// flushed locally; the csd tracepoints counted 40 flush IPIs on CPU 1.
Snapshot counts_before() {
    Snapshot s;
    s.counts[{0, 0, 3}] = count(100, 1, 900);
    s.counts[{0, 1, 1}] = count(10, 0, 10);
    s.counts[{0, 1, 0}] = count(7, 7, 0); // no flush in the interval: no row
    s.flush_ipis = {0, 5};
    s.flush_requests = {0, 10};
    s.request_sources = {10, 0, 0};
    return s;
}
Snapshot counts_now() {
    Snapshot s;
    s.counts[{0, 0, 3}] = count(150, 3, 1400);
    s.counts[{0, 1, 1}] = count(40, 0, 480);
    s.counts[{0, 1, 5}] = count(2, 0, 0);
    s.counts[{0, 1, 0}] = count(7, 7, 0);
    s.flush_ipis = {0, 45};
    // 50 remote flush requests named CPU 1 in the interval (of 48 from mms, 2 from reclaim's
    // batches), and one more named no CPU the tool could read.
    s.flush_requests = {0, 60};
    s.request_sources = {58, 2, 1};
    return s;
}

} // namespace

TEST(TlbflushCounts, TableByCpuAndReasonThenTheIpisEachCpuReceived) {
    const auto f = view();
    const auto t = tlbflush::counts_since(counts_now(), counts_before(), f);
    EXPECT_EQ("CPU  REASON                      COUNT       FULL        PAGES\n"
              "0    local_mm_shootdown             50          2          500\n"
              "1    remote_shootdown               30          0          470\n"
              "1    remote_wrong_cpu                2          0            0\n"
              "\n"
              "Remote shootdowns received (flush IPIs handled: the /proc/interrupts TLB row):\n"
              "  CPU 1            40\n"
              "\n"
              "Remote flush requests naming each CPU (sent by the other CPUs, remote_send_ipi; "
              "delivered here by IPI or hypervisor: not seen yet):\n"
              "  CPU 1            50\n"
              "  unknown           1  (requests whose CPU mask could not be read)\n",
              tlbflush::counts_text(t, f));
}

TEST(TlbflushCounts, JsonRowsAndRemoteShootdowns) {
    const auto f = view();
    json out = json::object();
    tlbflush::counts_json(tlbflush::counts_since(counts_now(), counts_before(), f), f, out);
    EXPECT_EQ(json::parse(R"({"counts": [
        {"cpu": 0, "reason": "local_mm_shootdown", "reason_id": 3, "count": 50, "full": 2,
         "pages": 500},
        {"cpu": 1, "reason": "remote_shootdown", "reason_id": 1, "count": 30, "full": 0,
         "pages": 470},
        {"cpu": 1, "reason": "remote_wrong_cpu", "reason_id": 5, "count": 2, "full": 0,
         "pages": 0}],
        "remote_shootdowns": {"1": 40}, "flush_requests": {"1": 50},
        "flush_requests_unknown_target": 1, "remote_flush_path": "unknown"})"),
              out);
}

TEST(TlbflushCounts, WithoutCsdTheRemoteFlushesTracedStandIn) {
    // Before Linux 6.3 no flush IPI is counted: tlb_flush's remote reasons are what is known.
    auto now = counts_now(), before = counts_before();
    now.flush_ipis.clear();
    before.flush_ipis.clear();
    const auto f = view();
    const auto t = tlbflush::counts_since(now, before, f);
    EXPECT_FALSE(t.ipis_counted);
    auto [text, out] = render(tlbflush::counts_text, tlbflush::counts_json, t, f);
    EXPECT_NE(std::string::npos,
              text.find("\nRemote flushes traced (remote_shootdown + remote_wrong_cpu; without "
                        "the csd tracepoints of Linux 6.3+ the IPIs that found a CPU lazy or up "
                        "to date are not seen: fewer than the /proc/interrupts TLB row):\n"
                        "  CPU 1            32\n"));
    EXPECT_EQ(std::string::npos, text.find("Remote shootdowns received"));
    EXPECT_TRUE(out["remote_shootdowns"].is_null());
    EXPECT_EQ(json::parse(R"({"1": 32})"), out["remote_flushes_traced"]);
}

TEST(TlbflushCounts, ReasonsWithoutARemoteOneAskForNoIpiCount) {
    auto f = view();
    f.reason_mask = 1u << 3; // -r local_mm_shootdown
    auto now = counts_now(), before = counts_before();
    now.counts.erase({0, 1, 1});
    now.counts.erase({0, 1, 5});
    const auto t = tlbflush::counts_since(now, before, f);
    EXPECT_TRUE(t.received.empty());
    EXPECT_TRUE(t.requested.empty());
    auto [text, out] = render(tlbflush::counts_text, tlbflush::counts_json, t, f);
    EXPECT_EQ("CPU  REASON                      COUNT       FULL        PAGES\n"
              "0    local_mm_shootdown             50          2          500\n",
              text);
    EXPECT_EQ(json::object(), out["remote_shootdowns"]);
    EXPECT_TRUE(out["flush_requests"].is_null());
}

TEST(TlbflushCounts, PerProcessRowsBusiestFirstWithPidAndComm) {
    auto f = view();
    f.per_process = true;
    Snapshot now;
    now.counts[{100, 0, 3}] = count(5, 0, 5);
    now.counts[{200, 1, 1}] = count(9, 1, 8);
    now.comms[{100, 0, 3}] = "small";
    now.comms[{200, 1, 1}] = "tlb_workload";
    now.flush_ipis = {0, 9};
    const auto t = tlbflush::counts_since(now, Snapshot{}, f);
    auto [text, out] = render(tlbflush::counts_text, tlbflush::counts_json, t, f);
    EXPECT_EQ("PID      COMM             CPU  REASON                      COUNT       FULL        "
              "PAGES\n"
              "200      tlb_workload     1    remote_shootdown                9          1        "
              "    8\n"
              "100      small            0    local_mm_shootdown              5          0        "
              "    5\n"
              "\n"
              "Remote shootdowns received (flush IPIs handled: the /proc/interrupts TLB row):\n"
              "  CPU 1             9\n",
              text);
    EXPECT_EQ(200, out["counts"][0]["pid"]);
    EXPECT_EQ("tlb_workload", out["counts"][0]["comm"]);
    EXPECT_EQ("small", out["counts"][1]["comm"]);
}

namespace {

Snapshot culprits_now() {
    Snapshot s;
    const tlbflush::CulpritKey workload{300, 301, 1, 7, 8}, any{400, 400, TLBFLUSH_ANY_CPU, -1, -1},
        quiet{500, 500, 0, -1, -1};
    // IPIs queued (csd) per target; requests per target, or any for a mask not read.
    s.culprits = {{workload, 120}, {any, 0}, {quiet, 4}};
    s.culprit_requests = {{workload, 150}, {any, 3}, {quiet, 4}};
    s.culprit_comms = {{workload, "tlb_workload"}, {any, "gmake"}, {quiet, "quiet"}};
    return s;
}
Snapshot culprits_before() {
    Snapshot s;
    s.culprits[{300, 301, 1, 7, 8}] = 20;
    s.culprit_requests[{300, 301, 1, 7, 8}] = 30;
    s.culprits[{500, 500, 0, -1, -1}] = 4; // sent nothing in the interval
    s.culprit_requests[{500, 500, 0, -1, -1}] = 4;
    return s;
}

} // namespace

TEST(TlbflushCulprits, TableMostRequestsFirstWithAnyTarget) {
    const auto rows = tlbflush::culprits_since(culprits_now(), culprits_before());
    ASSERT_EQ(2u, rows.size());
    EXPECT_EQ("\nRemote flush requests and shootdown IPIs by sender:\n"
              "PID      TID      COMM             TARGET_CPU   REQUESTS       IPIS\n"
              "300      301      tlb_workload              1        120        100\n"
              "400      400      gmake                   any          3          0\n",
              tlbflush::culprits_text(rows, view()));
}

TEST(TlbflushCulprits, WithoutCsdTheIpisAreUnknown) {
    auto f = view();
    f.culprit_ipis_counted = false;
    const auto rows = tlbflush::culprits_since(culprits_now(), culprits_before());
    auto [text, out] = render(tlbflush::culprits_text, tlbflush::culprits_json, rows, f);
    EXPECT_EQ("\nRemote flush requests by sender (the IPIs each sent are not known without "
              "the csd tracepoints of Linux 6.3+):\n"
              "PID      TID      COMM             TARGET_CPU   REQUESTS       IPIS\n"
              "300      301      tlb_workload              1        120          -\n"
              "400      400      gmake                   any          3          -\n",
              text);
    EXPECT_TRUE(out["culprits"][0]["count"].is_null());
    EXPECT_EQ(120, out["culprits"][0]["requests"]);
}

TEST(TlbflushCulprits, StacksUnderEachSender) {
    auto f = view();
    f.stacks = true;
    auto rows = tlbflush::culprits_since(culprits_now(), culprits_before());
    rows[0].kernel_stack = {"flush_tlb_mm_range+0x1c3", "__x64_sys_munmap+0x17"};
    rows[0].user_stack = {"munmap+0x7 [libc.so.6]"};
    rows[1].kernel_stack = {"[stack lost]"};
    rows[1].user_stack = {"[no user stack]"};
    auto [text, out] = render(tlbflush::culprits_text, tlbflush::culprits_json, rows, f);
    EXPECT_EQ("\nRemote flush requests and shootdown IPIs by sender:\n"
              "PID      TID      COMM             TARGET_CPU   REQUESTS       IPIS\n"
              "300      301      tlb_workload              1        120        100\n"
              "    flush_tlb_mm_range+0x1c3\n"
              "    __x64_sys_munmap+0x17\n"
              "    --\n"
              "    munmap+0x7 [libc.so.6]\n"
              "\n"
              "400      400      gmake                   any          3          0\n"
              "    [stack lost]\n"
              "    --\n"
              "    [no user stack]\n"
              "\n",
              text);
    EXPECT_EQ(json::parse(R"([
        {"pid": 300, "tid": 301, "comm": "tlb_workload", "target_cpu": 1, "count": 100,
         "requests": 120, "kernel_stack": ["flush_tlb_mm_range+0x1c3", "__x64_sys_munmap+0x17"],
         "user_stack": ["munmap+0x7 [libc.so.6]"]},
        {"pid": 400, "tid": 400, "comm": "gmake", "target_cpu": null, "count": 0,
         "requests": 3, "kernel_stack": ["[stack lost]"], "user_stack": ["[no user stack]"]}])"),
              out["culprits"]);
}

TEST(TlbflushCulprits, JsonWithoutStacksHasNoStackKeys) {
    json out = json::object();
    tlbflush::culprits_json(tlbflush::culprits_since(culprits_now(), culprits_before()), view(),
                            out);
    ASSERT_EQ(2u, out["culprits"].size());
    EXPECT_EQ(json::parse(R"({"pid": 300, "tid": 301, "comm": "tlb_workload", "target_cpu": 1,
                              "count": 100, "requests": 120})"),
              out["culprits"][0]);
}

namespace {

// CPU 0 handled nothing in the interval; CPU 1 ran 4 handlers that flushed (2 ns to 3 ns
// each), one of them with two flushes, 5 flush callbacks (slot 1 too), and 1 flush outside.
Snapshot latency(uint64_t scale) {
    Snapshot s;
    s.handler_ns.assign(2, tlbflush::Hist{});
    s.handler_us.assign(2, tlbflush::Hist{});
    s.callback_ns.assign(2, tlbflush::Hist{});
    s.ipi_counts.assign(2, tlbflush_ipi_counts{});
    s.handler_ns[1][1] = 4 * scale;
    s.handler_us[1][0] = 4 * scale;
    s.callback_ns[1][1] = 5 * scale;
    s.ipi_counts[1] = {4 * scale, 1 * scale, 5 * scale, 1 * scale};
    return s;
}

const char *hist_of_4 = "     nsecs               : count    distribution\n"
                        "         0 -> 1          : 0        |                                    "
                        "    |\n"
                        "         2 -> 3          : 4        |************************************"
                        "****|\n";

} // namespace

TEST(TlbflushLatency, HandlerAndCallbackHistogramsPerVictimCpu) {
    const auto rows = tlbflush::latency_since(latency(2), latency(1));
    ASSERT_EQ(1u, rows.size());
    EXPECT_EQ(1u, rows[0].cpu);
    auto [text, out] = render(tlbflush::latency_text, tlbflush::latency_json, rows, view());
    EXPECT_EQ(std::string("\nCPU 1: IPI handler, entry to exit, in the 4 runs that flushed the "
                          "TLB (1 with several flushes, counted once)\n") +
                  hist_of_4 +
                  "\nCPU 1: flush_tlb_func callback, inside those runs (5 callbacks)\n"
                  "     nsecs               : count    distribution\n"
                  "         0 -> 1          : 0        |                                    "
                  "    |\n"
                  "         2 -> 3          : 5        |************************************"
                  "****|\n"
                  "\nCPU 1: TLB flush callbacks run without an IPI handler (idle loop): 1, in "
                  "no histogram\n",
              text);
    EXPECT_EQ(4, out["handler_latency"]["1"]["count"]);
    EXPECT_EQ("nsecs", out["handler_latency"]["1"]["unit"]);
    EXPECT_EQ(5, out["callback_latency"]["1"]["count"]);
    EXPECT_EQ("usecs", out["latency"]["1"]["unit"]);
    EXPECT_EQ(4, out["latency"]["1"]["count"]);
    EXPECT_EQ(json::parse(R"({"1": {"handler_runs": 4, "shared_runs": 1, "callbacks": 5,
                                    "without_ipi": 1}})"),
              out["tlb_ipis"]);
    EXPECT_FALSE(out["handler_latency"].contains("0"));
}

TEST(TlbflushLatency, WithoutCsdOnlyTheHandlerIsTimed) {
    auto f = view();
    f.callbacks_timed = false;
    auto now = latency(1);
    now.ipi_counts[1].shared_runs = 0;
    now.ipi_counts[1].without_ipi = 0;
    const auto rows = tlbflush::latency_since(now, Snapshot{});
    auto [text, out] = render(tlbflush::latency_text, tlbflush::latency_json, rows, f);
    EXPECT_EQ(std::string("\nCPU 1: IPI handler, entry to exit, in the 4 runs that flushed the "
                          "TLB\n") +
                  hist_of_4,
              text);
    now.ipi_counts[1].without_ipi = 2;
    EXPECT_NE(std::string::npos,
              tlbflush::latency_text(tlbflush::latency_since(now, Snapshot{}), f)
                  .find("\nCPU 1: TLB flush remote flushes without an IPI handler (idle loop): 2, "
                        "in no histogram\n"));
    EXPECT_TRUE(out["callback_latency"].is_null());
    EXPECT_TRUE(out["tlb_ipis"]["1"]["callbacks"].is_null());
}

TEST(TlbflushLatency, NoRunsNoRowsButTheJsonKeysStay) {
    const auto rows = tlbflush::latency_since(latency(1), latency(1));
    EXPECT_TRUE(rows.empty());
    auto [text, out] = render(tlbflush::latency_text, tlbflush::latency_json, rows, view());
    EXPECT_EQ("", text);
    EXPECT_EQ(json::parse(R"({"handler_latency": {}, "callback_latency": {}, "tlb_ipis": {},
                              "latency": {}})"),
              out);
}

TEST(TlbflushInterval, TimeViewsAndLosses) {
    const auto f = view();
    tlbflush::Interval interval;
    interval.time = "12:34:56";
    interval.counts = tlbflush::counts_since(counts_now(), counts_before(), f);
    interval.culprits = tlbflush::culprits_since(culprits_now(), culprits_before());
    interval.latency = tlbflush::latency_since(latency(1), Snapshot{});
    interval.lost_events = 3;
    interval.table_full = 2;
    interval.skipped_runs = 1;
    interval.lost_in = "perf buffer";
    EXPECT_EQ("\n12:34:56\n" + tlbflush::counts_text(interval.counts, f) +
                  tlbflush::culprits_text(*interval.culprits, f) +
                  tlbflush::latency_text(*interval.latency, f) +
                  "\nLost 3 trace events: the perf buffer was full.\n"
                  "\n2 events not counted: a BPF hash table was full.\n",
              tlbflush::interval_text(interval, f));
    const auto j = tlbflush::interval_json(interval, f);
    EXPECT_EQ("12:34:56", j["time"]);
    EXPECT_EQ(3, j["lost_events"]);
    EXPECT_EQ(2, j["table_full"]);
    EXPECT_EQ(1, j["recursion_misses"]);
    for (const char *key : {"counts", "remote_shootdowns", "culprits", "handler_latency",
                            "callback_latency", "tlb_ipis", "latency"})
        EXPECT_TRUE(j.contains(key)) << key;
}

TEST(TlbflushInterval, OnlyTheViewsAskedForAndNoLossLines) {
    const auto f = view();
    tlbflush::Interval interval;
    interval.counts = tlbflush::counts_since(counts_now(), counts_before(), f);
    EXPECT_EQ(tlbflush::counts_text(interval.counts, f), tlbflush::interval_text(interval, f));
    const auto j = tlbflush::interval_json(interval, f);
    EXPECT_FALSE(j.contains("culprits"));
    EXPECT_FALSE(j.contains("handler_latency"));
    EXPECT_EQ(0, j["lost_events"]);
}

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
    EXPECT_EQ(1, json["full"]);
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
                              {"full", 0}}),
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

// How remote flushes reach their CPUs, from what the run saw (tlbflush::observed_path()).
TEST(TlbflushPath, RequestsWithoutIpisAreTheHypervisors) {
    using tlbflush::observed_path;
    // PVM's: 74,000 requests, no IPI anywhere.
    EXPECT_EQ(FlushPath::Hypervisor, observed_path(FlushPath::Hypervisor, 74000, 0));
    // CPUID said KVM with its PV flush (a PVM guest's user space may read so), the trace
    // says otherwise.
    EXPECT_EQ(FlushPath::Hypervisor, observed_path(FlushPath::Mixed, 74000, 0));
    EXPECT_EQ(FlushPath::Hypervisor, observed_path(FlushPath::Ipi, 100, 0));
    // Too few requests to tell: what the machine says of itself stands.
    EXPECT_EQ(FlushPath::Ipi, observed_path(FlushPath::Ipi, 99, 0));
    EXPECT_EQ(FlushPath::Mixed, observed_path(FlushPath::Mixed, 0, 0));
    // IPIs handled: the hypervisor, where it can flush, does not do all of them.
    EXPECT_EQ(FlushPath::Mixed, observed_path(FlushPath::Mixed, 20000, 1948));
    EXPECT_EQ(FlushPath::Mixed, observed_path(FlushPath::Hypervisor, 500, 3));
    EXPECT_EQ(FlushPath::Ipi, observed_path(FlushPath::Ipi, 5000, 4900));
}

// path_seen(): the same rule on the run's totals (the metrics), with the csd tracepoints' flush
// IPIs where the kernel has them and tlb_flush's remote flushes on the victims where not.
TEST(TlbflushPath, FromTheRunsTotals) {
    const std::vector<uint64_t> requests{40, 60}; // per target CPU
    const std::vector<uint64_t> no_csd;
    EXPECT_EQ(FlushPath::Hypervisor, tlbflush::path_seen(FlushPath::Ipi, requests, no_csd, 0));
    EXPECT_EQ(FlushPath::Mixed, tlbflush::path_seen(FlushPath::Mixed, requests, no_csd, 3));
    // tlb_flush's remote reasons include CPUs catching up on a missed flush as they switch
    // mm: a few of them against many requests prove no IPI (PVM as nobody, 6.18: 6 against
    // 1,378 requests), and what the machine says stands; a tenth or more are IPIs.
    const std::vector<uint64_t> pvm{28, 1350};
    EXPECT_EQ(FlushPath::Unknown, tlbflush::path_seen(FlushPath::Unknown, pvm, no_csd, 6));
    EXPECT_EQ(FlushPath::Ipi, tlbflush::path_seen(FlushPath::Unknown, pvm, no_csd, 1300));
    // With the csd counts, those decide: tlb_flush's remote flushes are not looked at.
    EXPECT_EQ(FlushPath::Hypervisor,
              tlbflush::path_seen(FlushPath::Ipi, requests, std::vector<uint64_t>{0, 0}, 7));
    EXPECT_EQ(FlushPath::Ipi,
              tlbflush::path_seen(FlushPath::Ipi, requests, std::vector<uint64_t>{40, 2}, 0));
}

// With -p the IPIs are the victim task's and the requests the sender's: the run cannot tell
// the path, and what the machine says stands (an idle victim would look like a hypervisor).
TEST(TlbflushPath, NotJudgedFromFilteredCounts) {
    auto s = counts_now();
    s.flush_requests = {0, 500};
    s.flush_ipis = {0, 0};
    auto f = view();
    EXPECT_EQ(FlushPath::Hypervisor, tlbflush::path_of(s, f, FlushPath::Ipi));
    f.path_evidence = false;
    EXPECT_EQ(FlushPath::Ipi, tlbflush::path_of(s, f, FlushPath::Ipi));
}

TEST(TlbflushPath, JsonOfTheIntervalNamesIt) {
    const auto f = view();
    auto t = tlbflush::counts_since(counts_now(), counts_before(), f);
    // counts_now(): 60 requests named CPU 1, which handled 45 IPIs, since the start.
    t.path = tlbflush::path_of(counts_now(), f, FlushPath::Mixed);
    EXPECT_EQ(FlushPath::Mixed, t.path);
    auto [text, out] = render(tlbflush::counts_text, tlbflush::counts_json, t, f);
    EXPECT_EQ("mixed", out["remote_flush_path"]);
    EXPECT_NE(std::string::npos, text.find("delivered here by shootdown IPI or by the hypervisor"));
}

TEST(TlbflushInterval, LatencyWithoutHandlerRunsSaysSo) {
    auto f = view();
    tlbflush::Interval interval;
    interval.latency = std::vector<tlbflush::LatencyRow>{};
    interval.counts.path = FlushPath::Hypervisor;
    EXPECT_NE(std::string::npos, tlbflush::interval_text(interval, f)
                                     .find("no flush IPI was handled: remote TLB flushes on this "
                                           "machine go through the hypervisor"));
    interval.counts.path = FlushPath::Ipi;
    EXPECT_NE(std::string::npos,
              tlbflush::interval_text(interval, f).find("no CPU selected ran a flush IPI handler"));
}

TEST(TlbflushCounts, SelectedCpuShownWithZeroShootdowns) {
    auto f = view();
    f.cpus = {false, true};
    Snapshot before, now;
    before.flush_ipis = {5, 0};
    now.flush_ipis = {9, 0};
    const auto t = tlbflush::counts_since(now, before, f);
    ASSERT_EQ(2u, t.received.size());
    EXPECT_EQ(0u, t.received.at(1)); // selected, none received: shown as 0
    EXPECT_EQ(4u, t.received.at(0));
    EXPECT_NE(std::string::npos, tlbflush::counts_text(t, f).find("  CPU 1             0\n"));
}
