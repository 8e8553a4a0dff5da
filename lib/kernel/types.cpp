#include "kernel/types.h"

#include <bpf/btf.h>

#include <algorithm>
#include <cctype>
#include <fmt/format.h>

#include "base/errors.h"
#include "kernel/btf.h"

namespace memlat {

std::optional<uint32_t> percpu_variable_offset(std::string_view name) {
    const btf *types = nullptr;
    try {
        types = &kernel_btf().types();
    } catch (const RuntimeError &) {
        return std::nullopt;
    }
    const int section = btf__find_by_name_kind(types, ".data..percpu", BTF_KIND_DATASEC);
    if (section < 0)
        return std::nullopt;
    const btf_type *t = btf__type_by_id(types, section);
    const btf_var_secinfo *vars = btf_var_secinfos(t);
    for (int i = 0; i < btf_vlen(t); ++i) {
        const btf_type *var = btf__type_by_id(types, vars[i].type);
        if (var != nullptr && btf_is_var(var) && btf__name_by_offset(types, var->name_off) == name)
            return vars[i].offset;
    }
    return std::nullopt;
}

std::map<int64_t, std::string> kernel_enum_names(std::string_view enum_name,
                                                 std::string_view prefix) {
    const btf *types = &kernel_btf().types();
    std::string name(enum_name);
    int id = btf__find_by_name_kind(types, name.c_str(), BTF_KIND_ENUM);
    if (id < 0)
        id = btf__find_by_name_kind(types, name.c_str(), BTF_KIND_ENUM64);
    if (id < 0)
        throw RuntimeError(fmt::format("The kernel's BTF has no enum {}.", enum_name));
    const btf_type *t = btf__type_by_id(types, id);
    std::map<int64_t, std::string> names;
    auto add = [&](const char *raw, int64_t value) {
        std::string_view s(raw);
        if (s.starts_with("NR_"))
            return;
        if (s.starts_with(prefix))
            s.remove_prefix(prefix.size());
        std::string lower(s);
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
        names.emplace(value, lower);
    };
    if (btf_is_enum(t)) {
        const struct btf_enum *e = btf_enum(t);
        for (int i = 0; i < btf_vlen(t); ++i)
            add(btf__name_by_offset(types, e[i].name_off), e[i].val);
    } else {
        const struct btf_enum64 *e = btf_enum64(t);
        for (int i = 0; i < btf_vlen(t); ++i)
            add(btf__name_by_offset(types, e[i].name_off),
                static_cast<int64_t>(btf_enum64_value(&e[i])));
    }
    return names;
}

namespace {

// "struct zone *", "int", "long unsigned int": enough of a C type name to compare prototypes.
std::string btf_type_text(const btf *b, uint32_t id) {
    std::string suffix;
    for (int depth = 0; depth < 16; ++depth) {
        const btf_type *t = btf__type_by_id(b, id);
        if (t == nullptr)
            break;
        if (btf_is_ptr(t)) {
            suffix += "*";
            id = t->type;
            continue;
        }
        if (btf_is_const(t) || btf_is_volatile(t) || btf_is_restrict(t)) {
            id = t->type;
            continue;
        }
        std::string name = btf__name_by_offset(b, t->name_off);
        // A forward declaration (what embedded BTF keeps of structs it does not need whole)
        // names a struct, or a union when its kind flag is set.
        bool fwd_union = btf_is_fwd(t) && btf_kflag(t);
        const char *tag = btf_is_struct(t) || (btf_is_fwd(t) && !fwd_union) ? "struct "
                          : btf_is_union(t) || fwd_union                    ? "union "
                          : btf_is_any_enum(t)                              ? "enum "
                                                                            : "";
        return std::string(tag) + (name.empty() ? "(anon)" : name) +
               (suffix.empty() ? "" : " " + suffix);
    }
    return "?";
}

} // namespace

std::vector<std::string> tracepoint_parameters(std::string_view tracepoint) {
    // The run's one BTF (the kernel's, --btf, or embedded: btf/user-types.txt lists the
    // prototypes that must be embedded), never a second parse of the kernel's.
    const btf *types = nullptr;
    try {
        types = &kernel_btf().types();
    } catch (const RuntimeError &) {
        return {};
    }
    std::string name = "btf_trace_" + std::string(tracepoint);
    int id = btf__find_by_name_kind(types, name.c_str(), BTF_KIND_TYPEDEF);
    if (id < 0)
        return {};
    const btf_type *t = btf__type_by_id(types, id);
    for (int depth = 0; t != nullptr && depth < 4 && !btf_is_func_proto(t); ++depth)
        t = btf__type_by_id(types, t->type);
    if (t == nullptr || !btf_is_func_proto(t))
        return {};
    std::vector<std::string> params;
    const btf_param *p = btf_params(t);
    for (int i = 1; i < btf_vlen(t); ++i) // the first is the tracepoint's void *__data
        params.push_back(btf_type_text(types, p[i].type));
    return params;
}

std::optional<std::vector<TracepointParameter>> tracepoint_prototype(std::string_view tracepoint,
                                                                     std::string &why) {
    const btf *b = nullptr;
    try {
        b = &kernel_btf().types();
    } catch (const RuntimeError &e) {
        why = e.what();
        return std::nullopt;
    }
    const std::string name = "btf_trace_" + std::string(tracepoint);
    int id = btf__find_by_name_kind(b, name.c_str(), BTF_KIND_TYPEDEF);
    if (id < 0) {
        why = "the kernel's BTF has no " + name;
        return std::nullopt;
    }
    // typedef -> pointer -> FUNC_PROTO
    const btf_type *t = btf__type_by_id(b, btf__resolve_type(b, id));
    if (t == nullptr || !btf_is_ptr(t) ||
        !btf_is_func_proto(t = btf__type_by_id(b, btf__resolve_type(b, t->type)))) {
        why = name + " is not a pointer to a function prototype";
        return std::nullopt;
    }
    std::vector<TracepointParameter> params;
    const btf_param *p = btf_params(t);
    for (int i = 0; i < btf_vlen(t); ++i) {
        const btf_type *pt = btf__type_by_id(b, btf__resolve_type(b, p[i].type));
        TracepointParameter param;
        if (pt == nullptr) {
            params.push_back(param);
            continue;
        }
        param.type_name = btf__name_by_offset(b, pt->name_off);
        if (btf_is_ptr(pt))
            param.kind = TracepointParameter::Kind::Pointer;
        else if (btf_is_enum(pt) || btf_is_enum64(pt))
            param.kind = TracepointParameter::Kind::Enum;
        else if (btf_is_int(pt))
            param.kind = TracepointParameter::Kind::Int;
        params.push_back(std::move(param));
    }
    return params;
}

std::optional<bool> reclaim_begin_gfp_first(std::string_view tracepoint, std::string &why) {
    auto prototype = tracepoint_prototype(tracepoint, why);
    if (!prototype)
        return std::nullopt;
    // void *__data, then two integers: gfp_t resolves to "unsigned int", the order is an int.
    const auto &p = *prototype;
    auto is = [&](size_t i, std::string_view name) {
        return p.size() > i && p[i].kind == TracepointParameter::Kind::Int &&
               p[i].type_name == name;
    };
    if (is(1, "int") && is(2, "unsigned int"))
        return false;
    if (is(1, "unsigned int") && is(2, "int"))
        return true;
    why = "btf_trace_" + std::string(tracepoint) +
          " has neither (int order, gfp_t) nor (gfp_t, "
          "int order) first";
    return std::nullopt;
}

std::optional<bool> mmap_lock_passes_memcg_path(std::string &why) {
    auto prototype = tracepoint_prototype("mmap_lock_start_locking", why);
    if (!prototype)
        return std::nullopt;
    // void *__data, struct mm_struct *mm, then the path (a pointer) or write (a bool).
    const auto &p = *prototype;
    using Kind = TracepointParameter::Kind;
    if (p.size() == 4 && p[1].kind == Kind::Pointer && p[2].kind == Kind::Pointer &&
        p[3].kind == Kind::Int)
        return true;
    if (p.size() == 3 && p[1].kind == Kind::Pointer && p[2].kind == Kind::Int)
        return false;
    why = "btf_trace_mmap_lock_start_locking is neither (mm, memcg_path, write) nor (mm, write)";
    return std::nullopt;
}

std::optional<int> dirty_pause_position() {
    // (..., period, pause, start_time): the pause is always the second to last.
    const auto params = tracepoint_parameters("balance_dirty_pages");
    if (params.size() == 8 || params.size() == 12)
        return static_cast<int>(params.size()) - 2;
    return std::nullopt;
}

std::string compaction_control_missing() {
    const auto params = tracepoint_parameters("mm_compaction_begin");
    if (params.empty())
        return "the kernel's BTF does not say what mm_compaction_begin passes (its struct "
               "compact_control * is read from the first argument)";
    if (params[0] != "struct compact_control *")
        return fmt::format("this kernel's mm_compaction_begin passes no struct "
                           "compact_control (Linux 6.0+) but ({})",
                           fmt::join(params, ", "));
    return "";
}

bool mark_victim_passes_task(std::string &why) {
    const auto prototype = tracepoint_prototype("mark_victim", why);
    if (!prototype)
        return false;
    // void *__data, then the task (or the pid before 5.10.y and 6.1).
    if (prototype->size() >= 2 && (*prototype)[1].kind == TracepointParameter::Kind::Pointer)
        return true;
    why = "its first argument is the pid";
    return false;
}

std::string reclaim_begin_order_text(const std::optional<bool> &gfp_first, const std::string &why) {
    if (!gfp_first)
        return "mm_vmscan_*_reclaim_begin's arguments not recognized (" + why +
               "): the classic tracepoints read them by name";
    return *gfp_first ? "mm_vmscan_*_reclaim_begin pass (gfp_t, int order): 7.x's order"
                      : "mm_vmscan_*_reclaim_begin pass (int order, gfp_t)";
}

bool kernel_struct_has(std::string_view name, std::string_view member) {
    const btf *types = nullptr;
    try {
        types = &kernel_btf().types();
    } catch (const RuntimeError &) {
        return false;
    }
    const int id = btf__find_by_name_kind(types, std::string(name).c_str(), BTF_KIND_STRUCT);
    if (id < 0)
        return false;
    const btf_type *t = btf__type_by_id(types, id);
    const btf_member *m = btf_members(t);
    for (int i = 0; i < btf_vlen(t); ++i)
        if (std::string_view(btf__name_by_offset(types, m[i].name_off)) == member)
            return true;
    return false;
}

} // namespace memlat
