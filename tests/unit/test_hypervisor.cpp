// How the kernel delivers remote TLB flushes on this machine: read from the remote flush it
// installed (loading/flush_path.h), its boot log, or CPUID's hypervisor leaves.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "kernel/hypervisor.h"
#include "loading/flush_path.h"

using namespace memlat;

namespace {

// A CPUID with a hypervisor's signature at 0x40000000 and the given leaves.
struct FakeCpuid {
    std::map<uint32_t, CpuidRegisters> leaves;

    FakeCpuid(const char signature[13], uint32_t max_leaf) {
        CpuidRegisters base{.eax = max_leaf};
        std::memcpy(&base.ebx, signature, 4);
        std::memcpy(&base.ecx, signature + 4, 4);
        std::memcpy(&base.edx, signature + 8, 4);
        leaves[0x40000000] = base;
        leaves[1] = {.ecx = 1u << 31}; // a hypervisor is present, no MWAIT
    }
    CpuidRegisters operator()(uint32_t leaf) const {
        auto it = leaves.find(leaf);
        return it == leaves.end() ? CpuidRegisters{} : it->second;
    }
};

// KVM's features: steal time (bit 5) and PV TLB flush (bit 9), no hint.
FakeCpuid kvm_with_pv_flush() {
    FakeCpuid c("KVMKVMKVM\0\0\0", 0x40000001);
    c.leaves[0x40000001] = {.eax = (1u << 5) | (1u << 9)};
    return c;
}

} // namespace

TEST(HypervisorLog, TheKernelsOwnWordsDecide) {
    // This project's test beds, as their dmesg reads.
    const auto kvm = hypervisor_from_kernel_log("[    0.000000] Hypervisor detected: KVM\n"
                                                "[    0.083841] kvm-guest: KVM setup pv remote "
                                                "TLB flush\n[    0.227829] pvm-pv: not "
                                                "detected, 0/49 sites patched\n");
    ASSERT_TRUE(kvm);
    EXPECT_EQ("KVM", kvm->name);
    EXPECT_EQ(FlushPath::Mixed, kvm->remote_flushes);
    EXPECT_EQ("the kernel log", kvm->source);
    const auto pvm = hypervisor_from_kernel_log("[    0.000000] Hypervisor detected: PVM\n"
                                                "[    0.2] pvm-pv: running under PVM (pv-lite)\n");
    ASSERT_TRUE(pvm);
    EXPECT_EQ("PVM", pvm->name);
    EXPECT_EQ(FlushPath::Hypervisor, pvm->remote_flushes);
    EXPECT_TRUE(pvm->requests_traced);
    // KVM without its PV flush (an MWAIT guest, a realtime hint): IPIs.
    const auto plain = hypervisor_from_kernel_log("Hypervisor detected: KVM\n");
    ASSERT_TRUE(plain);
    EXPECT_EQ(FlushPath::Ipi, plain->remote_flushes);
    const auto hyperv = hypervisor_from_kernel_log(
        "Hypervisor detected: Microsoft Hyper-V\nHyper-V: Using hypercall for remote TLB flush\n");
    ASSERT_TRUE(hyperv);
    EXPECT_EQ("Hyper-V", hyperv->name);
    EXPECT_EQ(FlushPath::Hypervisor, hyperv->remote_flushes);
    EXPECT_FALSE(hyperv->requests_traced);
    // Bare metal, or a log that no longer holds the boot: CPUID decides.
    EXPECT_FALSE(hypervisor_from_kernel_log("Linux version 6.18\n"));
}

TEST(HypervisorCpuid, KvmsPvFlushAsTheKernelInstallsIt) {
    const auto c = kvm_with_pv_flush();
    EXPECT_EQ(FlushPath::Mixed, hypervisor_from_cpuid(c, 2, "", false).remote_flushes);
    // pv_tlb_flush_supported(): not with one CPU, nopv, a realtime hint, MWAIT, or without
    // steal time.
    EXPECT_EQ(FlushPath::Ipi, hypervisor_from_cpuid(c, 1, "", false).remote_flushes);
    EXPECT_EQ(FlushPath::Ipi, hypervisor_from_cpuid(c, 2, "", true).remote_flushes);
    auto hint = c;
    hint.leaves[0x40000001].edx = 1;
    EXPECT_EQ(FlushPath::Ipi, hypervisor_from_cpuid(hint, 2, "", false).remote_flushes);
    auto mwait = c;
    mwait.leaves[1].ecx |= 1u << 3;
    EXPECT_EQ(FlushPath::Ipi, hypervisor_from_cpuid(mwait, 2, "", false).remote_flushes);
    auto no_steal = c;
    no_steal.leaves[0x40000001].eax = 1u << 9;
    EXPECT_EQ(FlushPath::Ipi, hypervisor_from_cpuid(no_steal, 2, "", false).remote_flushes);
    EXPECT_EQ("KVM", hypervisor_from_cpuid(c, 2, "", false).name);
}

