// The exposition writer behind --prometheus: formats, escaping, histograms, the series cap,
// and the listen-address syntax.
#include <gtest/gtest.h>

#include <array>

#include "prometheus/exporter.h"
#include "prometheus/process_metrics.h"
#include "prometheus/prometheus.h"

using namespace memlat;
using namespace memlat::prometheus;

namespace {

bool contains(const std::string &text, const std::string &part) {
    return text.find(part) != std::string::npos;
}

} // namespace

TEST(Prometheus, CounterInBothFormats) {
    Exposition e;
    e.family("memlat_tlb_remote_shootdowns", Type::Counter, "Remote TLB shootdowns received");
    e.sample({{"cpu", "1"}, {"reason", "remote_shootdown"}}, 43230);
    const auto text = e.render(Format::Text);
    EXPECT_EQ(text, "# HELP memlat_tlb_remote_shootdowns_total Remote TLB shootdowns received\n"
                    "# TYPE memlat_tlb_remote_shootdowns_total counter\n"
                    "memlat_tlb_remote_shootdowns_total{cpu=\"1\",reason=\"remote_shootdown\"} "
                    "43230\n");
    const auto om = e.render(Format::OpenMetrics);
    EXPECT_EQ(om, "# HELP memlat_tlb_remote_shootdowns Remote TLB shootdowns received\n"
                  "# TYPE memlat_tlb_remote_shootdowns counter\n"
                  "memlat_tlb_remote_shootdowns_total{cpu=\"1\",reason=\"remote_shootdown\"} "
                  "43230\n"
                  "# EOF\n");
}

TEST(Prometheus, UnitAndInfoFollowTheFormat) {
    Exposition e;
    e.family("memlat_reclaim_stall_seconds", Type::Counter, "Stall time", "seconds");
    e.sample({}, 0.5);
    e.family("memlat_build", Type::Info, "Build");
    e.sample({{"version", "0.1.0"}}, 1);
    const auto text = e.render(Format::Text);
    EXPECT_FALSE(contains(text, "# UNIT"));
    EXPECT_TRUE(contains(text, "# TYPE memlat_build_info gauge\n"));
    EXPECT_TRUE(contains(text, "memlat_reclaim_stall_seconds_total 0.5\n"));
    const auto om = e.render(Format::OpenMetrics);
    EXPECT_TRUE(contains(om, "# UNIT memlat_reclaim_stall_seconds seconds\n"));
    EXPECT_TRUE(contains(om, "# TYPE memlat_build info\n"));
    EXPECT_TRUE(contains(om, "memlat_build_info{version=\"0.1.0\"} 1\n"));
    EXPECT_TRUE(om.ends_with("# EOF\n"));
}

TEST(Prometheus, NegotiatesByAccept) {
    EXPECT_EQ(negotiate(""), Format::Text);
    EXPECT_EQ(negotiate("text/plain;version=0.0.4;q=0.5,*/*;q=0.1"), Format::Text);
    EXPECT_EQ(negotiate("application/openmetrics-text;version=1.0.0,application/"
                        "openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5"),
              Format::OpenMetrics);
    EXPECT_TRUE(content_type(Format::Text).starts_with("text/plain; version=0.0.4"));
    EXPECT_TRUE(content_type(Format::OpenMetrics).starts_with("application/openmetrics-text"));
}

TEST(Prometheus, CgroupFilterLabelsAndASeriesOwnLabelFirst) {
    EXPECT_EQ(Labels{}, cgroup_filter_labels(""));
    EXPECT_EQ((Labels{{"cgroup", "/db"}}), cgroup_filter_labels("/db"));
    // Per-cgroup series name their own cgroup: -G's path is no label of every series then.
    EXPECT_EQ(Labels{}, cgroup_filter_labels("/db", true));
    const Labels common{{"cgroup", "/db"}, {"tool", "drsnoop"}};
    EXPECT_EQ((Labels{{"kind", "memcg"}, {"cgroup", "/db"}, {"tool", "drsnoop"}}),
              labels_of("kind", "memcg", common));
}

TEST(Prometheus, EscapesLabelValues) {
    EXPECT_EQ(escape_label_value("plain"), "plain");
    EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    // A task name cut inside a character, and a byte that is never UTF-8: U+FFFD each.
    EXPECT_EQ(escape_label_value("caf\xc3"), "caf\xef\xbf\xbd");
    EXPECT_EQ(escape_label_value("x\xffy"), "x\xef\xbf\xbdy");
    EXPECT_EQ(escape_label_value("h\xc3\xa9"), "h\xc3\xa9"); // valid UTF-8 stays
}

