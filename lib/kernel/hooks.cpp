#include "kernel/hooks.h"

namespace memlat {

std::string_view hook_kind_name(HookKind kind) {
    // In the order of the enum.
    static constexpr std::string_view names[] = {"tp_btf", "raw_tp", "tracepoint",
                                                 "fentry", "kprobe", "from other probes"};
    return names[static_cast<size_t>(kind)];
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
