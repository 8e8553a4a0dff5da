#include "hooks.h"

namespace memlat {

std::string_view hook_kind_name(HookKind kind) {
    switch (kind) {
    case HookKind::TpBtf:
        return "tp_btf";
    case HookKind::RawTp:
        return "raw_tp";
    case HookKind::Tracepoint:
        return "tracepoint";
    case HookKind::Fentry:
        return "fentry";
    case HookKind::Kprobe:
        return "kprobe";
    case HookKind::FromOtherProbes:
        return "from other probes";
    }
    return "?";
}

std::string HookChoice::label() const {
    if (kind == HookKind::FromOtherProbes)
        return family;
    std::string kind(hook_kind_name(this->kind));
    return family.empty() ? kind : family + "/" + kind;
}

std::vector<HookChoice> tracepoint_choices(const std::vector<std::string> &programs,
                                           const std::string &family,
                                           const std::string &tracepoint_caveat) {
    auto with_suffix = [&](std::string_view suffix) {
        std::vector<std::string> names;
        for (const auto &program : programs)
            names.push_back(program + std::string(suffix));
        return names;
    };
    return {
        {.kind = HookKind::TpBtf, .programs = with_suffix("_btf"), .family = family},
        {.kind = HookKind::RawTp, .programs = with_suffix("_raw"), .family = family},
        {.kind = HookKind::Tracepoint,
         .programs = with_suffix("_tp"),
         .family = family,
         .caveat = tracepoint_caveat},
    };
}

} // namespace memlat
