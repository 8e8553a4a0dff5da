// The hypervisor this machine runs under, if any, and how its kernel reaches other CPUs when it
// flushes their TLBs: shootdown IPIs, or a hypervisor that flushes a vCPU's TLB itself, without
// an interrupt in the guest. A guest kernel installs a paravirtual flush (pv_ops.mmu.
// flush_tlb_multi) at boot from what the hypervisor advertises in the CPUID leaves at
// 0x40000000 and up, which any user can read, so the same reading tells a tool which path
// to expect. x86 only: elsewhere (arm64's broadcast TLBI) no CPU is interrupted either way.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace memlat {

// How remote TLB flushes reach the CPUs they name.
enum class FlushPath {
    Unknown,
    Ipi,        // shootdown IPIs (bare metal, or a hypervisor without a paravirtual flush)
    Hypervisor, // the hypervisor flushes every named vCPU (PVM, Hyper-V, Xen PV)
    Mixed,      // IPIs to running vCPUs, the hypervisor for preempted ones (KVM's PV flush)
};
// "ipi", "hypervisor", "mixed", "unknown": the JSON's and the metric label's words.
std::string_view path_name(FlushPath path);

struct Hypervisor {
    std::string name;                          // as Linux names it ("KVM", "PVM"); "" on bare metal
    FlushPath remote_flushes = FlushPath::Ipi; // what this guest's kernel does
    // Whether tlb:tlb_flush(remote_send_ipi) sees the requests: the paravirtual flushes of
    // KVM and PVM end in native_flush_tlb_multi(), which traces them; Hyper-V's and Xen's
    // hypercalls do not.
    bool requests_traced = true;
    std::string how;    // a phrase for the output: "shootdown IPIs", "the hypervisor (PVM) ..."
    std::string source; // where this was read: "the kernel log", "CPUID"
};

// One CPUID leaf's registers.
struct CpuidRegisters {
    uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

// What the kernel said at boot of the hypervisor it found and the flush it installed
// ("Hypervisor detected: KVM", "KVM setup pv remote TLB flush", "pvm-pv: running under PVM",
// "Hyper-V: Using hypercall for remote TLB flush", "Booting paravirtualized kernel on Xen PV"):
// the kernel's own choice, which CPUID alone cannot always tell (a PVM guest's user space
// executes CPUID against the hypervisor below it). Empty when `log` has no "Hypervisor
// detected" line (bare metal, or a log that no longer holds the boot).
std::optional<Hypervisor> hypervisor_from_kernel_log(std::string_view log);

// What the kernel reading these leaves installs (Linux's detect_hypervisor() and each guest's
// init code): `cpuid(leaf)` executes CPUID, `possible_cpus` and `xen_guest_type`
// (/sys/hypervisor/guest_type: "PV", "HVM", "PVH") are the machine's, `nopv` whether the
// kernel was booted with nopv. Apart from this_hypervisor() for the unit tests, as is the log's.
Hypervisor hypervisor_from_cpuid(const std::function<CpuidRegisters(uint32_t)> &cpuid,
                                 int possible_cpus, std::string_view xen_guest_type, bool nopv);

// What the kernel installed as its remote TLB flush (pv_ops.mmu.flush_tlb_multi), named by
// the function a flush calls: "native_flush_tlb_multi" (shootdown IPIs), "kvm_flush_tlb_multi",
// "pvm_flush_tlb_multi", "hyperv_flush_tlb_multi", "xen_flush_tlb_multi". `at_boot` (the log's
// or CPUID's reading) lends its name to a native flush under a hypervisor. nullopt for a name
// not known here. The kernel's own choice, readable as long as the kernel runs: a reading that
// neither a rotated log nor CPUID answered by an outer hypervisor can make wrong
// (loading/flush_path.h reads it).
std::optional<Hypervisor> hypervisor_from_flush_function(std::string_view function,
                                                         const Hypervisor &at_boot);

// This machine's as its boot said it, read once: from the kernel log where it is readable
// (CAP_SYSLOG, or kernel.dmesg_restrict=0) and still holds the boot, else from CPUID. A PVM
// guest's user space reads CPUID of the hypervisor below PVM ("bhyve bhyve " was seen), so
// after the log rotated this is wrong there: loading/flush_path.h's this_hypervisor() asks the
// kernel's installed flush first.
const Hypervisor &hypervisor_at_boot();

} // namespace memlat
