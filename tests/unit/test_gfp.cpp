#include <gtest/gtest.h>
#include <unistd.h>

#include "kernel/gfp.h"

using memlat::GfpNames;

namespace {

// The bit layout of Linux 6.18 (enum ___GFP_*_BIT), as a kernel would report it: the built-in
// one but for bit 9, no longer __GFP_ATOMIC, and __GFP_NO_OBJ_EXT after __GFP_ZEROTAGS. The
// tests name their bits by number and their flags by the kernel's names, so they still check
// decode() on their own: a wrong built-in table fails them too.
GfpNames layout_618() {
    std::map<int, std::string> bits = GfpNames::builtin().bits();
    bits[9] = "__GFP_UNUSED";
    bits[24] = "__GFP_NO_OBJ_EXT";
    return GfpNames(bits, "test");
}

constexpr uint64_t bit(int n) {
    return uint64_t{1} << n;
}

} // namespace

TEST(Gfp, ZeroIsNone) {
    EXPECT_EQ(layout_618().decode(0), "none");
}

TEST(Gfp, CompositesComeFirstLargestFirst) {
    auto gfp = layout_618();
    const uint64_t reclaim = bit(10) | bit(11), io = bit(6), fs = bit(7);
    EXPECT_EQ(gfp.decode(reclaim | io | fs), "GFP_KERNEL");
    EXPECT_EQ(gfp.decode(reclaim | io | fs | bit(22)), "GFP_KERNEL_ACCOUNT");
    EXPECT_EQ(gfp.decode(reclaim | io | fs | bit(8)), "GFP_KERNEL|__GFP_ZERO");
    EXPECT_EQ(gfp.decode(reclaim | io | fs | bit(20) | bit(1) | bit(3)), "GFP_HIGHUSER_MOVABLE");
    EXPECT_EQ(gfp.decode(reclaim | io), "GFP_NOFS");
    EXPECT_EQ(gfp.decode(reclaim), "GFP_NOIO");
    EXPECT_EQ(gfp.decode(bit(5) | bit(11)), "GFP_ATOMIC");
}

TEST(Gfp, MatchesWhatThisKernelPrintedForAMemcgReclaim) {
    // gfp_flags=0x112c4a of a page-cache read in a memory cgroup, as drsnoop saw it on 6.18.
    EXPECT_EQ(layout_618().decode(0x112c4a),
              "GFP_NOFS|__GFP_HIGHMEM|__GFP_MOVABLE|__GFP_NOWARN|__GFP_NORETRY|__GFP_HARDWALL");
}

TEST(Gfp, UnknownBitsStayVisible) {
    EXPECT_EQ(layout_618().decode(bit(8) | bit(40)), "__GFP_ZERO|0x10000000000");
}

TEST(Gfp, BuiltinLayoutHasTheOldAtomicBit) {
    // Before 6.9 bit 9 was __GFP_ATOMIC, and GFP_ATOMIC included it.
    auto gfp = GfpNames::builtin();
    EXPECT_EQ(gfp.decode(bit(5) | bit(9) | bit(11)), "GFP_ATOMIC");
    EXPECT_EQ(gfp.decode(bit(23)), "__GFP_ZEROTAGS");
}

TEST(Gfp, FromTheRunningKernel) {
    if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
        GTEST_SKIP() << "no /sys/kernel/btf/vmlinux";
    auto gfp = GfpNames::from_kernel();
    // Every kernel since 2.6 has these, whichever way its bits are numbered.
    EXPECT_NE(gfp.decode(0), "");
    EXPECT_NE(gfp.source(), "");
    const std::string kernel = gfp.decode(bit(10) | bit(11) | bit(6) | bit(7));
    EXPECT_EQ(kernel, "GFP_KERNEL") << "from " << gfp.source();
}
