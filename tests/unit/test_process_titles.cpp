// Process titles (lib/kernel/process_titles.h): /proc/PID/cmdline as top -c shows it.
#include <gtest/gtest.h>
#include <unistd.h>

#include "kernel/process_titles.h"

using memlat::read_process_title;

TEST(ProcessTitles, OwnCommandLineJoinedAndCut) {
    const std::string mine = read_process_title(static_cast<uint32_t>(getpid()), 4096);
    EXPECT_NE(std::string::npos, mine.find("unit_tests")) << mine;
    EXPECT_EQ(std::string::npos, mine.find('\0'));
    EXPECT_EQ(5u, read_process_title(static_cast<uint32_t>(getpid()), 5).size());
}

TEST(ProcessTitles, KernelThreadsAndGoneProcessesHaveNone) {
    EXPECT_EQ("", read_process_title(2)); // kthreadd
    EXPECT_EQ("", read_process_title(0x7ffffff0));
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
