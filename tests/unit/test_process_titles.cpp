// Process titles (lib/kernel/process_titles.h): /proc/PID/cmdline as top -c shows it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "kernel/process_titles.h"

using memlat::read_process_title;

TEST(ProcessTitles, OwnCommandLineJoinedAndCut) {
    const std::string mine = read_process_title(static_cast<uint32_t>(getpid()), 4096);
    EXPECT_NE(std::string::npos, mine.find("unit_tests")) << mine;
    EXPECT_EQ(std::string::npos, mine.find('\0'));
    EXPECT_EQ(5u, read_process_title(static_cast<uint32_t>(getpid()), 5).size());
}

TEST(ProcessTitles, KernelThreadsAndGoneProcessesHaveNone) {
    // kthreadd is pid 2 outside a pid namespace; inside one, there is no kernel thread to ask.
    FILE *comm = fopen("/proc/2/comm", "r");
    char name[32] = {};
    if (comm != nullptr && fgets(name, sizeof(name), comm) != nullptr &&
        std::string(name) == "kthreadd\n") {
        EXPECT_EQ("", read_process_title(2));
    }
    if (comm != nullptr)
        fclose(comm);
    EXPECT_EQ("", read_process_title(0x7ffffff0));
    EXPECT_EQ(0u, memlat::process_start_time(0x7ffffff0));
    EXPECT_GT(memlat::process_start_time(static_cast<uint32_t>(getpid())), 0u);
}

TEST(ProcessTitles, ReadOncePerRefresh) {
    memlat::ProcessTitles titles(std::chrono::seconds(60), std::chrono::seconds(60));
    const uint32_t self = static_cast<uint32_t>(getpid());
    const std::string first = titles.of(self);
    EXPECT_EQ(first, titles.of(self));
    EXPECT_EQ(1u, titles.reads());
    titles.of(1);
    EXPECT_EQ(2u, titles.reads());
    EXPECT_EQ(2u, titles.size());
}
