#include "errors.h"
#include "symbols.h"

#include <cstdint>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <unistd.h>

namespace memlat_test {

// Referenced from the tests through its address, so it must exist as a real function with
// a C++ (mangled) name in the symbol table.
[[gnu::noinline]] int symbolized_target(int x) {
    asm volatile("" : "+r"(x));
    return x * 3 + 1;
}

} // namespace memlat_test

namespace memlat {
namespace {

uint64_t target_address() {
    return reinterpret_cast<uint64_t>(&memlat_test::symbolized_target);
}

std::string hex(uint64_t value) {
    std::ostringstream out;
    out << "0x" << std::hex << value;
    return out.str();
}

const std::string kLongName = "_RNvMs_NtCs" + std::string(300, 'x') + "_rust_symbol";

KernelSymbols sample_kallsyms() {
    const std::string in("ffffffff81000000 T _text\n"
                         "ffffffff813444a0 t flush_tlb_func\n"
                         "ffffffff81344600 T native_flush_tlb_multi\n"
                         "ffffffff82000000 D init_mm\n"
                         "ffffffff81500000 d shared_name\n"
                         "ffffffff81600000 W shared_name\n"
                         "ffffffff81700000 t " +
                         kLongName +
                         "\n"
                         "ffffffffc0123000 t foo\t[kvm]\n"
                         "not a symbol line\n");
    return KernelSymbols::parse(in);
}

TEST(KernelSymbols, ParsesLinesOfAnyLength) {
    const auto ks = sample_kallsyms();
    EXPECT_EQ(ks.size(), 8u);
    EXPECT_FALSE(ks.addresses_hidden());
    const auto *sym = ks.find(0xffffffff81700010);
    ASSERT_NE(sym, nullptr);
    EXPECT_EQ(sym->name, kLongName);
    EXPECT_EQ(sym->module, "");
}

TEST(KernelSymbols, FindsModuleSymbols) {
    const auto ks = sample_kallsyms();
    const auto *sym = ks.find(0xffffffffc0123042);
    ASSERT_NE(sym, nullptr);
    EXPECT_EQ(sym->name, "foo");
    EXPECT_EQ(sym->module, "kvm");
    EXPECT_EQ(ks.describe(0xffffffffc0123042), "foo+0x42 [kvm]");
}

TEST(KernelSymbols, FindAndDescribe) {
    const auto ks = sample_kallsyms();
    EXPECT_EQ(ks.find(0xffffffff813444a0)->name, "flush_tlb_func");
    EXPECT_EQ(ks.find(0xffffffff813445ff)->name, "flush_tlb_func");
    EXPECT_EQ(ks.find(0xffffffff81344600)->name, "native_flush_tlb_multi");
    EXPECT_EQ(ks.find(0x1000), nullptr);
    EXPECT_EQ(ks.describe(0xffffffff813444b3), "flush_tlb_func+0x13");
    EXPECT_EQ(ks.describe(0xffffffff81344600), "native_flush_tlb_multi+0x0");
    EXPECT_EQ(ks.describe(0x1000), "0x1000");
}

TEST(KernelSymbols, AddressOfPrefersText) {
    const auto ks = sample_kallsyms();
    EXPECT_EQ(ks.address_of("flush_tlb_func"), 0xffffffff813444a0u);
    EXPECT_EQ(ks.address_of("shared_name"), 0xffffffff81600000u);
    EXPECT_EQ(ks.address_of("init_mm"), 0xffffffff82000000u);
    EXPECT_EQ(ks.address_of("foo"), 0xffffffffc0123000u);
    EXPECT_EQ(ks.address_of("flush_tlb"), std::nullopt);
}

TEST(KernelSymbols, TextRangeEndsAtTheNextAddress) {
    const auto ks = sample_kallsyms();
    const auto range = ks.text_range("flush_tlb_func");
    ASSERT_TRUE(range.has_value());
    EXPECT_EQ(range->start, 0xffffffff813444a0u);
    EXPECT_EQ(range->end, 0xffffffff81344600u);
    EXPECT_EQ(ks.text_range("init_mm"), std::nullopt); // data, not text
    EXPECT_EQ(ks.text_range("foo"), std::nullopt);     // a module's
    EXPECT_EQ(ks.text_range("flush_tlb"), std::nullopt);
}

TEST(KernelSymbols, HiddenAddresses) {
    const std::string in("0000000000000000 T _text\n"
                         "0000000000000000 t flush_tlb_func\n"
                         "0000000000000000 t foo\t[kvm]\n");
    const auto ks = KernelSymbols::parse(in);
    EXPECT_EQ(ks.size(), 3u);
    EXPECT_TRUE(ks.addresses_hidden());
    EXPECT_EQ(ks.find(0x10), nullptr);
    EXPECT_EQ(ks.describe(0x10), "0x10");
    EXPECT_EQ(ks.text_range("flush_tlb_func"), std::nullopt);

    const std::string empty;
    EXPECT_FALSE(KernelSymbols::parse(empty).addresses_hidden());
}

TEST(KernelSymbols, LoadMissingFileThrows) {
    EXPECT_THROW(KernelSymbols::load("/nonexistent/kallsyms"), RuntimeError);
}

TEST(Demangle, CxxAndPlainNames) {
    EXPECT_EQ(demangle("_ZN6memlat3fooEv"), "memlat::foo()");
    EXPECT_EQ(demangle("main"), "main");
    EXPECT_EQ(demangle("_Znot_valid"), "_Znot_valid");
    EXPECT_EQ(demangle(""), "");
}

// The offset in the executable file at which the given address of ours is mapped.
std::optional<uint64_t> own_file_offset(uint64_t address) {
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) {
        std::istringstream fields(line);
        uint64_t start = 0, end = 0, offset = 0;
        char dash = 0;
        std::string perms;
        fields >> std::hex >> start >> dash >> end >> perms >> offset;
        if (address >= start && address < end)
            return address - start + offset;
    }
    return std::nullopt;
}

TEST(ElfSymbols, FindsOwnFunction) {
    const auto elf = ElfSymbols::load("/proc/self/exe");
    const auto offset = own_file_offset(target_address());
    ASSERT_TRUE(offset);
    const auto vaddr = elf.file_offset_to_vaddr(*offset);
    ASSERT_TRUE(vaddr);
    const auto *sym = elf.find(*vaddr);
    ASSERT_NE(sym, nullptr);
    EXPECT_EQ(sym->name, "memlat_test::symbolized_target(int)");
    EXPECT_EQ(sym->address, *vaddr);
    EXPECT_GT(sym->size, 0u);
    // Past its end the function no longer claims the address (padding or the next symbol).
    const auto *after = elf.find(*vaddr + sym->size);
    EXPECT_TRUE(!after || after->address == *vaddr + sym->size);
}

TEST(ElfSymbols, OffsetToVaddrOutsideSegments) {
    const auto elf = ElfSymbols::load("/proc/self/exe");
    EXPECT_EQ(elf.file_offset_to_vaddr(UINT64_MAX - 1), std::nullopt);
}

TEST(ElfSymbols, RejectsMissingAndNonElfFiles) {
    EXPECT_THROW(ElfSymbols::load("/nonexistent/binary"), RuntimeError);
    EXPECT_THROW(ElfSymbols::load("/proc/self/maps"), RuntimeError);
}

TEST(ProcessSymbols, DescribesOwnFunctionWithOffset) {
    ProcessSymbols self(getpid());
    const auto described = self.describe(target_address() + 1);
    EXPECT_EQ(described.rfind("memlat_test::symbolized_target(int)+0x1 [", 0), 0u) << described;
    // Asking again goes through the per-file cache.
    EXPECT_EQ(self.describe(target_address() + 1), described);
}

TEST(ProcessSymbols, UnmappedAndVanishedProcesses) {
    ProcessSymbols self(getpid());
    EXPECT_EQ(self.describe(0x10), "0x10");
    // PIDs never reach this value (pid_max is at most 2^22).
    ProcessSymbols gone(0x7ffffff0);
    EXPECT_EQ(gone.describe(target_address()), hex(target_address()));
}

} // namespace
} // namespace memlat
