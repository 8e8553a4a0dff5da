#include <gtest/gtest.h>

#include "errors.h"
#include "options.h"

using memlat::parse_cpu_list;
using memlat::split_list;
using memlat::UsageError;

namespace {

std::vector<int> selected(const std::vector<bool> &mask) {
    std::vector<int> cpus;
    for (size_t i = 0; i < mask.size(); ++i)
        if (mask[i])
            cpus.push_back(static_cast<int>(i));
    return cpus;
}

std::string usage_error(std::string_view list, int ncpus) {
    try {
        parse_cpu_list(list, ncpus);
    } catch (const UsageError &e) {
        return e.what();
    }
    return "no error";
}

} // namespace

TEST(CpuList, SingleCpu) {
    EXPECT_EQ(selected(parse_cpu_list("11", 16)), std::vector<int>{11});
}

TEST(CpuList, ListsAndRanges) {
    EXPECT_EQ(selected(parse_cpu_list("0,2-5", 8)), (std::vector<int>{0, 2, 3, 4, 5}));
    EXPECT_EQ(selected(parse_cpu_list("3-3,1", 4)), (std::vector<int>{1, 3}));
    EXPECT_EQ(parse_cpu_list("1", 4).size(), 4u);
}

TEST(CpuList, RejectsWhatIsNotACpu) {
    EXPECT_NE(usage_error("x", 4).find("'x' in CPU list 'x' is not a CPU number"),
              std::string::npos);
    EXPECT_NE(usage_error("-1", 4).find("not a CPU number"), std::string::npos);
    EXPECT_NE(usage_error("1.5", 4).find("not a CPU number"), std::string::npos);
    EXPECT_NE(usage_error("", 4).find("empty item"), std::string::npos);
    EXPECT_NE(usage_error("1,,2", 4).find("empty item"), std::string::npos);
    EXPECT_NE(usage_error("2-", 4).find("not a CPU number"), std::string::npos);
}

TEST(CpuList, RejectsCpusTheMachineLacks) {
    EXPECT_NE(usage_error("4", 4).find("CPU 4 in '4' does not exist: this machine has CPUs 0-3"),
              std::string::npos);
    EXPECT_NE(usage_error("0-9", 2).find("CPU 9"), std::string::npos);
}

TEST(CpuList, RejectsBackwardRanges) {
    EXPECT_NE(usage_error("3-1", 4).find("runs backwards"), std::string::npos);
}

TEST(SplitList, SplitsOnCommas) {
    EXPECT_EQ(split_list("a,b", "x"), (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(split_list("one", "x"), (std::vector<std::string>{"one"}));
    EXPECT_THROW(split_list("a,", "reason list"), UsageError);
}
