#include "loading/symbols.h"

#include "base/errors.h"
#include "base/files.h"
#include "loading/kernel_functions.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

namespace memlat {

namespace {

std::optional<uint64_t> parse_hex(std::string_view text) {
    uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
    if (ec != std::errc{} || end != text.data() + text.size())
        return std::nullopt;
    return value;
}

// Splits off the next space-delimited field, leaving `rest` at the character after it.
std::string_view next_field(std::string_view &rest) {
    const auto start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos) {
        rest = {};
        return {};
    }
    rest.remove_prefix(start);
    const auto end = std::min(rest.find(' '), rest.size());
    const auto field = rest.substr(0, end);
    rest.remove_prefix(end);
    return field;
}

// "ffffffff813444a0 t flush_tlb_func" or "ffffffffc0123000 t foo\t[module]".
std::optional<KernelSymbols::Symbol> parse_kallsyms_line(std::string_view line) {
    const auto address = parse_hex(next_field(line));
    const auto type = next_field(line);
    if (!address || type.size() != 1 || line.empty())
        return std::nullopt;
    line.remove_prefix(1);
    const auto tab = line.find('\t');
    KernelSymbols::Symbol sym{*address, std::string(line.substr(0, tab)), "", type[0]};
    if (sym.name.empty())
        return std::nullopt;
    if (tab != std::string_view::npos) {
        auto module = line.substr(tab + 1);
        const auto open = module.find('['), close = module.rfind(']');
        if (open != std::string_view::npos && close != std::string_view::npos && open < close)
            sym.module = module.substr(open + 1, close - open - 1);
    }
    return sym;
}

// Weak symbols count as text: many kernel functions are weak defaults that arches override.
bool is_text_type(char type) {
    return type == 't' || type == 'T' || type == 'w' || type == 'W';
}

std::string_view basename(std::string_view path) {
    const auto slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string hex_address(uint64_t address) {
    return fmt::format("{:#x}", address);
}

struct ElfDeleter {
    void operator()(Elf *elf) const { elf_end(elf); }
};
using ElfHandle = std::unique_ptr<Elf, ElfDeleter>;

struct FreeDeleter {
    void operator()(char *p) const { std::free(p); }
};

// .symtab is complete; .dynsym only has the exported functions but survives stripping.
Elf_Scn *find_symbol_table(Elf *elf, GElf_Shdr &header) {
    Elf_Scn *dynsym = nullptr;
    GElf_Shdr dynsym_header{};
    for (Elf_Scn *scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr shdr;
        if (!gelf_getshdr(scn, &shdr))
            continue;
        if (shdr.sh_type == SHT_SYMTAB) {
            header = shdr;
            return scn;
        }
        if (shdr.sh_type == SHT_DYNSYM) {
            dynsym = scn;
            dynsym_header = shdr;
        }
    }
    header = dynsym_header;
    return dynsym;
}

} // namespace

// ---- KernelSymbols ----

KernelSymbols KernelSymbols::load(const std::string &path) {
    auto text = read_text_file(path);
    if (!text)
        throw RuntimeError(fmt::format("Cannot read {}: {}. Check that /proc is mounted.", path,
                                       std::strerror(errno)));
    return parse(*text);
}

KernelSymbols KernelSymbols::from_kernel(std::vector<KernelFunction> found) {
    KernelSymbols result;
    for (auto &f : found) {
        if (f.address == 0)
            continue;
        if (f.size != 0)
            result.sizes_[f.name] = f.size;
        result.symbols_.push_back({f.address, std::move(f.name), "", 'T'});
    }
    std::stable_sort(result.symbols_.begin(), result.symbols_.end(),
                     [](const Symbol &a, const Symbol &b) { return a.address < b.address; });
    return result;
}

KernelSymbols KernelSymbols::load_only(const std::vector<std::string> &names,
                                       const std::string &path) {
    if (path == default_kallsyms)
        if (auto found = find_kernel_functions(names))
            return from_kernel(std::move(*found));
    // stdio, not iostreams: std::ifstream adds 480 KB of locale code to a static binary.
    std::unique_ptr<FILE, int (*)(FILE *)> in(fopen(path.c_str(), "re"), fclose);
    if (!in)
        throw RuntimeError(fmt::format("Cannot read {}: {}. Check that /proc is mounted.", path,
                                       std::strerror(errno)));
    // /proc reports 1 KB blocks, which stdio would read the 5 MB of text in: 5000 system
    // calls instead of 80.
    std::vector<char> read_buffer(64 * 1024);
    setvbuf(in.get(), read_buffer.data(), _IOFBF, read_buffer.size());
    KernelSymbols result;
    bool any = false, any_nonzero = false;
    // The symbol after a kept one ends it (text_range()): the core kernel's symbols are listed
    // in address order, so it is the next line at a higher address.
    bool ending = false;   // the last named symbol has no end yet
    uint64_t named_at = 0; // its address
    struct LineBuffer {    // getline()'s, which it grows with realloc()
        char *data = nullptr;
        size_t capacity = 0;
        ~LineBuffer() { std::free(data); }
    } buffer;
    for (ssize_t n; (n = getline(&buffer.data, &buffer.capacity, in.get())) > 0;) {
        std::string_view line(buffer.data, static_cast<size_t>(n));
        if (line.ends_with('\n'))
            line.remove_suffix(1);
        auto sym = parse_kallsyms_line(line);
        if (!sym)
            continue;
        any = true;
        any_nonzero = any_nonzero || sym->address != 0;
        if (std::find(names.begin(), names.end(), sym->name) != names.end()) {
            ending = true;
            named_at = sym->address;
            result.symbols_.push_back(std::move(*sym));
        } else if (ending && sym->address > named_at) {
            ending = false;
            result.symbols_.push_back(std::move(*sym));
        }
    }
    in.reset(); // before read_buffer goes
    result.hidden_ = any && !any_nonzero;
    std::stable_sort(result.symbols_.begin(), result.symbols_.end(),
                     [](const Symbol &a, const Symbol &b) { return a.address < b.address; });
    return result;
}

KernelSymbols KernelSymbols::parse(std::string_view text) {
    KernelSymbols result;
    bool any_nonzero = false;
    std::string_view line;
    while (next_line(text, line)) {
        if (auto sym = parse_kallsyms_line(line)) {
            any_nonzero = any_nonzero || sym->address != 0;
            result.symbols_.push_back(std::move(*sym));
        }
    }
    result.hidden_ = !result.symbols_.empty() && !any_nonzero;
    // Stable, so that address_of() still sees aliases in the order the kernel lists them.
    std::stable_sort(result.symbols_.begin(), result.symbols_.end(),
                     [](const Symbol &a, const Symbol &b) { return a.address < b.address; });
    return result;
}

const KernelSymbols::Symbol *KernelSymbols::find(uint64_t address) const {
    // With hidden addresses every symbol sits at 0 and any answer would be a lie.
    if (hidden_)
        return nullptr;
    const auto it =
        std::upper_bound(symbols_.begin(), symbols_.end(), address,
                         [](uint64_t addr, const Symbol &sym) { return addr < sym.address; });
    return it == symbols_.begin() ? nullptr : &*std::prev(it);
}

KernelSymbols KernelSymbols::for_stacks(const std::vector<std::string> &names) {
    // A function every kernel has tells whether the lookups see addresses at all.
    std::vector<std::string> asked = names;
    asked.emplace_back("schedule");
    if (auto found = find_kernel_functions(asked); found && found->back().address != 0)
        if (auto describer = KernelDescriber::load()) {
            KernelSymbols result = from_kernel(std::move(*found));
            result.described_by_kernel_ = std::move(describer);
            return result;
        }
    KernelSymbols result = load();
    // Hidden addresses hide no names: "%pS" describes an address the program is given for
    // any user who may load it (CAP_BPF), so the stacks keep their function names without
    // CAP_SYSLOG. Nothing is found by name then (addresses_hidden() stays true).
    if (result.addresses_hidden())
        result.described_by_kernel_ = KernelDescriber::load();
    return result;
}

std::optional<KernelSymbols> KernelSymbols::described_by_kernel() {
    auto describer = KernelDescriber::load();
    if (!describer)
        return std::nullopt;
    KernelSymbols result;
    result.described_by_kernel_ = std::move(describer);
    return result;
}

std::string KernelSymbols::describe(uint64_t address) const {
    if (described_by_kernel_) {
        if (const auto it = described_.find(address); it != described_.end())
            return it->second;
        const auto texts = described_by_kernel_->describe(std::span(&address, 1));
        std::string text = texts && !texts->empty() && !texts->front().empty()
                               ? texts->front()
                               : hex_address(address);
        described_.emplace(address, text);
        return text;
    }
    const Symbol *sym = find(address);
    if (!sym)
        return hex_address(address);
    auto text = fmt::format("{}+{:#x}", sym->name, address - sym->address);
    if (!sym->module.empty())
        text += fmt::format(" [{}]", sym->module);
    return text;
}

std::optional<uint64_t> KernelSymbols::address_of(std::string_view name) const {
    const Symbol *fallback = nullptr;
    for (const auto &sym : symbols_) {
        if (sym.name != name)
            continue;
        if (is_text_type(sym.type))
            return sym.address;
        if (!fallback)
            fallback = &sym;
    }
    return fallback ? std::optional(fallback->address) : std::nullopt;
}

std::optional<KernelSymbols::Range> KernelSymbols::text_range(std::string_view name) const {
    if (hidden_)
        return std::nullopt;
    for (auto it = symbols_.begin(); it != symbols_.end(); ++it) {
        if (it->name != name || !is_text_type(it->type) || !it->module.empty())
            continue;
        if (const auto size = sizes_.find(name); size != sizes_.end())
            return Range{it->address, it->address + size->second};
        const auto next = std::find_if(it, symbols_.end(),
                                       [&](const Symbol &s) { return s.address > it->address; });
        if (next == symbols_.end())
            return std::nullopt;
        return Range{it->address, next->address};
    }
    return std::nullopt;
}

// ---- ElfSymbols ----

ElfSymbols ElfSymbols::load(const std::string &path) {
    static const bool libelf_ready = elf_version(EV_CURRENT) != EV_NONE;
    if (!libelf_ready)
        throw RuntimeError(fmt::format("libelf cannot be initialized: {}.", elf_errmsg(-1)));

    const OwnedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0)
        throw RuntimeError(fmt::format("Cannot open {}: {}.", path, std::strerror(errno)));
    const ElfHandle elf(elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr));
    if (!elf || elf_kind(elf.get()) != ELF_K_ELF)
        throw RuntimeError(fmt::format("{} is not a readable ELF file.", path));

    ElfSymbols result;
    size_t phnum = 0;
    if (elf_getphdrnum(elf.get(), &phnum) == 0) {
        for (size_t i = 0; i < phnum; ++i) {
            GElf_Phdr phdr;
            if (gelf_getphdr(elf.get(), static_cast<int>(i), &phdr) && phdr.p_type == PT_LOAD)
                result.segments_.push_back({phdr.p_offset, phdr.p_vaddr, phdr.p_filesz});
        }
    }

    GElf_Shdr shdr{};
    Elf_Scn *scn = find_symbol_table(elf.get(), shdr);
    Elf_Data *data = scn ? elf_getdata(scn, nullptr) : nullptr;
    if (data && shdr.sh_entsize != 0) {
        const size_t count = shdr.sh_size / shdr.sh_entsize;
        for (size_t i = 0; i < count; ++i) {
            GElf_Sym sym;
            if (!gelf_getsym(data, static_cast<int>(i), &sym))
                continue;
            const int type = GELF_ST_TYPE(sym.st_info);
            if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_value == 0 ||
                sym.st_shndx == SHN_UNDEF)
                continue;
            const char *name = elf_strptr(elf.get(), shdr.sh_link, sym.st_name);
            if (name && *name)
                result.symbols_.push_back({sym.st_value, sym.st_size, demangle(name)});
        }
    }
    // Among aliases the largest comes last, which is the one find() checks the extent of.
    std::sort(result.symbols_.begin(), result.symbols_.end(), [](const Symbol &a, const Symbol &b) {
        return a.address != b.address ? a.address < b.address : a.size < b.size;
    });
    return result;
}

