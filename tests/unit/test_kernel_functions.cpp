#include <gtest/gtest.h>

#include <unistd.h>

#include "loading/kernel_functions.h"
#include "loading/symbols.h"

using memlat::find_kernel_functions;
using memlat::KernelSymbols;
using memlat::size_from_described;

TEST(KernelFunctions, SizeFromTheKernelsDescription) {
    EXPECT_EQ(size_from_described("read_pages+0x0/0x2f0", "read_pages"), 0x2f0u);
    EXPECT_EQ(size_from_described("kvm_foo+0x0/0x40 [kvm]", "kvm_foo"), 0x40u);
    // Another symbol, another offset, or no size: no size.
    EXPECT_EQ(size_from_described("read_pages_x+0x0/0x2f0", "read_pages"), std::nullopt);
    EXPECT_EQ(size_from_described("read_pages+0x10/0x2f0", "read_pages"), std::nullopt);
    EXPECT_EQ(size_from_described("read_pages+0x0/0x", "read_pages"), std::nullopt);
    EXPECT_EQ(size_from_described("read_pages+0x0/0x0", "read_pages"), std::nullopt);
    EXPECT_EQ(size_from_described("0xffffffff81000000", "read_pages"), std::nullopt);
    EXPECT_EQ(size_from_described("", "read_pages"), std::nullopt);
}

TEST(KernelFunctions, RefusesNamesTheQueryCannotHold) {
    EXPECT_EQ(find_kernel_functions({""}), std::nullopt);
    EXPECT_EQ(find_kernel_functions({std::string(64, 'x')}), std::nullopt);
}

// The lookup in the kernel against /proc/kallsyms read as a file (a path other than the
// default one makes load_only() read it): the same addresses, and the size reaching the next
// symbol. Needs root and Linux 5.16; elsewhere the tools read kallsyms, and this is skipped.
TEST(KernelFunctions, AgreeWithKallsyms) {
    if (geteuid() != 0)
        GTEST_SKIP() << "needs root (a BPF program)";
    const std::vector<std::string> names{"schedule", "read_pages", "do_swap_page",
                                         "no_such_function_in_any_kernel"};
    const auto found = find_kernel_functions(names);
    if (!found)
        GTEST_SKIP() << "this kernel cannot look functions up from BPF (before 5.16)";
    const auto file = KernelSymbols::load_only(names, "/proc/./kallsyms");
    if (file.addresses_hidden())
        GTEST_SKIP() << "kallsyms hides addresses from this user";
    ASSERT_EQ(found->size(), names.size());
    for (const auto &f : *found) {
        SCOPED_TRACE(f.name);
        EXPECT_EQ(f.address, file.address_of(f.name).value_or(0));
        const auto range = file.text_range(f.name);
        if (f.address == 0) {
            EXPECT_FALSE(range);
            continue;
        }
        ASSERT_TRUE(range);
        EXPECT_EQ(f.address + f.size, range->end);
    }
    EXPECT_EQ(found->back().address, 0u);
}

TEST(KernelFunctions, DescribeAddressesAsKallsyms) {
    EXPECT_EQ(memlat::without_size("read_pages+0x1c/0x2f0"), "read_pages+0x1c");
    EXPECT_EQ(memlat::without_size("kvm_foo+0x0/0x40 [kvm]"), "kvm_foo+0x0 [kvm]");
    EXPECT_EQ(memlat::without_size("0xffffffffc0123456"), "0xffffffffc0123456");
    if (geteuid() != 0)
        GTEST_SKIP() << "needs root (a BPF program)";
    const auto found = find_kernel_functions({"schedule", "read_pages"});
    if (!found || found->front().address == 0)
        GTEST_SKIP() << "this kernel cannot look functions up from BPF (before 5.16)";
    const auto file = KernelSymbols::load("/proc/./kallsyms");
    std::vector<uint64_t> ips;
    for (const auto &f : *found)
        if (f.address != 0)
            ips.insert(ips.end(), {f.address, f.address + 5});
    const auto describer = memlat::KernelDescriber::load();
    ASSERT_TRUE(describer);
    const auto texts = describer->describe(ips);
    ASSERT_TRUE(texts);
    ASSERT_EQ(texts->size(), ips.size());
    for (size_t i = 0; i < ips.size(); ++i)
        EXPECT_EQ((*texts)[i], file.describe(ips[i]));
    // And through KernelSymbols, as the stack views ask.
    const auto stacks = KernelSymbols::for_stacks();
    for (uint64_t ip : ips)
        EXPECT_EQ(stacks.describe(ip), file.describe(ip));
}
