#include "base/errors.h"
#include "loading/symbols.h"

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
    EXPECT_THROW(KernelSymbols::load_only({"x"}, "/nonexistent/kallsyms"), RuntimeError);
}

TEST(KernelSymbols, LoadOnlyKeepsTheNamedSymbols) {
    const std::string path = testing::TempDir() + "kallsyms_" + std::to_string(getpid());
    std::ofstream(path) << "ffffffff81000000 T _text\n"
                           "ffffffff81344490 d flush_tlb_func\n"
                           "ffffffff813444a0 t flush_tlb_func\n"
                           "ffffffff813444a0 t flush_tlb_func_alias\n"
                           "ffffffff813446c0 t next_function\n"
                           "ffffffff813446d0 t after_next\n"
                           "ffffffffc0123000 t foo\t[kvm]\n";
    const auto ks = KernelSymbols::load_only({"flush_tlb_func", "absent"}, path);
    // The named ones and, for where the last ends, the next symbol at a higher address.
    EXPECT_EQ(ks.size(), 3u);
    const auto range = ks.text_range("flush_tlb_func");
    ASSERT_TRUE(range);
    EXPECT_EQ(range->start, 0xffffffff813444a0u);
    EXPECT_EQ(range->end, 0xffffffff813446c0u);
    EXPECT_FALSE(ks.addresses_hidden());
    EXPECT_EQ(ks.address_of("flush_tlb_func"), 0xffffffff813444a0u); // text first
    EXPECT_EQ(ks.address_of("_text"), std::nullopt);
    EXPECT_EQ(ks.address_of("absent"), std::nullopt);

    std::ofstream(path) << "0000000000000000 T _text\n0000000000000000 t flush_tlb_func\n";
    EXPECT_TRUE(KernelSymbols::load_only({"flush_tlb_func"}, path).addresses_hidden());
    unlink(path.c_str());
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

// A culprit stack tlbflush took from tp_btf on Linux 6.18 (x86): the JIT-compiled program,
// past the last kallsyms symbol, is described as that symbol plus an offset no function has.
TEST(KernelStack, TracingMachineryIsNotPartOfTheStack) {
    for (std::string_view frame :
         {"__stop_runtime_ptr_USER_PTR_MAX+0x3c4ff5d3", "bpf_trace_run2+0xf2",
          "__bpf_trace_tlb_flush+0x12", "__traceiter_tlb_flush+0x31", "0xffffffffc0a01234",
          "trace_call_bpf+0x6a", "perf_trace_run_bpf_submit+0x4d", "perf_trace_tlb_flush+0xd8",
          "trace_mm_compaction_begin+0x40"})
        EXPECT_TRUE(is_tracing_frame(frame)) << frame;
    for (std::string_view frame : {"native_flush_tlb_multi+0xa6", "flush_tlb_mm_range+0x1c3",
                                   "compact_zone+0x3b2", "smp_call_function_many_cond+0x320",
                                   "xfs_file_read_iter+0x8c [xfs]", "do_syscall_64+0x71"})
        EXPECT_FALSE(is_tracing_frame(frame)) << frame;
}

TEST(KernelStack, FramesStartAtTheTracepointsCaller) {
    std::ostringstream kallsyms;
    kallsyms << "ffffffff81000000 T native_flush_tlb_multi\n"
             << "ffffffff81001000 T flush_tlb_mm_range\n"
             << "ffffffff81002000 T bpf_trace_run2\n"
             << "ffffffff81003000 T __traceiter_tlb_flush\n"
             << "ffffffff81004000 D __stop_runtime_ptr_USER_PTR_MAX\n";
    const auto ksyms = KernelSymbols::parse(kallsyms.str());
    const uint64_t ips[] = {
        0xffffffffc0a01234, // the BPF program, past every symbol
        0xffffffff810020f2, 0xffffffff81003031, 0xffffffff810000a6, 0xffffffff810011c3, 0,
        0xffffffff81002000}; // after the end: not a frame
    EXPECT_EQ((std::vector<std::string>{"native_flush_tlb_multi+0xa6", "flush_tlb_mm_range+0x1c3"}),
              kernel_stack_frames(ips, &ksyms));
    // A stack from a classic tracepoint starts at the caller: nothing is dropped, and a
    // machinery-like name further down stays.
    const uint64_t classic[] = {0xffffffff810000a6, 0xffffffff810020f2, 0};
    EXPECT_EQ((std::vector<std::string>{"native_flush_tlb_multi+0xa6", "bpf_trace_run2+0xf2"}),
              kernel_stack_frames(classic, &ksyms));
}

} // namespace
} // namespace memlat
