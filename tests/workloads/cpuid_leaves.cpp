// Prints the CPUID leaves from which a Linux guest kernel decides how it flushes remote TLBs
// (arch/x86/kernel/kvm.c, pv_tlb_flush_supported()), for the runtime tests' own reading of
// the expected flush path: leaf 1 and each hypervisor block's base, base+1 and base+2, one
// line each, "LEAF EAX EBX ECX EDX" in hex. The tests decode them in Python, apart from the
// tool's code. x86 only; elsewhere it prints nothing and exits 0.
//
//   cpuid_leaves
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <cstdint>
#include <cstdio>

int main() {
#if defined(__x86_64__) || defined(__i386__)
    auto print = [](uint32_t leaf) {
        unsigned a = 0, b = 0, c = 0, d = 0;
        __cpuid(leaf, a, b, c, d);
        std::printf("%x %x %x %x %x\n", leaf, a, b, c, d);
    };
    print(1);
    // Linux looks for KVM's signature in every block of 0x100 up to 0x40010000.
    for (uint32_t base = 0x40000000; base < 0x40010000; base += 0x100)
        for (uint32_t leaf = base; leaf < base + 3; ++leaf)
            print(leaf);
#endif
    return 0;
}