const ElfSymbols::Symbol *ElfSymbols::find(uint64_t vaddr) const {
    const auto it =
        std::upper_bound(symbols_.begin(), symbols_.end(), vaddr,
                         [](uint64_t addr, const Symbol &sym) { return addr < sym.address; });
    if (it == symbols_.begin())
        return nullptr;
    const Symbol &sym = *std::prev(it);
    // Hand-written assembly often has no size; trust the nearest start then.
    if (sym.size != 0 && vaddr - sym.address >= sym.size)
        return nullptr;
    return &sym;
}

std::optional<uint64_t> ElfSymbols::file_offset_to_vaddr(uint64_t offset) const {
    for (const auto &seg : segments_) {
        if (offset >= seg.offset && offset - seg.offset < seg.filesz)
            return seg.vaddr + (offset - seg.offset);
    }
    return std::nullopt;
}

// ---- ProcessSymbols ----

ProcessSymbols::ProcessSymbols(pid_t pid) : pid_(pid) {
    // A process that has already exited leaves no maps; every address then stays numeric.
    auto maps = read_text_file(fmt::format("/proc/{}/maps", pid));
    std::string_view text = maps ? std::string_view(*maps) : std::string_view();
    std::string_view line;
    while (next_line(text, line)) {
        // "start-end perms offset dev inode   path", where the path may contain spaces.
        std::string_view rest = line;
        const auto range = next_field(rest);
        next_field(rest); // perms
        const auto offset = parse_hex(next_field(rest));
        next_field(rest); // dev
        next_field(rest); // inode
        const auto path_start = rest.find_first_not_of(' ');
        if (!offset || path_start == std::string_view::npos || rest[path_start] != '/')
            continue;
        const auto dash = range.find('-');
        if (dash == std::string_view::npos)
            continue;
        const auto start = parse_hex(range.substr(0, dash));
        const auto end = parse_hex(range.substr(dash + 1));
        if (start && end)
            mappings_.push_back({*start, *end, *offset, std::string(rest.substr(path_start))});
    }
}

