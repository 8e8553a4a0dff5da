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
    }
    return "?";
}

std::string HookChoice::label() const {
    if (programs.empty())
        return family;
    std::string kind(hook_kind_name(this->kind));
    return family.empty() ? kind : family + "/" + kind;
}

} // namespace memlat
