#include "kernel/btf_compare.h"

#include <array>
#include <fmt/format.h>
#include <optional>
#include <utility>
#include <vector>

namespace memlat {

namespace {

// The types whose layout or values the tools rely on: what the BPF programs read through
// CO-RE and the enums user space names values by. A file that disagrees with the running
// kernel on any of them gives wrong offsets or wrong names without an error.
constexpr std::array<const char *, 11> relied_on_structs{
    "task_struct", "mm_struct",       "zone",       "pglist_data", "page", "folio", "address_space",
    "inode",       "compact_control", "mem_cgroup", "scan_control"};
constexpr std::array<const char *, 6> relied_on_enums{"tlb_flush_reason", "zone_type",
                                                      "compact_result",   "migrate_mode",
                                                      "compact_priority", "migrate_reason"};

std::optional<std::vector<std::pair<std::string, int64_t>>> enum_values(const btf &b,
                                                                        const char *name) {
    int id = btf__find_by_name_kind(&b, name, BTF_KIND_ENUM);
    if (id < 0)
        id = btf__find_by_name_kind(&b, name, BTF_KIND_ENUM64);
    if (id < 0)
        return std::nullopt;
    const btf_type *t = btf__type_by_id(&b, id);
    std::vector<std::pair<std::string, int64_t>> values;
    for (int i = 0; i < btf_vlen(t); ++i) {
        if (btf_is_enum(t))
            values.emplace_back(btf__name_by_offset(&b, btf_enum(t)[i].name_off),
                                btf_enum(t)[i].val);
        else
            values.emplace_back(btf__name_by_offset(&b, btf_enum64(t)[i].name_off),
                                static_cast<int64_t>(btf_enum64_value(&btf_enum64(t)[i])));
    }
    return values;
}

std::optional<uint32_t> struct_size(const btf &b, const char *name) {
    int id = btf__find_by_name_kind(&b, name, BTF_KIND_STRUCT);
    if (id < 0)
        return std::nullopt;
    return btf__type_by_id(&b, id)->size;
}

} // namespace

std::string btf_mismatch(const btf &file, const btf &kernel) {
    // Only types both have are compared: a reduced BTF (bpftool gen min_core_btf) holds only
    // what its tool uses, and a type the tool needs but the file lacks fails the load, whose
    // message names the file (given_file_note).
    for (const char *name : relied_on_structs) {
        auto mine = struct_size(file, name), theirs = struct_size(kernel, name);
        if (mine && theirs && *mine != *theirs)
            return fmt::format("struct {} is {} bytes in it and {} in the running kernel", name,
                               *mine, *theirs);
    }
    for (const char *name : relied_on_enums) {
        auto mine = enum_values(file, name), theirs = enum_values(kernel, name);
        if (!mine || !theirs || *mine == *theirs)
            continue;
        if (mine->size() != theirs->size())
            return fmt::format("enum {} has {} values in it and {} in the running kernel", name,
                               mine->size(), theirs->size());
        for (size_t i = 0; i < mine->size(); ++i)
            if ((*mine)[i] != (*theirs)[i])
                return fmt::format("enum {} has {} = {} in it, {} = {} in the running kernel", name,
                                   (*mine)[i].first, (*mine)[i].second, (*theirs)[i].first,
                                   (*theirs)[i].second);
    }
    return "";
}

} // namespace memlat