TEST(Prometheus, MergesLabelSetsThatEscapeAlike) {
    // Two names that differ only in invalid bytes become one series, their counts added,
    // never two lines with the same labels (which Prometheus would refuse).
    Exposition e;
    e.family("memlat_reclaim_stalls", Type::Counter, "Stalls");
    e.sample({{"comm", "a\xfe"}}, 2);
    e.sample({{"comm", "a\xff"}}, 3);
    const auto text = e.render(Format::Text);
    EXPECT_TRUE(contains(text, "memlat_reclaim_stalls_total{comm=\"a\xef\xbf\xbd\"} 5\n")) << text;
}

TEST(Prometheus, HistogramFromLog2Slots) {
    // Microsecond slots: slot 0 (0-1 us) 1, slot 3 (8-15 us) 4, slot 4 (16-31 us) 2.
    std::array<uint64_t, 6> slots{1, 0, 0, 4, 2, 0};
    Exposition e;
    e.family("memlat_reclaim_stall_seconds", Type::Histogram, "Stalls", "seconds");
    e.histogram({{"kind", "memcg"}}, slots, 1e-6, 0.0001);
    const auto text = e.render(Format::Text);
    EXPECT_TRUE(contains(text, "# TYPE memlat_reclaim_stall_seconds histogram\n"));
    EXPECT_TRUE(
        contains(text, "memlat_reclaim_stall_seconds_bucket{kind=\"memcg\",le=\"2e-06\"} 1\n"))
        << text;
    EXPECT_TRUE(contains(text, "le=\"4e-06\"} 1\n"));
    EXPECT_TRUE(contains(text, "le=\"8e-06\"} 1\n"));
    EXPECT_TRUE(contains(text, "le=\"1.6e-05\"} 5\n"));
    EXPECT_TRUE(contains(text, "le=\"3.2e-05\"} 7\n"));
    EXPECT_TRUE(contains(text, "le=\"6.4e-05\"} 7\n"));
    EXPECT_TRUE(
        contains(text, "memlat_reclaim_stall_seconds_bucket{kind=\"memcg\",le=\"+Inf\"} 7\n"));
    EXPECT_TRUE(contains(text, "memlat_reclaim_stall_seconds_sum{kind=\"memcg\"} 0.0001\n"));
    EXPECT_TRUE(contains(text, "memlat_reclaim_stall_seconds_count{kind=\"memcg\"} 7\n"));
}

TEST(Prometheus, FormatsValues) {
    EXPECT_EQ(format_value(0), "0");
    EXPECT_EQ(format_value(12345678901234.0), "12345678901234");
    EXPECT_EQ(format_value(0.25), "0.25");
    EXPECT_EQ(format_value(1.0 / 0.0), "+Inf");
}

TEST(Prometheus, BoundedCountersStayMonotonicWhenEntriesGo) {
    BoundedCounters c(1, 10, {"comm"});
    const std::array<double, 1> five{5}, seven{7}, two{2};
    c.begin();
    c.update("pid1", {{"comm", "bash"}}, five);
    c.end();
    c.begin();
    c.update("pid1", {{"comm", "bash"}}, seven);
    c.end();
    EXPECT_EQ(c.series().at({{"comm", "bash"}})[0], 7);
    // pid 1 exited (its entry deleted); a new bash process starts from 2.
    c.begin();
    c.update("pid2", {{"comm", "bash"}}, two);
    c.end();
    EXPECT_EQ(c.series().at({{"comm", "bash"}})[0], 9);
    EXPECT_EQ(c.dropped(), 0u);
}

TEST(Prometheus, BoundedCountersCapSeries) {
    BoundedCounters c(1, 2, {"comm"});
    const std::array<double, 1> one{1};
    c.begin();
    for (int i = 0; i < 5; ++i)
        c.update("pid" + std::to_string(i), {{"kind", "memcg"}, {"comm", "p" + std::to_string(i)}},
                 one);
    c.end();
    EXPECT_EQ(c.series().size(), 3u); // two of their own, and "other"
    EXPECT_EQ(c.series().at({{"kind", "memcg"}, {"comm", "other"}})[0], 3);
    EXPECT_EQ(c.dropped(), 3u);
    // A label set that has a series keeps it; the counts of the others never move back.
    c.begin();
    c.update("pid9", {{"kind", "memcg"}, {"comm", "p0"}}, one);
    c.end();
    EXPECT_EQ(c.series().at({{"kind", "memcg"}, {"comm", "p0"}})[0], 2);
}