TEST(HypervisorCpuid, PvmHyperVXenAndBareMetal) {
    auto pvm = kvm_with_pv_flush();
    pvm.leaves[0x40000002] = {.ebx = 0x4d5650}; // "PVM"
    EXPECT_EQ("PVM", hypervisor_from_cpuid(pvm, 2, "", false).name);
    EXPECT_EQ(FlushPath::Hypervisor, hypervisor_from_cpuid(pvm, 2, "", false).remote_flushes);
    FakeCpuid hv("Microsoft Hv", 0x40000005);
    EXPECT_EQ(FlushPath::Ipi, hypervisor_from_cpuid(hv, 2, "", false).remote_flushes);
    hv.leaves[0x40000004] = {.eax = 1u << 2};
    EXPECT_EQ(FlushPath::Hypervisor, hypervisor_from_cpuid(hv, 2, "", false).remote_flushes);
    FakeCpuid xen("XenVMMXenVMM", 0x40000002);
    EXPECT_EQ(FlushPath::Ipi, hypervisor_from_cpuid(xen, 2, "HVM", false).remote_flushes);
    EXPECT_EQ(FlushPath::Hypervisor, hypervisor_from_cpuid(xen, 2, "PV", false).remote_flushes);
    FakeCpuid metal("\0\0\0\0\0\0\0\0\0\0\0\0", 0);
    metal.leaves[1] = {};
    EXPECT_EQ("", hypervisor_from_cpuid(metal, 2, "", false).name);
    EXPECT_EQ(FlushPath::Ipi, hypervisor_from_cpuid(metal, 2, "", false).remote_flushes);
}

TEST(HypervisorFlushFunction, TheInstalledFlushDecides) {
    // A PVM guest whose log rotated: CPUID answered by the hypervisor below PVM.
    Hypervisor cpuid_said{.name = "bhyve bhyve", .remote_flushes = FlushPath::Ipi};
    const auto pvm = hypervisor_from_flush_function("pvm_flush_tlb_multi", cpuid_said);
    ASSERT_TRUE(pvm.has_value());
    EXPECT_EQ("PVM", pvm->name);
    EXPECT_EQ(FlushPath::Hypervisor, pvm->remote_flushes);
    EXPECT_NE(std::string::npos, pvm->source.find("pvm_flush_tlb_multi"));
    const auto kvm = hypervisor_from_flush_function("kvm_flush_tlb_multi", cpuid_said);
    EXPECT_EQ(FlushPath::Mixed, kvm->remote_flushes);
    EXPECT_EQ("KVM", kvm->name);
    // A native flush under a hypervisor keeps the boot's name, and says IPIs.
    const auto native = hypervisor_from_flush_function(
        "native_flush_tlb_multi", Hypervisor{.name = "KVM", .remote_flushes = FlushPath::Mixed});
    EXPECT_EQ(FlushPath::Ipi, native->remote_flushes);
    EXPECT_EQ("KVM", native->name);
    EXPECT_FALSE(hypervisor_from_flush_function("hyperv_flush_tlb_multi", {})->requests_traced);
    EXPECT_EQ(FlushPath::Hypervisor,
              hypervisor_from_flush_function("xen_flush_tlb_multi", {})->remote_flushes);
    EXPECT_FALSE(hypervisor_from_flush_function("some_other_flush_tlb_multi", {}).has_value());
}

TEST(HypervisorFlushFunction, Rel32Targets) {
    // endbr64; call +0x10; a byte E9 inside nothing useful at the end (cut short: no target).
    const uint8_t code[] = {0xf3, 0x0f, 0x1e, 0xfa, 0xe8, 0x10, 0x00, 0x00, 0x00, 0xc3, 0xe9, 0x01};
    const auto targets = rel32_targets(code, 0xffffffff81000000);
    ASSERT_EQ(1u, targets.size());
    EXPECT_EQ(0xffffffff81000000 + 9 + 0x10, targets[0]);
    // A backwards jump (negative displacement).
    const uint8_t jump[] = {0xe9, 0xfb, 0xff, 0xff, 0xff};
    EXPECT_EQ(std::vector<uint64_t>{0xffffffff81000000}, rel32_targets(jump, 0xffffffff81000000));
}

TEST(HypervisorCpuid, AnotherSignatureLeavesThePathUnknown) {
    // A PVM guest's user space reads the hypervisor below PVM: CPUID cannot tell.
    FakeCpuid bhyve("bhyve bhyve ", 0x40000000);
    const auto h = hypervisor_from_cpuid(bhyve, 2, "", false);
    EXPECT_EQ("bhyve bhyve", h.name);
    EXPECT_EQ(FlushPath::Unknown, h.remote_flushes);
    EXPECT_NE(std::string::npos, h.how.find("not known"));
}
