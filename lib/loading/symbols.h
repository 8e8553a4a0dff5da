// Symbolization for the stack views: kernel addresses through /proc/kallsyms and user
// addresses through the ELF symbol tables of the files a process maps (libelf), with C++
// names demangled.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

#include "loading/kernel_functions.h"

namespace memlat {

inline constexpr std::string_view default_kallsyms = "/proc/kallsyms";

class KernelSymbols {
  public:
    struct Symbol {
        uint64_t address;
        std::string name;
        std::string module; // "" for the core kernel, else the name inside [brackets]
        char type = 0;      // the nm-style type letter: t/T/w/W are text
    };

    // Reads /proc/kallsyms (or another file in its format). Lines of any length are accepted:
    // 6.18 kernels carry Rust symbols longer than 255 characters. Throws RuntimeError when
    // the file cannot be read.
    static KernelSymbols load(const std::string &path = std::string(default_kallsyms));
    static KernelSymbols parse(std::string_view text);
    // Like load(), keeping only the symbols with these names and where each ends (for
    // text_range()): for a tool that needs a few addresses and no symbolization. From the
    // default path, the kernel looks them up itself where it can (kernel_functions.h, 5.16+:
    // about a millisecond); else the file is read a line at a time, keeping the named symbols
    // and the one after each. The whole table is 120k symbols (5 MB of text) on 6.18: it took
    // 18 MB of a tool's memory, and the kernel 20-40 ms to format.
    static KernelSymbols load_only(const std::vector<std::string> &names,
                                   const std::string &path = std::string(default_kallsyms));

    // For the stack views: the functions of load_only() with every other address described by
    // the kernel as it is asked (kernel_functions.h, 5.16+; describe() only, find() knows just
    // the named ones), where it can; else load(), the whole table (26 MB and 70 ms on 6.18).
    // Where kallsyms hides the addresses from this user, describe() still asks the kernel
    // (5.16+): names without CAP_SYSLOG.
    bool describes_by_kernel() const { return described_by_kernel_ != nullptr; }
    // The BPF object of the kernel's describer, while this holds it; nullptr otherwise.
    const bpf_object *describer_object() const {
        return described_by_kernel_ ? described_by_kernel_->object() : nullptr;
    }
    static KernelSymbols for_stacks(const std::vector<std::string> &names = {});
    // Only the kernel's own descriptions (5.16+), loaded now to describe addresses later,
    // when the caller may have dropped the capabilities a load or kallsyms needs; nullopt
    // where the kernel cannot.
    static std::optional<KernelSymbols> described_by_kernel();

    // The symbol containing the address (greatest start address <= address), or nullptr
    // (always when the addresses are hidden).
    const Symbol *find(uint64_t address) const;
    // "name+0xoff" (with " [module]" for module symbols), or "0x<hex>" when unknown.
    std::string describe(uint64_t address) const;
    // Address of the first text symbol with exactly this name; when no text symbol has it,
    // the address of the first other symbol that does.
    std::optional<uint64_t> address_of(std::string_view name) const;
    // [start, end) of the core-kernel text symbol with exactly this name: from its address to
    // the next symbol at a higher address (kallsyms has no sizes). nullopt when there is no
    // such text symbol, or the addresses are hidden.
    struct Range {
        uint64_t start, end;
    };
    std::optional<Range> text_range(std::string_view name) const;
    // True when every address read was zero (kptr_restrict hides them from this user).
    bool addresses_hidden() const { return hidden_; }
    size_t size() const { return symbols_.size(); }

  private:
    // The functions the kernel looked up (kernel_functions.h).
    static KernelSymbols from_kernel(std::vector<KernelFunction> found);

    std::vector<Symbol> symbols_; // sorted by address
    // Sizes of functions the kernel looked up (load_only()), which text_range() takes.
    std::map<std::string, uint64_t, std::less<>> sizes_;
    // for_stacks(): describe() asks the kernel, and keeps its answers.
    std::shared_ptr<const KernelDescriber> described_by_kernel_;
    mutable std::map<uint64_t, std::string> described_;
    bool hidden_ = false;
};

// The symbols of one ELF file (.symtab, else .dynsym), function symbols only.
class ElfSymbols {
  public:
    // Throws RuntimeError when the file cannot be opened or is not ELF.
    static ElfSymbols load(const std::string &path);

    struct Symbol {
        uint64_t address; // st_value: the link-time virtual address
        uint64_t size;
        std::string name; // demangled when it is a C++ name
    };
    // The function containing this link-time virtual address, or nullptr.
    const Symbol *find(uint64_t vaddr) const;
    // Converts an offset in the file to the link-time virtual address through the PT_LOAD
    // program headers; nullopt when no segment maps that offset.
    std::optional<uint64_t> file_offset_to_vaddr(uint64_t offset) const;

  private:
    std::vector<Symbol> symbols_; // sorted by address
    struct Segment {
        uint64_t offset, vaddr, filesz;
    };
    std::vector<Segment> segments_;
};

// User-space addresses of one process: reads /proc/PID/maps once, opens each mapped file
// lazily through /proc/PID/root so that files of other mount namespaces are found.
class ProcessSymbols {
  public:
    explicit ProcessSymbols(pid_t pid);
    // "name+0xoff [file basename]", "[file basename]+0xoff" when the file has no symbol
    // there, or "0x<hex>" when the address is not in any file mapping (or the process is gone).
    std::string describe(uint64_t address);

    struct Mapping {
        uint64_t start, end, offset;
        std::string path;
    };
    // The file mapping that holds the address, or nullptr.
    const Mapping *mapping_of(uint64_t address) const;

  private:
    pid_t pid_;
    std::vector<Mapping> mappings_;
    std::map<std::string, std::shared_ptr<ElfSymbols>> files_; // nullptr: could not be read
};

// Demangles an Itanium C++ name; returns the input unchanged when it is not one.
std::string demangle(std::string_view name);

// Whether a kernel frame, as KernelSymbols::describe() names it, belongs to the machinery that
// ran the BPF program which took the stack rather than to the code being traced: the
// program's JIT code (unknown to kallsyms: "0x<hex>", or past the last symbol, which
// describe() gives an offset no function has), bpf_trace_run*, __bpf_trace_*, __traceiter_*,
// an out-of-line trace_<event> or trace_call_bpf, and the perf glue of classic tracepoints
// (perf_trace_*). Stacks taken from a classic tracepoint start at its caller already.
bool is_tracing_frame(std::string_view frame);

// A kernel stack the BPF side took (`ips` innermost first, 0 after the last frame) as
// described frames, from the tracepoint's caller on: the leading tracing machinery dropped.
// Without symbols every frame is "0x<hex>", which cannot be told from JIT code: none is left.
std::vector<std::string> kernel_stack_frames(std::span<const uint64_t> ips,
                                             const KernelSymbols *ksyms);

// A frame's address and its description (KernelSymbols::describe(), ProcessSymbols::describe()).
struct DescribedFrame {
    uint64_t address = 0;
    std::string text;
};
// kernel_stack_frames() with each frame's address.
std::vector<DescribedFrame> kernel_stack(std::span<const uint64_t> ips, const KernelSymbols *ksyms);

// The function a description names, without its offset and file or module: "" when it names
// none ("[file]+0xoff", "0x<hex>").
std::string described_function(std::string_view text);

} // namespace memlat
