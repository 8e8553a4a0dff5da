#include "kernel/hypervisor.h"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <sys/klog.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "base/files.h"
#include "base/machine.h"
#include "kernel/features.h"

namespace memlat {

namespace {

// The leaves a hypervisor answers CPUID at: Linux looks for KVM's signature in every block of
// 0x100 up to 0x40010000 (kvm_cpuid_base()), as a hypervisor that also offers Hyper-V's
// interface puts its own one block up.
constexpr uint32_t hypervisor_leaf = 0x40000000;
constexpr uint32_t hypervisor_leaf_end = 0x40010000;

// KVM's feature leaf (base + 1): EAX features, EDX hints (Documentation/virt/kvm/x86/cpuid.rst).
constexpr uint32_t kvm_feature_steal_time = 1u << 5;
constexpr uint32_t kvm_feature_pv_tlb_flush = 1u << 9;
constexpr uint32_t kvm_hint_realtime = 1u << 0;
// CPUID.1:ECX MONITOR/MWAIT: a KVM guest that may idle in MWAIT keeps native IPIs.
constexpr uint32_t cpuid1_ecx_mwait = 1u << 3;
// Hyper-V's recommendations leaf (0x40000004) EAX: use the remote-flush hypercall.
constexpr uint32_t hyperv_remote_tlb_flush_recommended = 1u << 2;

std::string signature(const CpuidRegisters &r) {
    char text[13] = {};
    std::memcpy(text, &r.ebx, 4);
    std::memcpy(text + 4, &r.ecx, 4);
    std::memcpy(text + 8, &r.edx, 4);
    return std::string(text, strnlen(text, 12));
}

// The kernel's log buffer as dmesg reads it, "" when this process may not read it
// (kernel.dmesg_restrict without CAP_SYSLOG). One read of the whole buffer.
std::string kernel_log() {
    // syslog(2)'s actions: SYSLOG_ACTION_READ_ALL and SYSLOG_ACTION_SIZE_BUFFER (no header
    // of glibc's names them).
    constexpr int read_all = 3, size_buffer = 10;
    const int size = klogctl(size_buffer, nullptr, 0);
    if (size <= 0)
        return "";
    std::string log(static_cast<size_t>(size), '\0');
    const int n = klogctl(read_all, log.data(), size);
    log.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return log;
}

Hypervisor pvm() {
    return {.name = "PVM",
            .remote_flushes = FlushPath::Hypervisor,
            .how = "the hypervisor (PVM) flushes the other vCPUs' TLBs, without shootdown IPIs"};
}

Hypervisor hyperv_hypercall() {
    return {.name = "Hyper-V",
            .remote_flushes = FlushPath::Hypervisor,
            .requests_traced = false,
            .how = "Hyper-V flushes the other vCPUs' TLBs by hypercall, without shootdown IPIs "
                   "(falling back to IPIs when the hypercall fails); tlb:tlb_flush does not "
                   "see these requests"};
}

Hypervisor xen_pv() {
    return {.name = "Xen",
            .remote_flushes = FlushPath::Hypervisor,
            .requests_traced = false,
            .how = "Xen flushes the other vCPUs' TLBs by hypercall (PV guest), without "
                   "shootdown IPIs; tlb:tlb_flush does not see these requests"};
}

Hypervisor kvm_pv_flush() {
    return {.name = "KVM",
            .remote_flushes = FlushPath::Mixed,
            .how = "shootdown IPIs to running vCPUs; KVM flushes a preempted vCPU itself when "
                   "it next runs, without an IPI (paravirtual TLB flush)"};
}

Hypervisor by_ipis(std::string name) {
    return {.name = std::move(name), .remote_flushes = FlushPath::Ipi, .how = "shootdown IPIs"};
}

// A signature Linux decides no remote flush from: its guests flush by IPI, unless a
// paravirtual layer that user space's CPUID does not show sits between (a PVM guest's CPUID
// answers with the hypervisor below PVM: "bhyve bhyve " was seen), so the path is not known.
Hypervisor unknown_layer(std::string signature) {
    while (!signature.empty() && signature.back() == ' ')
        signature.pop_back();
    return {.name = signature,
            .remote_flushes = FlushPath::Unknown,
            .how = fmt::format("not known: CPUID names {}, whose guests flush by IPI unless a "
                               "paravirtual layer below the kernel hides itself from CPUID (as "
                               "PVM does); the kernel's own choice needs CAP_SYSLOG or its boot "
                               "log to read, so the run's requests and IPIs decide",
                               signature)};
}

bool contains(std::string_view text, std::string_view what) {
    return text.find(what) != std::string_view::npos;
}

Hypervisor kvm(const std::function<CpuidRegisters(uint32_t)> &cpuid, uint32_t base,
               int possible_cpus, bool nopv) {
    // arch/x86/kernel/kvm.c, pv_tlb_flush_supported().
    // PVM answers KVM's signature with "PVM" in EBX of base + 2 (to its guests' kernels, which
    // ask by a synthetic CPUID; user space may or may not see it).
    if (cpuid(base + 2).ebx == 0x4d5650)
        return pvm();
    const CpuidRegisters features = cpuid(base + 1);
    const bool pv_flush = !nopv && (features.eax & kvm_feature_pv_tlb_flush) != 0 &&
                          (features.edx & kvm_hint_realtime) == 0 &&
                          (features.eax & kvm_feature_steal_time) != 0 &&
                          (cpuid(1).ecx & cpuid1_ecx_mwait) == 0 && possible_cpus != 1;
    if (!pv_flush)
        return by_ipis("KVM");
    return kvm_pv_flush();
}

} // namespace

std::optional<Hypervisor> hypervisor_from_kernel_log(std::string_view log) {
    constexpr std::string_view detected = "Hypervisor detected: ";
    const size_t at = log.find(detected);
    if (at == std::string_view::npos)
        return std::nullopt;
    const size_t begin = at + detected.size();
    const size_t end = std::min(log.find('\n', begin), log.size());
    std::string name(log.substr(begin, end - begin));
    while (!name.empty() && (name.back() == ' ' || name.back() == '\r'))
        name.pop_back();
    Hypervisor h;
    if (name == "PVM" || contains(log, "running under PVM"))
        h = pvm();
    else if (name == "KVM" && contains(log, "KVM setup pv remote TLB flush"))
        h = kvm_pv_flush();
    else if (contains(name, "Hyper-V") && contains(log, "Using hypercall for remote TLB flush"))
        h = hyperv_hypercall();
    else if (contains(name, "Xen") && contains(log, "Booting paravirtualized kernel on Xen PV"))
        h = xen_pv();
    else
        h = by_ipis(name == "Microsoft Hyper-V" ? "Hyper-V" : name);
    if (h.name == "Microsoft Hyper-V")
        h.name = "Hyper-V";
    h.source = "the kernel log";
    return h;
}

std::string_view path_name(FlushPath path) {
    switch (path) {
    case FlushPath::Ipi:
        return "ipi";
    case FlushPath::Hypervisor:
        return "hypervisor";
    case FlushPath::Mixed:
        return "mixed";
    case FlushPath::Unknown:
        break;
    }
    return "unknown";
}

Hypervisor hypervisor_from_cpuid(const std::function<CpuidRegisters(uint32_t)> &cpuid,
                                 int possible_cpus, std::string_view xen_guest_type, bool nopv) {
    // CPUID.1:ECX bit 31: running under a hypervisor.
    if ((cpuid(1).ecx & (1u << 31)) == 0)
        return by_ipis("");
    for (uint32_t base = hypervisor_leaf; base < hypervisor_leaf_end; base += 0x100) {
        const CpuidRegisters leaf = cpuid(base);
        const std::string sig = signature(leaf);
        if (sig == "KVMKVMKVM")
            return kvm(cpuid, base, possible_cpus, nopv);
        if (base != hypervisor_leaf)
            continue;
        if (sig == "PVM")
            return pvm();
        if (sig == "Microsoft Hv") {
            const bool hypercall =
                leaf.eax >= 0x40000004 &&
                (cpuid(0x40000004).eax & hyperv_remote_tlb_flush_recommended) != 0;
            return hypercall ? hyperv_hypercall() : by_ipis("Hyper-V");
        }
        if (sig == "XenVMMXenVMM") {
            return xen_guest_type == "PV" ? xen_pv() : by_ipis("Xen");
        }
        if (!sig.empty())
            return unknown_layer(sig);
    }
    return unknown_layer("unknown");
}

std::optional<Hypervisor> hypervisor_from_flush_function(std::string_view function,
                                                         const Hypervisor &at_boot) {
    Hypervisor h;
    if (function == "native_flush_tlb_multi")
        h = by_ipis(at_boot.name);
    else if (function == "kvm_flush_tlb_multi")
        h = kvm_pv_flush();
    else if (function == "pvm_flush_tlb_multi")
        h = pvm();
    else if (function == "hyperv_flush_tlb_multi")
        h = hyperv_hypercall();
    else if (function == "xen_flush_tlb_multi")
        h = xen_pv();
    else
        return std::nullopt;
    h.source = fmt::format("the kernel's remote TLB flush (flush_tlb_multi calls {})", function);
    return h;
}

const Hypervisor &hypervisor_at_boot() {
    static const Hypervisor h = [] {
        if (!feature_forced_off("kernel_log"))
            if (auto from_log = hypervisor_from_kernel_log(kernel_log()))
                return *from_log;
#if defined(__x86_64__) || defined(__i386__)
        auto cpuid = [](uint32_t leaf) {
            CpuidRegisters r;
            __cpuid(leaf, r.eax, r.ebx, r.ecx, r.edx);
            return r;
        };
        int cpus = 0;
        try {
            cpus = possible_cpus();
        } catch (...) {
            cpus = 0; // unknown: not 1, so a KVM guest's PV flush is taken as installed
        }
        std::string guest_type = read_text_file("/sys/hypervisor/guest_type").value_or("");
        while (!guest_type.empty() && (guest_type.back() == '\n' || guest_type.back() == ' '))
            guest_type.pop_back();
        // "nopv" as a word of its own ("nopvspin" is another parameter).
        bool nopv = false;
        const std::string cmdline = read_text_file("/proc/cmdline").value_or("");
        for (size_t at = 0; at < cmdline.size();) {
            const size_t end = std::min(cmdline.find_first_of(" \n", at), cmdline.size());
            nopv = nopv || cmdline.compare(at, end - at, "nopv") == 0;
            at = end + 1;
        }
        Hypervisor h = hypervisor_from_cpuid(cpuid, cpus, guest_type, nopv);
        h.source = "CPUID";
        return h;
#else
        return Hypervisor{.name = "", .remote_flushes = FlushPath::Unknown, .how = ""};
#endif
    }();
    return h;
}

} // namespace memlat
