// How this machine's kernel reaches the other CPUs when it flushes their TLBs, from what the
// running kernel installed: the function its remote flush (flush_tlb_multi) calls, found by
// the kernel-function lookup program (kernel_functions.h). Unlike the boot's log lines, this
// lasts as long as the kernel runs; unlike CPUID, it is the guest kernel's own choice.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernel/hypervisor.h"

namespace memlat {

// The targets of the x86 near calls and jumps with a 32-bit displacement (E8, E9) that may
// start at any byte of `code`, the first bytes of a function at `address`: candidates only,
// as a byte inside another instruction can read as one. The caller keeps a candidate only if
// the kernel names it the start of a function.
std::vector<uint64_t> rel32_targets(std::span<const uint8_t> code, uint64_t address);

// The name of the function flush_tlb_multi() calls on this kernel ("native_flush_tlb_multi",
// "kvm_flush_tlb_multi", "pvm_flush_tlb_multi", ...): a paravirtual call site is patched at
// boot into a direct call to what pv_ops.mmu.flush_tlb_multi holds. nullopt off x86, before
// Linux 5.16 (no lookup program), where this user may not read kernel addresses, or where no
// such call was found (a kernel without CONFIG_PARAVIRT flushes natively in place).
std::optional<std::string> installed_remote_flush();

// This machine's, read once: the installed remote flush where the kernel tells it, else what
// the boot said (hypervisor_at_boot(): the kernel log, else CPUID).
const Hypervisor &this_hypervisor();

} // namespace memlat