namespace {

// Per-cgroup series capped at `max_series`, after one read with an entry (a count of 1) for
// each of the cgroups /a, /b and /c, in that order: with a cap of 2, /c's goes to "other".
BoundedCounters cgroups_read(size_t max_series) {
    const std::array<double, 1> one{1};
    BoundedCounters g(1, max_series, {"cgroup"});
    g.begin();
    for (const char *path : {"/a", "/b", "/c"})
        g.update(path, {{"cgroup", path}}, one);
    g.end();
    return g;
}

} // namespace

TEST(Prometheus, BoundedCountersDropRemovedCgroups) {
    const std::array<double, 1> one{1};
    // A removed cgroup's series frees its slot; "other" and the live ones stay.
    auto g = cgroups_read(2);
    g.remove_removed_cgroups({{7, "/a"}});
    EXPECT_EQ(g.series().count({{"cgroup", "/b"}}), 0u);
    EXPECT_EQ(g.series().count({{"cgroup", "/a"}}), 1u);
    EXPECT_EQ(g.series().count({{"cgroup", "other"}}), 1u);
    g.begin();
    g.update("/d", {{"cgroup", "/d"}}, one);
    g.end();
    EXPECT_EQ(g.series().count({{"cgroup", "/d"}}), 1u);
}

// memstall's series outlive their threads' entries: a cgroup this read's entries do not name
// keeps its series while `exists` says its directory is there.
TEST(Prometheus, BoundedCountersKeepCgroupsThatExist) {
    auto g = cgroups_read(10);
    g.remove_removed_cgroups({{7, "/a"}}, [](const std::string &path) { return path == "/b"; });
    EXPECT_EQ(g.series().count({{"cgroup", "/a"}}), 1u);
    EXPECT_EQ(g.series().count({{"cgroup", "/b"}}), 1u);
    EXPECT_EQ(g.series().count({{"cgroup", "/c"}}), 0u);
}

TEST(Prometheus, CounterFamiliesOnePerValueWithTheNamesUnit) {
    BoundedCounters c(3, 10, {"comm"});
    const std::array<double, 3> values{4, 0.5, 8192};
    c.begin();
    c.update("pid1", {{"comm", "bash"}}, values);
    c.end();
    Exposition out;
    const std::array<std::pair<const char *, const char *>, 3> families{{
        {"memlat_x_stalls", "Stalls"},
        {"memlat_x_stall_seconds", "Time"},
        {"memlat_x_reclaimed_bytes", "Memory"},
    }};
    write_counter_families(out, families, c);
    const std::string text = out.render(Format::OpenMetrics);
    EXPECT_TRUE(contains(text, "# TYPE memlat_x_stalls counter\n")) << text;
    EXPECT_FALSE(contains(text, "# UNIT memlat_x_stalls ")) << text;
    EXPECT_TRUE(contains(text, "# UNIT memlat_x_stall_seconds seconds\n")) << text;
    EXPECT_TRUE(contains(text, "# UNIT memlat_x_reclaimed_bytes bytes\n")) << text;
    EXPECT_TRUE(contains(text, "memlat_x_stalls_total{comm=\"bash\"} 4\n")) << text;
    EXPECT_TRUE(contains(text, "memlat_x_stall_seconds_total{comm=\"bash\"} 0.5\n")) << text;
    EXPECT_TRUE(contains(text, "memlat_x_reclaimed_bytes_total{comm=\"bash\"} 8192\n")) << text;
}

TEST(Prometheus, ParsesListenAddresses) {
    EXPECT_EQ(parse_listen_address("9847").describe(), "*:9847");
    EXPECT_EQ(parse_listen_address(":9847").describe(), "*:9847");
    EXPECT_EQ(parse_listen_address("127.0.0.1:9847").describe(), "127.0.0.1:9847");
    EXPECT_EQ(parse_listen_address("localhost:1").describe(), "127.0.0.1:1");
    EXPECT_EQ(parse_listen_address("[::1]:9847").describe(), "[::1]:9847");
    for (const char *bad : {"", ":", "abc", "70000", "127.0.0.1:", "127.0.0.1:x", "host:80",
                            "::1:80", "[::1]", "[::1]80", "1.2.3.4.5:80", "-1"})
        EXPECT_THROW(parse_listen_address(bad), UsageError) << bad;
}