const ProcessSymbols::Mapping *ProcessSymbols::mapping_of(uint64_t address) const {
    const auto mapping =
        std::find_if(mappings_.begin(), mappings_.end(),
                     [address](const Mapping &m) { return address >= m.start && address < m.end; });
    return mapping == mappings_.end() ? nullptr : &*mapping;
}

std::string ProcessSymbols::describe(uint64_t address) {
    const Mapping *mapping = mapping_of(address);
    if (mapping == nullptr)
        return hex_address(address);

    auto [cached, inserted] = files_.try_emplace(mapping->path);
    if (inserted) {
        try {
            cached->second = std::make_shared<ElfSymbols>(
                ElfSymbols::load(fmt::format("/proc/{}/root{}", pid_, mapping->path)));
        } catch (const RuntimeError &) {
            // Deleted, replaced or unreadable files still get a useful file+offset answer.
        }
    }

    const uint64_t file_offset = address - mapping->start + mapping->offset;
    const auto file = basename(mapping->path);
    if (const auto &elf = cached->second) {
        if (const auto vaddr = elf->file_offset_to_vaddr(file_offset)) {
            if (const auto *sym = elf->find(*vaddr))
                return fmt::format("{}+{:#x} [{}]", sym->name, *vaddr - sym->address, file);
        }
    }
    return fmt::format("[{}]+{:#x}", file, file_offset);
}

