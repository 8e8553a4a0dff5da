// Kernel functions' addresses and sizes by name, looked up inside the kernel by a BPF program
// run once (lib/loading/kernel_functions.bpf.c, Linux 5.16+): about a millisecond, where reading
// /proc/kallsyms for the same few names costs the kernel tens of milliseconds of formatting
// its 120k lines. KernelSymbols::load_only() (symbols.h) asks here first.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct kernel_functions_bpf; // the lookup program's skeleton (kernel_functions.skel.h)
struct bpf_object;

namespace memlat {

struct KernelFunction {
    std::string name;
    uint64_t address = 0;           // 0: no such function
    uint64_t size = 0;              // to the next symbol, as kallsyms counts it; 0 when unknown
    std::array<uint8_t, 32> code{}; // its first bytes; zeros when the kernel would not read them
};

// One entry per name, in order. nullopt when the kernel cannot answer this way (before 5.16,
// no BPF_PROG_RUN of syscall programs, addresses hidden from this user by kptr_restrict, a
// name too long): the caller reads /proc/kallsyms instead.
std::optional<std::vector<KernelFunction>>
find_kernel_functions(const std::vector<std::string> &names);

// The kernel's own description of addresses ("%pS" without the size: "name+0xoff", with
// " [module]" for a module's), as KernelSymbols::describe() gives from /proc/kallsyms, which
// the stack views then need not read (26 MB and 70 ms on 6.18). It holds the lookup program
// loaded while it lives.
class KernelDescriber {
  public:
    // nullptr where the kernel cannot (as find_kernel_functions()).
    static std::shared_ptr<KernelDescriber> load();
    // One text per address; nullopt when the kernel did not answer.
    std::optional<std::vector<std::string>> describe(std::span<const uint64_t> ips) const;
    // The lookup program's object (its maps' memory is its holder's).
    const bpf_object *object() const;

  private:
    std::shared_ptr<kernel_functions_bpf> program_;
};
// "name+0xoff/0xsize [module]" without "/0xsize".
std::string without_size(std::string_view described);

// The size in "name+0xoff/0xsize", the kernel's "%pS" of a function's address: nullopt when
// the text is not that of `name` at offset 0.
std::optional<uint64_t> size_from_described(std::string_view described, std::string_view name);

} // namespace memlat