TEST(Prometheus, MergeAddsFamiliesAndTheSeriesOfTheSameFamily) {
    // memlat exporter: each tool's exposition apart, then one.
    Exposition all, drsnoop, tlbflush;
    all.family("memlat_build", Type::Info, "Build");
    all.sample({{"tool", "exporter"}}, 1);
    drsnoop.set_tool("drsnoop");
    drsnoop.family("memlat_reclaim_stalls", Type::Counter, "Stalls");
    drsnoop.sample({{"kind", "memcg"}}, 3);
    loss_metrics(drsnoop, 1, 2);
    tlbflush.set_tool("tlbflush");
    loss_metrics(tlbflush, 4, 0);
    tlbflush.family("memlat_tlb_flushes", Type::Counter, "Flushes");
    tlbflush.sample({{"cpu", "0"}, {"reason", "task_switch"}}, 9);
    all.merge(drsnoop);
    all.merge(tlbflush);
    EXPECT_EQ(all.render(Format::Text),
              "# HELP memlat_build_info Build\n"
              "# TYPE memlat_build_info gauge\n"
              "memlat_build_info{tool=\"exporter\"} 1\n"
              "# HELP memlat_reclaim_stalls_total Stalls\n"
              "# TYPE memlat_reclaim_stalls_total counter\n"
              "memlat_reclaim_stalls_total{kind=\"memcg\"} 3\n"
              "# HELP memlat_lost_events_total Events lost because the buffer between the kernel "
              "and the tool was full\n"
              "# TYPE memlat_lost_events_total counter\n"
              "memlat_lost_events_total{tool=\"drsnoop\"} 1\n"
              "memlat_lost_events_total{tool=\"tlbflush\"} 4\n"
              "# HELP memlat_table_full_total Events not counted because a BPF table had no room "
              "for a new entry\n"
              "# TYPE memlat_table_full_total counter\n"
              "memlat_table_full_total{tool=\"drsnoop\"} 2\n"
              "memlat_table_full_total{tool=\"tlbflush\"} 0\n"
              "# HELP memlat_tlb_flushes_total Flushes\n"
              "# TYPE memlat_tlb_flushes_total counter\n"
              "memlat_tlb_flushes_total{cpu=\"0\",reason=\"task_switch\"} 9\n");
}

TEST(Prometheus, MergeAddsUpTheSameSeriesAndRefusesTwoTypesForOneName) {
    Exposition a, b, c;
    const std::array<uint64_t, 3> slots{1, 2, 0};
    a.family("memlat_x_seconds", Type::Histogram, "X");
    a.histogram({{"kind", "k"}}, slots, 1e-6, 0.5);
    b.family("memlat_x_seconds", Type::Histogram, "X");
    b.histogram({{"kind", "k"}}, slots, 1e-6, 0.25);
    a.merge(b);
    const auto text = a.render(Format::Text);
    EXPECT_TRUE(contains(text, "memlat_x_seconds_bucket{kind=\"k\",le=\"4e-06\"} 6\n")) << text;
    EXPECT_TRUE(contains(text, "memlat_x_seconds_sum{kind=\"k\"} 0.75\n")) << text;
    c.family("memlat_x_seconds", Type::Counter, "X");
    EXPECT_THROW(a.merge(c), std::logic_error);
}

TEST(Prometheus, UnpairedEndsOnlyForToolsThatTimeABeginAndAnEnd) {
    Exposition counting, timing;
    loss_metrics(counting, 0, 0);
    loss_metrics(timing, 0, 0, 3);
    EXPECT_FALSE(contains(counting.render(Format::Text), "memlat_unpaired_ends_total"));
    EXPECT_TRUE(
        contains(timing.render(Format::Text),
                 "# TYPE memlat_unpaired_ends_total counter\nmemlat_unpaired_ends_total 3\n"))
        << timing.render(Format::Text);
}

TEST(Prometheus, AToolsOwnExpositionHasNoToolLabel) {
    Exposition e;
    loss_metrics(e, 0, 0);
    series_dropped_metric(e, 5);
    EXPECT_TRUE(contains(e.render(Format::Text), "memlat_series_dropped_total 5\n"));
    EXPECT_FALSE(contains(e.render(Format::Text), "tool="));
}