// ---- demangle ----

std::string demangle(std::string_view name) {
    if (!name.starts_with("_Z"))
        return std::string(name);
    int status = 0;
    const std::unique_ptr<char, FreeDeleter> result(
        abi::__cxa_demangle(std::string(name).c_str(), nullptr, nullptr, &status));
    return status == 0 && result ? std::string(result.get()) : std::string(name);
}

bool is_tracing_frame(std::string_view frame) {
    for (std::string_view prefix :
         {"0x", "bpf_", "__bpf_", "__traceiter_", "trace_", "perf_trace_", "trace_event_"})
        if (frame.starts_with(prefix))
            return true;
    // "name+0xOFFSET": an address past the last symbol kallsyms lists (where the BPF JIT puts
    // programs) is described as far beyond that symbol; no kernel function is 1 MiB long.
    constexpr uint64_t max_function_bytes = 1 << 20;
    const auto plus = frame.find("+0x");
    if (plus == std::string_view::npos)
        return false;
    const std::string_view hex = frame.substr(plus + 3, frame.find(' ', plus) - plus - 3);
    uint64_t offset = 0;
    const auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), offset, 16);
    return ec == std::errc{} && end == hex.data() + hex.size() && offset >= max_function_bytes;
}

std::vector<DescribedFrame> kernel_stack(std::span<const uint64_t> ips,
                                         const KernelSymbols *ksyms) {
    std::vector<DescribedFrame> frames;
    bool in_tracing = true;
    for (uint64_t ip : ips) {
        if (ip == 0)
            break;
        std::string frame = ksyms != nullptr ? ksyms->describe(ip) : hex_address(ip);
        if (in_tracing && is_tracing_frame(frame))
            continue;
        in_tracing = false;
        frames.push_back({ip, std::move(frame)});
    }
    return frames;
}

std::vector<std::string> kernel_stack_frames(std::span<const uint64_t> ips,
                                             const KernelSymbols *ksyms) {
    std::vector<std::string> frames;
    for (auto &frame : kernel_stack(ips, ksyms))
        frames.push_back(std::move(frame.text));
    return frames;
}

std::string described_function(std::string_view text) {
    // "name+0xoff [module]", "name+0xoff [file]", "[file]+0xoff", "0x<hex>".
    if (text.starts_with('[') || text.starts_with("0x"))
        return "";
    return std::string(text.substr(0, text.find("+0x")));
}

} // namespace memlat
