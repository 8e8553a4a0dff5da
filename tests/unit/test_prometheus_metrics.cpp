// The tools' metric mappings (tools/*/*_metrics): names, labels, and the per-task and
// per-cgroup series under the cap.
#include <gtest/gtest.h>

#include <cstring>

#include "drsnoop/drsnoop_metrics.h"
#include "tlbflush/tlbflush_metrics.h"

using namespace memlat;
using namespace memlat::prometheus;

namespace {

bool contains(const std::string &text, const std::string &part) {
    return text.find(part) != std::string::npos;
}

PrometheusOptions options(std::vector<std::string> labels, size_t max_series = 1000) {
    PrometheusOptions o;
    o.listen = ListenAddress{"127.0.0.1", 0};
    o.labels = std::move(labels);
    o.max_series = max_series;
    return o;
}

// The text exposition of one collect() of `counts`: what a scrape then shows.
template <typename Metrics, typename Counts>
std::string scrape(Metrics &m, const Counts &counts) {
    Exposition out;
    m.collect(counts, out);
    return out.render(Format::Text);
}

drsnoop_summary summary(uint64_t stalls, const char *comm) {
    drsnoop_summary s{};
    s.stalls = stalls;
    s.total_ns = stalls * 1000;
    s.pages = stalls * 2;
    std::strncpy(s.comm, comm, sizeof(s.comm) - 1);
    return s;
}

} // namespace

TEST(PrometheusMetrics, DrsnoopKindsHistogramAndBytes) {
    drsnoop::Metrics m(options({}), "", 4096);
    drsnoop::Counts c;
    c.kinds[DRSNOOP_MEMCG] = true;
    c.totals[DRSNOOP_MEMCG] = {3, 30000, 10, 0};
    c.hist_us[DRSNOOP_MEMCG][3] = 3; // 8-15 us
    const auto text = scrape(m, c);
    EXPECT_TRUE(contains(text, "memlat_reclaim_stalls_total{kind=\"memcg\"} 3\n")) << text;
    EXPECT_FALSE(contains(text, "kind=\"direct\"")); // not traced: no series
    EXPECT_TRUE(
        contains(text, "memlat_reclaim_stall_seconds_bucket{kind=\"memcg\",le=\"1.6e-05\"} 3\n"));
    EXPECT_TRUE(contains(text, "memlat_reclaim_stall_seconds_sum{kind=\"memcg\"} 3e-05\n"));
    EXPECT_TRUE(contains(text, "memlat_reclaim_reclaimed_bytes_total{kind=\"memcg\"} 40960\n"));
    EXPECT_TRUE(contains(text, "memlat_series_dropped_total 0\n"));
    EXPECT_FALSE(contains(text, "memlat_reclaim_task_"));
}

TEST(PrometheusMetrics, DrsnoopPerTaskUnderTheCap) {
    drsnoop::Metrics m(options({"comm"}, 1), "/db", 4096);
    drsnoop::Counts c;
    c.kinds[DRSNOOP_MEMCG] = true;
    c.summaries = {{{10, DRSNOOP_MEMCG}, summary(2, "postgres")},
                   {{11, DRSNOOP_MEMCG}, summary(5, "backup")}};
    const auto text = scrape(m, c);
    // Entries are read in key order: pid 10 gets the one series, pid 11 goes to "other".
    EXPECT_TRUE(contains(text, "memlat_reclaim_task_stalls_total{kind=\"memcg\",cgroup=\"/db\","
                               "comm=\"postgres\"} 2\n"))
        << text;
    EXPECT_TRUE(contains(text, "comm=\"other\"} 5\n"));
    EXPECT_TRUE(contains(text, "memlat_series_dropped_total 1\n"));
    EXPECT_TRUE(contains(text, "memlat_reclaim_stalls_total{kind=\"memcg\",cgroup=\"/db\"} 0\n"));
}

TEST(PrometheusMetrics, DrsnoopCgroupSeriesGoWithTheCgroup) {
    drsnoop::Metrics m(options({"cgroup"}), "/p", 4096);
    drsnoop::Counts c;
    c.kinds[DRSNOOP_MEMCG] = true;
    c.cgroups = {{{7, DRSNOOP_MEMCG, 0}, {4, 4000, 8, 0}}};
    c.cgroup_paths = {{7, "/p/a"}};
    const auto text = scrape(m, c);
    EXPECT_TRUE(
        contains(text, "memlat_reclaim_cgroup_stalls_total{kind=\"memcg\",cgroup=\"/p/a\"} 4\n"))
        << text;
    // With per-cgroup series the -G path is not a label of its own (it would repeat "cgroup").
    EXPECT_TRUE(contains(text, "memlat_reclaim_stalls_total{kind=\"memcg\"} 0\n"));
    c.cgroups.clear();
    c.cgroup_paths.clear(); // the cgroup was removed
    EXPECT_FALSE(contains(scrape(m, c), "/p/a"));
}

TEST(PrometheusMetrics, TlbflushRemoteSeriesFromTheStart) {
    tlbflush::Metrics m(
        options({}),
        [](uint32_t r) {
            return r == 1 ? "remote_shootdown" : r == 5 ? "remote_wrong_cpu" : "other_reason";
        },
        {1, 5});
    tlbflush::Counts c;
    c.cpus = {true, true};
    c.by_cpu.resize(2);
    c.by_cpu[1][1].count = 7;
    c.by_cpu[1][0].count = 3;
    const auto text = scrape(m, c);
    EXPECT_TRUE(contains(
        text, "memlat_tlb_remote_shootdowns_total{cpu=\"0\",reason=\"remote_shootdown\"} 0\n"))
        << text;
    EXPECT_TRUE(contains(
        text, "memlat_tlb_remote_shootdowns_total{cpu=\"1\",reason=\"remote_shootdown\"} 7\n"));
    EXPECT_TRUE(contains(
        text, "memlat_tlb_remote_shootdowns_total{cpu=\"0\",reason=\"remote_wrong_cpu\"} 0\n"));
    EXPECT_TRUE(contains(text, "memlat_tlb_flushes_total{cpu=\"1\",reason=\"other_reason\"} 3\n"));
    // A reason that never happened on a CPU has no series there.
    EXPECT_FALSE(contains(text, "memlat_tlb_flushes_total{cpu=\"0\",reason=\"other_reason\"}"));
    EXPECT_FALSE(contains(text, "memlat_tlb_shootdown_handler_seconds")); // no -L
    // Without the csd tracepoints the help says the count is below the TLB row.
    EXPECT_TRUE(contains(text, "fewer than the /proc/interrupts TLB row"));

    // With them, the flush IPIs handled: the TLB row, by CPU.
    c.flush_ipis = {2, 9};
    const auto csd = scrape(m, c);
    EXPECT_TRUE(contains(csd, "memlat_tlb_remote_shootdowns_total{cpu=\"0\"} 2\n")) << csd;
    EXPECT_TRUE(contains(csd, "memlat_tlb_remote_shootdowns_total{cpu=\"1\"} 9\n"));
    EXPECT_TRUE(contains(csd, "what /proc/interrupts counts in its TLB row"));
    EXPECT_FALSE(contains(csd, "memlat_tlb_remote_shootdowns_total{cpu=\"1\",reason="));
}
