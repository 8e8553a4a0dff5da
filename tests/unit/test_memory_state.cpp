// The kernel's memory files as memory_state.h reads them, from texts the kernels print.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "kernel/memory_state.h"

using namespace memlat;

TEST(MemoryState, PressureFileOfTheHost) {
    // 6.18's /proc/pressure/memory.
    auto p = parse_pressure("some avg10=1.25 avg60=0.50 avg300=0.42 total=216503802\n"
                            "full avg10=0.00 avg60=0.00 avg300=0.38 total=198134742\n");
    ASSERT_TRUE(p);
    ASSERT_TRUE(p->some);
    EXPECT_DOUBLE_EQ(1.25, p->some->avg10);
    EXPECT_DOUBLE_EQ(0.50, p->some->avg60);
    EXPECT_DOUBLE_EQ(0.42, p->some->avg300);
    EXPECT_EQ(216503802u, p->some->total_us);
    ASSERT_TRUE(p->full);
    EXPECT_EQ(198134742u, p->full->total_us);
}

TEST(MemoryState, PressureWithoutFullOrSome) {
    // Before 5.2 the host's cpu file had no "full" line; the memory file always has both.
    auto p = parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n");
    ASSERT_TRUE(p);
    EXPECT_FALSE(p->full);
    EXPECT_EQ(7u, p->some->total_us);
    EXPECT_FALSE(parse_pressure(""));
    EXPECT_FALSE(parse_pressure("full avg10=0.00 avg60=0.00 avg300=0.00 total=7\n"));
    // A line without its total is not one.
    EXPECT_FALSE(parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00\n"));
    EXPECT_FALSE(parse_pressure("some avg10=x avg60=0.00 avg300=0.00 total=1\n"));
}

TEST(MemoryState, MeminfoInBytes) {
    auto m = parse_meminfo("MemTotal:       24684084 kB\n"
                           "MemFree:        22834908 kB\n"
                           "HugePages_Total:       0\n"
                           "Hugepagesize:       2048 kB\n"
                           "garbage\n");
    EXPECT_EQ(24684084ull * 1024, m.at("MemTotal"));
    EXPECT_EQ(22834908ull * 1024, m.at("MemFree"));
    EXPECT_EQ(0u, m.at("HugePages_Total"));
    EXPECT_EQ(2048u * 1024, m.at("Hugepagesize"));
    EXPECT_EQ(4u, m.size());
}

TEST(MemoryState, NodeMeminfo) {
    // /sys/devices/system/node/nodeN/meminfo names the node on every line.
    auto m = parse_meminfo("Node 0 MemTotal:       255460 kB\n"
                           "Node 0 HugePages_Total:     0\n");
    EXPECT_EQ(255460ull * 1024, m.at("MemTotal"));
    EXPECT_EQ(0u, m.at("HugePages_Total"));
}

TEST(MemoryState, KeyValues) {
    // memory.oom_control (v1) and memory.events (v2).
    auto oom = parse_key_values("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
    EXPECT_EQ(3u, oom.at("oom_kill"));
    auto events = parse_key_values("low 0\nhigh 12\nmax 3889\noom 1\noom_kill 1\n"
                                   "oom_group_kill 0\n");
    EXPECT_EQ(3889u, events.at("max"));
    EXPECT_EQ(6u, events.size());
    EXPECT_TRUE(parse_key_values("a b c\nd\ne -1\n").empty());
}

TEST(MemoryState, Limits) {
    EXPECT_FALSE(parse_limit("max\n"));
    // v1's "no limit" with 4 KiB pages, and with 64 KiB pages (arm64).
    EXPECT_FALSE(parse_limit("9223372036854771712\n"));
    EXPECT_FALSE(parse_limit("9223372036854710272\n"));
    EXPECT_EQ(33554432u, parse_limit("33554432\n"));
    EXPECT_FALSE(parse_limit("lots"));
}

namespace {

// A directory of files laid out as a cgroup's, {name, text} each, removed at the end.
class FakeCgroup {
  public:
    FakeCgroup(std::initializer_list<std::pair<std::string, std::string>> files) {
        char templ[] = "/tmp/memlat_memory_state_XXXXXX";
        dir_ = mkdtemp(templ);
        for (const auto &[name, text] : files)
            write(name, text);
    }
    ~FakeCgroup() {
        for (const auto &f : files_)
            unlink((dir_ + "/" + f).c_str());
        rmdir(dir_.c_str());
    }
    const std::string &dir() const { return dir_; }

  private:
    void write(const std::string &name, const std::string &text) {
        FILE *f = fopen((dir_ + "/" + name).c_str(), "w");
        ASSERT_NE(nullptr, f);
        fputs(text.c_str(), f);
        fclose(f);
        files_.push_back(name);
    }
    std::string dir_;
    std::vector<std::string> files_;
};

} // namespace

TEST(MemoryState, CgroupV2) {
    const FakeCgroup cg{
        {"memory.current", "30408704\n"},
        {"memory.max", "33554432\n"},
        {"memory.high", "max\n"},
        {"memory.events", "low 0\nhigh 0\nmax 3889\noom 0\noom_kill 0\n"},
        {"memory.pressure", "some avg10=3.00 avg60=1.00 avg300=0.20 total=123\n"
                            "full avg10=2.00 avg60=1.00 avg300=0.10 total=100\n"},
    };
    auto m = read_cgroup_memory(cg.dir(), false);
    EXPECT_EQ(30408704u, m.usage_bytes);
    EXPECT_EQ(33554432u, m.max_bytes);
    EXPECT_FALSE(m.high_bytes);
    EXPECT_EQ(3889u, m.events.at("max"));
    ASSERT_TRUE(m.pressure);
    EXPECT_EQ(123u, m.pressure->some->total_us);
}

TEST(MemoryState, CgroupV1) {
    const FakeCgroup cg{
        {"memory.usage_in_bytes", "1048576\n"},
        {"memory.limit_in_bytes", "9223372036854771712\n"},
        {"memory.failcnt", "17\n"},
        {"memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"},
    };
    auto m = read_cgroup_memory(cg.dir(), true);
    EXPECT_EQ(1048576u, m.usage_bytes);
    EXPECT_FALSE(m.max_bytes);
    EXPECT_FALSE(m.high_bytes);
    EXPECT_EQ(17u, m.events.at("max"));
    EXPECT_EQ(2u, m.events.at("oom_kill"));
    EXPECT_FALSE(m.pressure);
}

TEST(MemoryState, ACgroupThatWentHasNothing) {
    auto m = read_cgroup_memory("/nonexistent/memlat", false);
    EXPECT_FALSE(m.usage_bytes);
    EXPECT_TRUE(m.events.empty());
}

TEST(MemoryState, InterruptRow) {
    const std::string text = "            CPU0       CPU1       \n"
                             "  0:         44          0   IO-APIC   2-edge      timer\n"
                             " NMI:          0          0   Non-maskable interrupts\n"
                             " TLB:       2902       2083   TLB shootdowns\n"
                             " TRM:          0          0   Thermal event interrupts\n";
    EXPECT_EQ(std::optional<uint64_t>(4985), parse_interrupt_row(text, "TLB"));
    EXPECT_EQ(std::optional<uint64_t>(0), parse_interrupt_row(text, "NMI"));
    // arm64 has no TLB row; "TL" is no row's name.
    EXPECT_EQ(std::nullopt, parse_interrupt_row(text, "TL"));
    EXPECT_EQ(std::nullopt, parse_interrupt_row("IPI0: 5 6 Rescheduling interrupts\n", "TLB"));
}
