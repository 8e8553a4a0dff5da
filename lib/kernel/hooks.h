// What a tool wants to observe (a Probe) and the ways the kernel may let it (HookChoice), most
// preferred first. Plain data: the loader (loader.h) picks a choice per probe, falling back
// when the kernel refuses one (fallback.h).
#pragma once

#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace memlat {

// How a choice hooks the kernel. FromOtherProbes is a choice with no programs of its own: it
// is satisfied by what other probes attach (tlbflush's latency from the tlb_flush marks), so
// it needs nothing of the kernel and no MEMLAT_DISABLE_HOOKS kind names it.
enum class HookKind { TpBtf, RawTp, Tracepoint, Fentry, Kprobe, FromOtherProbes };
std::string_view hook_kind_name(HookKind kind);
// The kinds that attach programs, for messages that list them.
inline constexpr HookKind program_hook_kinds[] = {
    HookKind::TpBtf, HookKind::RawTp, HookKind::Tracepoint, HookKind::Fentry, HookKind::Kprobe};

// One way to observe something: the BPF programs (by their C function names) that together
// make it up, of one hook kind. Written with designated initializers, e.g.
//   {.kind = HookKind::Fentry, .programs = {"start_fentry"}, .family = "migrate_pages",
//    .caveat = "..."}
// `family` groups choices that use the same kernel events ("csd", "irq_vectors"); `caveat`
// says what this choice cannot show, printed with -v; `note`, what choosing it loses that the
// output cannot show by itself (a column that stays empty, a count that means something else
// here), said on stderr once the tool is loaded, -v or not (say_what_probes_lost()). A
// FromOtherProbes choice is labelled by its family. `unavailable`, when set before loading, says
// why user space already knows this choice cannot work here (e.g. a symbol it needs is missing); it
// is then skipped like a refused one.
struct HookChoice {
    HookKind kind = HookKind::Tracepoint;
    std::vector<std::string> programs;
    std::string family;
    std::string caveat;
    std::string note;
    std::string unavailable;
    std::string label() const;
};

// The three ways to hook a kernel tracepoint, most preferred first: tp_btf, raw_tp and the
// classic tracepoint, each made of `programs` with its kind's suffix ("_btf", "_raw", "_tp":
// the BPF side writes each handler once per kind under those names). `tracepoint_caveat` is
// what the classic tracepoint cannot show.
std::vector<HookChoice> tracepoint_choices(const std::vector<std::string> &programs,
                                           const std::string &family = "",
                                           const std::string &tracepoint_caveat = "");

// Something a tool observes and the hooks that can observe it, most preferred first. A tool
// names its probes with an enum of its own (`id`) and finds them with find_probe(): code never
// matches labels, which are for people and may change.
struct Probe {
    template <typename Id>
    requires std::is_enum_v<Id> Probe(Id id, std::string name, std::string needs,
                                      std::vector<HookChoice> choices, bool required = true)
        : id(static_cast<int>(id)), name(std::move(name)), needs(std::move(needs)),
          choices(std::move(choices)), required(required) {}

    // A probe nothing looks up (bench/'s empty programs, the shared thread-exit clean-up).
    Probe(std::string name, std::string needs, std::vector<HookChoice> choices,
          bool required = true)
        : id(-1), name(std::move(name)), needs(std::move(needs)), choices(std::move(choices)),
          required(required) {}

    int id;            // the tool's enum value
    std::string name;  // what it observes, e.g. "tlb:tlb_flush"
    std::string needs; // what the kernel needs for it, for the error when nothing attaches
    std::vector<HookChoice> choices;
    bool required = true; // false: the tool works on without it (and says so with -v)
    // Not required: what the output lacks when no choice attached, said on stderr once the
    // tool is loaded, -v or not (say_what_probes_lost()).
    std::string note_if_none;

    // Filled in by the loader.
    int chosen = -1;                                  // index into choices; -1: none
    std::vector<std::pair<int, std::string>> refused; // choice index and the kernel's answer
    const HookChoice *choice() const { return chosen < 0 ? nullptr : &choices[chosen]; }
    bool uses_family(std::string_view family) const {
        return choice() != nullptr && choice()->family == family;
    }
};

// The probe a tool planned under `id`; nullptr when its options did not plan it.
template <typename Id>
requires std::is_enum_v<Id>
const Probe *find_probe(const std::vector<Probe> &probes, Id id) {
    for (const auto &probe : probes)
        if (probe.id == static_cast<int>(id))
            return &probe;
    return nullptr;
}

} // namespace memlat
