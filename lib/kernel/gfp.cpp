#include "kernel/gfp.h"

#include <bpf/btf.h>

#include <fmt/format.h>
#include <initializer_list>
#include <vector>

#include "base/errors.h"
#include "kernel/btf.h"

namespace memlat {

GfpNames::GfpNames(std::map<int, std::string> bits, std::string source)
    : bits_(std::move(bits)), source_(std::move(source)) {}

GfpNames GfpNames::builtin() {
    std::map<int, std::string> bits;
    int bit = 0;
    for (const char *name : {"__GFP_DMA",
                             "__GFP_HIGHMEM",
                             "__GFP_DMA32",
                             "__GFP_MOVABLE",
                             "__GFP_RECLAIMABLE",
                             "__GFP_HIGH",
                             "__GFP_IO",
                             "__GFP_FS",
                             "__GFP_ZERO",
                             "__GFP_ATOMIC",
                             "__GFP_DIRECT_RECLAIM",
                             "__GFP_KSWAPD_RECLAIM",
                             "__GFP_WRITE",
                             "__GFP_NOWARN",
                             "__GFP_RETRY_MAYFAIL",
                             "__GFP_NOFAIL",
                             "__GFP_NORETRY",
                             "__GFP_MEMALLOC",
                             "__GFP_COMP",
                             "__GFP_NOMEMALLOC",
                             "__GFP_HARDWALL",
                             "__GFP_THISNODE",
                             "__GFP_ACCOUNT",
                             "__GFP_ZEROTAGS"})
        bits[bit++] = name;
    return GfpNames(std::move(bits), "built-in table (Linux 5.15-6.8 layout)");
}

GfpNames GfpNames::from_kernel() {
    const btf *types = nullptr;
    try {
        types = &kernel_btf().types();
    } catch (const RuntimeError &) {
        return builtin(); // the tool reports the missing BTF when it checks its environment
    }
    // The enum is anonymous: find it by its members' names.
    const int count = static_cast<int>(btf__type_cnt(types));
    for (int id = 1; id < count; ++id) {
        const btf_type *t = btf__type_by_id(types, id);
        if (!btf_is_enum(t))
            continue;
        const struct btf_enum *e = btf_enum(t);
        std::map<int, std::string> bits;
        for (int i = 0; i < btf_vlen(t); ++i) {
            std::string_view name = btf__name_by_offset(types, e[i].name_off);
            if (!name.starts_with("___GFP_") || !name.ends_with("_BIT"))
                break;
            if (name == "___GFP_LAST_BIT")
                continue;
            // "___GFP_IO_BIT" -> "__GFP_IO"
            name.remove_prefix(1);
            name.remove_suffix(4);
            bits[static_cast<int>(e[i].val)] = std::string(name);
        }
        if (bits.size() > 8)
            return GfpNames(std::move(bits), "kernel BTF (enum ___GFP_*_BIT)");
    }
    return builtin();
}

uint64_t GfpNames::mask_of(std::string_view name) const {
    for (const auto &[bit, n] : bits_)
        if (n == name)
            return uint64_t{1} << bit;
    return 0;
}

std::string GfpNames::decode(uint64_t flags) const {
    if (flags == 0)
        return "none";
    auto m = [this](std::initializer_list<std::string_view> names) {
        uint64_t mask = 0;
        for (auto n : names)
            mask |= mask_of(n);
        return mask;
    };
    const uint64_t reclaim = m({"__GFP_DIRECT_RECLAIM", "__GFP_KSWAPD_RECLAIM"});
    const uint64_t user = reclaim | m({"__GFP_IO", "__GFP_FS", "__GFP_HARDWALL"});
    const uint64_t highuser = user | m({"__GFP_HIGHMEM"});
    const uint64_t highuser_movable = highuser | m({"__GFP_MOVABLE"});
    const uint64_t transhuge_light =
        (highuser_movable | m({"__GFP_COMP", "__GFP_NOMEMALLOC", "__GFP_NOWARN"})) & ~reclaim;
    const uint64_t kernel = reclaim | m({"__GFP_IO", "__GFP_FS"});
    // Composites first, in the order the kernel's show_gfp_flags() tries them.
    const std::vector<std::pair<std::string_view, uint64_t>> composites{
        {"GFP_TRANSHUGE", transhuge_light | m({"__GFP_DIRECT_RECLAIM"})},
        {"GFP_TRANSHUGE_LIGHT", transhuge_light},
        {"GFP_HIGHUSER_MOVABLE", highuser_movable},
        {"GFP_HIGHUSER", highuser},
        {"GFP_USER", user},
        {"GFP_KERNEL_ACCOUNT", kernel | m({"__GFP_ACCOUNT"})},
        {"GFP_KERNEL", kernel},
        {"GFP_NOFS", reclaim | m({"__GFP_IO"})},
        {"GFP_ATOMIC", m({"__GFP_HIGH", "__GFP_ATOMIC", "__GFP_KSWAPD_RECLAIM"})},
        {"GFP_NOIO", reclaim},
        {"GFP_NOWAIT", m({"__GFP_KSWAPD_RECLAIM"})},
        {"__GFP_RECLAIM", reclaim},
    };
    std::string out;
    auto add = [&out](std::string_view name) {
        if (!out.empty())
            out += '|';
        out += name;
    };
    for (const auto &[name, mask] : composites)
        if (mask != 0 && (flags & mask) == mask) {
            add(name);
            flags &= ~mask;
        }
    for (const auto &[bit, name] : bits_)
        if (flags & (uint64_t{1} << bit)) {
            add(name);
            flags &= ~(uint64_t{1} << bit);
        }
    if (flags != 0)
        add(fmt::format("{:#x}", flags));
    return out;
}

} // namespace memlat