// /proc/PID/stat of a task named "a) b (c", whose name holds the separators, from Linux 6.18:
// utime 250, stime 50 ticks, starttime 12345 ticks after boot.
TEST(ProcessUsage, FieldsCountedFromTheLastParenthesis) {
    const std::string stat_line =
        "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 1220 0 0 0 250 50 0 0 20 0 3 0 12345 "
        "80678912 900 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 "
        "0 0 0 0\n";
    const std::string status = "Name:\ta) b (c\nVmPeak:\t   80000 kB\nVmSize:\t   78788 kB\n"
                               "VmRSS:\t    3680 kB\nRssAnon:\t    1000 kB\n";
    const std::string proc_stat = "cpu  1 2 3\nintr 5\nctxt 99\nbtime 1795900000\nprocesses 9\n";
    const auto usage = parse_process_usage(stat_line, status, proc_stat, 100);
    ASSERT_TRUE(usage.has_value());
    EXPECT_DOUBLE_EQ(3.0, usage->cpu_seconds);
    EXPECT_DOUBLE_EQ(3680.0 * 1024, usage->resident_bytes);
    EXPECT_DOUBLE_EQ(78788.0 * 1024, usage->virtual_bytes);
    EXPECT_DOUBLE_EQ(1795900000.0 + 123.45, usage->start_time_seconds);
}

TEST(ProcessUsage, TextsThatAreNotTheKernelsAreRefused) {
    const std::string status = "VmSize:\t1 kB\nVmRSS:\t1 kB\n";
    const std::string proc_stat = "btime 1\n";
    EXPECT_FALSE(parse_process_usage("4242 no parenthesis 1 2 3", status, proc_stat, 100));
    EXPECT_FALSE(parse_process_usage("4242 (short) S 1 2", status, proc_stat, 100));
    const std::string full = "1 (x) S" + std::string(60, ' ') + "\n";
    EXPECT_FALSE(parse_process_usage(full, status, proc_stat, 100));
    const std::string line = "1 (x) S 0 0 0 0 0 0 0 0 0 0 1 1 0 0 0 0 1 0 7 0 0\n";
    EXPECT_TRUE(parse_process_usage(line, status, proc_stat, 100));
    EXPECT_FALSE(parse_process_usage(line, "VmRSS:\t1 kB\n", proc_stat, 100));
    EXPECT_FALSE(parse_process_usage(line, status, "cpu 1 2\n", 100));
    EXPECT_FALSE(parse_process_usage(line, status, proc_stat, 0));
}

// A cgroup's series name what runs there as kube-state-metrics and cAdvisor do; past the cap
// the one "other" series has no such labels, whatever the cgroups it takes named.
TEST(Prometheus, CgroupLabelsNameThePodAndOtherHasNone) {
    memlat::Workload pod{
        .kind = "container", .k8s_namespace = "shop", .pod = "checkout-7d9f", .container = "web"};
    memlat::Workload docker{.kind = "container", .runtime = "docker", .container = "db"};
    Labels l{{"cause", "memcg"}};
    memlat::prometheus::add_cgroup_labels(l, "/kubepods/x", &pod);
    EXPECT_EQ(l, (Labels{{"cause", "memcg"},
                         {"cgroup", "/kubepods/x"},
                         {"namespace", "shop"},
                         {"pod", "checkout-7d9f"},
                         {"container", "web"}}));
    Labels d;
    memlat::prometheus::add_cgroup_labels(d, "/docker/1", &docker);
    EXPECT_EQ(d, (Labels{{"cgroup", "/docker/1"}, {"container", "db"}}));
    Labels none;
    memlat::prometheus::add_cgroup_labels(none, "/system.slice/cron.service", nullptr);
    EXPECT_EQ(none, (Labels{{"cgroup", "/system.slice/cron.service"}}));

    BoundedCounters g(1, 1, {"cgroup"});
    const std::array<double, 1> one{1};
    g.begin();
    g.update("a", d, one);
    g.update("b", l, one);
    g.update("c", none, one);
    g.end();
    EXPECT_EQ(g.series().size(), 3u); // d's own, and "other" for each set of other labels
    EXPECT_EQ(g.series().at(d)[0], 1);
    EXPECT_EQ(g.series().at({{"cause", "memcg"}, {"cgroup", "other"}})[0], 1);
    EXPECT_EQ(g.series().at({{"cgroup", "other"}})[0], 1);
}
