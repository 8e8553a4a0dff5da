// Symbolization for the stack views: kernel addresses through /proc/kallsyms and user
// addresses through the ELF symbol tables of the files a process maps (libelf), with C++
// names demangled.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace memlat {

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
    static KernelSymbols load(const std::string &path = "/proc/kallsyms");
    static KernelSymbols parse(std::string_view text);

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
    std::vector<Symbol> symbols_; // sorted by address
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

  private:
    struct Mapping {
        uint64_t start, end, offset;
        std::string path;
    };
    pid_t pid_;
    std::vector<Mapping> mappings_;
    std::map<std::string, std::shared_ptr<ElfSymbols>> files_; // nullptr: could not be read
};

// Demangles an Itanium C++ name; returns the input unchanged when it is not one.
std::string demangle(std::string_view name);

} // namespace memlat
