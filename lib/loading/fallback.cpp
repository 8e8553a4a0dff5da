#include "loading/fallback.h"

#include <algorithm>
#include <cerrno>
#include <fmt/format.h>
#include <set>
#include <stdexcept>
#include <utility>

#include "base/errors.h"

namespace memlat {

std::string map_type_requirement(bpf_map_type type, bool internal) {
    if (internal)
        return "global variables: Linux 5.2, read through memory-mapped arrays: 5.5";
    switch (type) {
    case BPF_MAP_TYPE_RINGBUF:
        return "a BPF ring buffer: Linux 5.8";
    case BPF_MAP_TYPE_TASK_STORAGE:
        return "task-local storage: Linux 5.11 (in tracing programs)";
    case BPF_MAP_TYPE_PERCPU_ARRAY:
    case BPF_MAP_TYPE_PERCPU_HASH:
    case BPF_MAP_TYPE_STACK_TRACE:
    case BPF_MAP_TYPE_PERF_EVENT_ARRAY:
        return "Linux 4.6";
    default:
        return "";
    }
}

std::string program_requirement(bpf_prog_type type, bpf_attach_type attach) {
    switch (type) {
    case BPF_PROG_TYPE_TRACING:
        if (attach == BPF_TRACE_RAW_TP)
            return "tp_btf programs need Linux 5.5 and the kernel's own BTF";
        if (attach == BPF_TRACE_FENTRY || attach == BPF_TRACE_FEXIT)
            return "fentry/fexit programs need Linux 5.5 on x86 (later elsewhere), the "
                   "kernel's own BTF and a traceable (not inlined) function";
        return "tracing programs need Linux 5.5";
    case BPF_PROG_TYPE_RAW_TRACEPOINT:
        return "raw_tp programs need Linux 4.17";
    case BPF_PROG_TYPE_KPROBE:
        return "kprobes need CONFIG_KPROBES and a function the kernel lets them probe";
    default:
        return "";
    }
}

std::optional<RefusedMap> refused_map(const std::vector<std::string> &lines) {
    constexpr std::string_view marker = "map '";
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
        auto start = it->find(marker);
        if (start == std::string::npos || it->find("failed to create") == std::string::npos)
            continue;
        start += marker.size();
        auto end = it->find("': ", start);
        if (end == std::string::npos)
            continue;
        std::string reason = it->substr(end + 3);
        // "failed to create: Invalid argument(-22)": keep what follows the marker.
        if (auto colon = reason.find("failed to create: "); colon != std::string::npos)
            reason = reason.substr(colon + std::string_view("failed to create: ").size());
        return RefusedMap{it->substr(start, end - start), reason};
    }
    return std::nullopt;
}

std::optional<RefusedProgram> refused_program(const std::vector<std::string> &lines) {
    constexpr std::string_view marker = "prog '";
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
        auto start = it->find(marker);
        if (start == std::string::npos)
            continue;
        start += marker.size();
        auto end = it->find("': ", start);
        if (end == std::string::npos)
            continue;
        return RefusedProgram{it->substr(start, end - start), it->substr(end + 3)};
    }
    return std::nullopt;
}

std::string verifier_verdict(const std::vector<std::string> &lines, std::string_view program) {
    const std::string begin = fmt::format("prog '{}': -- BEGIN PROG LOAD LOG --", program);
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
        auto start = it->find(begin);
        if (start == std::string::npos)
            continue;
        std::string_view log(*it);
        log.remove_prefix(start + begin.size());
        if (auto end = log.find("-- END PROG LOAD LOG --"); end != std::string_view::npos)
            log = log.substr(0, end);
        std::string verdict;
        while (!log.empty()) {
            auto nl = log.find('\n');
            std::string_view line = log.substr(0, nl);
            log = nl == std::string_view::npos ? std::string_view{} : log.substr(nl + 1);
            if (!line.empty() && !line.starts_with("processed ") &&
                !line.starts_with("verification time"))
                verdict = line;
        }
        return verdict;
    }
    return {};
}

std::string
object_refusal_message(int err, const std::vector<std::string> &lines,
                       std::string_view kernel_release,
                       const std::function<std::string(const std::string &map)> &requirement_of) {
    if (auto map = refused_map(lines)) {
        std::string needs = requirement_of(map->name);
        return fmt::format("The running kernel ({}) could not create the BPF map '{}'{}: {}.",
                           kernel_release, map->name, needs.empty() ? "" : " (" + needs + ")",
                           map->reason);
    }
    return fmt::format("The running kernel ({}) refused the BPF object: {}.{}", kernel_release,
                       error_text(err), lines.empty() ? "" : "\nlibbpf said: " + lines.back());
}

namespace {

// share_disabled_hooks(): every name of every tool's plan so far.
bool disabled_hooks_shared = false;
std::set<std::string> hook_names_known;

std::string refusals_text(const Probe &probe) {
    std::string text;
    for (const auto &[index, why] : probe.refused)
        text += fmt::format("\n  {}: {}", probe.choices[index].label(), why);
    return text;
}

} // namespace

HookFallback::HookFallback(std::vector<Probe> &probes, FallbackEnvironment environment)
    : probes_(probes), environment_(std::move(environment)) {
    // Every name in MEMLAT_DISABLE_HOOKS must be a hook kind, or a family or choice label of
    // this tool's probes: a misspelt name would otherwise disable nothing, silently, and a
    // test that forces a fall-back would test the preferred path instead.
    // A choice's programs are what its kind attaches; only FromOtherProbes has none.
    for (const auto &probe : probes_)
        for (const auto &choice : probe.choices)
            if ((choice.kind == HookKind::FromOtherProbes) != choice.programs.empty())
                throw std::logic_error(fmt::format("probe {}, choice {}: {} programs", probe.name,
                                                   choice.label(),
                                                   choice.programs.empty() ? "no" : "its own"));
    std::set<std::string> known;
    for (auto kind : program_hook_kinds)
        known.insert(std::string(hook_kind_name(kind)));
    for (const auto &probe : probes_)
        for (const auto &choice : probe.choices) {
            if (!choice.family.empty())
                known.insert(choice.family);
            known.insert(choice.label());
        }
    hook_names_known.insert(known.begin(), known.end());
    for (const auto &token : environment_.disabled_hooks)
        if (!disabled_hooks_shared && !known.contains(token)) {
            std::string names;
            for (const auto &name : known)
                names += (names.empty() ? "" : ", ") + name;
            throw UsageError(fmt::format("MEMLAT_DISABLE_HOOKS: '{}' is not a hook kind or a "
                                         "hook of this tool ({})",
                                         token, names));
        }
    for (auto &probe : probes_)
        if (probe.chosen < 0 && !advance(probe, 0) && probe.required)
            no_hook_left(probe);
}

void share_disabled_hooks() {
    disabled_hooks_shared = true;
}

std::vector<std::string> disabled_hooks_unknown(const std::vector<std::string> &listed) {
    std::vector<std::string> unknown;
    for (const auto &name : listed)
        if (!hook_names_known.contains(name))
            unknown.push_back(name);
    return unknown;
}

// Hook kinds or families listed in MEMLAT_DISABLE_HOOKS are never tried: the tests and the VM
// harness use it to force each fall-back path on a kernel that would accept the preferred one.
bool HookFallback::disabled(const HookChoice &choice) const {
    for (const auto &token : environment_.disabled_hooks)
        // A FromOtherProbes choice is no kind of hook: disabling tp_btf must not take away,
        // say, tlbflush's tlb_flush marks.
        if ((choice.kind != HookKind::FromOtherProbes && token == hook_kind_name(choice.kind)) ||
            (!choice.family.empty() && token == choice.family) || token == choice.label())
            return true;
    return false;
}

// Advances a probe to its next choice that may be tried; false when none is left.
bool HookFallback::advance(Probe &probe, int from) {
    for (int i = from; i < static_cast<int>(probe.choices.size()); ++i) {
        const HookChoice &choice = probe.choices[i];
        if (disabled(choice)) {
            probe.refused.emplace_back(i, "disabled by MEMLAT_DISABLE_HOOKS");
            continue;
        }
        // tp_btf and fentry programs are attached by the kernel's own BTF type ids: another
        // BTF (embedded, --btf) serves CO-RE but cannot name the attach point.
        if ((choice.kind == HookKind::TpBtf || choice.kind == HookKind::Fentry) &&
            !environment_.kernel_btf) {
            probe.refused.emplace_back(i, "needs the kernel's own BTF");
            continue;
        }
        if (!choice.unavailable.empty()) {
            probe.refused.emplace_back(i, choice.unavailable);
            continue;
        }
        probe.chosen = i;
        return true;
    }
    probe.chosen = -1;
    return false;
}

void HookFallback::no_hook_left(const Probe &probe) const {
    throw RuntimeError(fmt::format(
        "The running kernel ({}) refused every way to trace {}. {}Tried:{}{}",
        environment_.kernel_release, probe.name, probe.needs.empty() ? "" : probe.needs + " ",
        refusals_text(probe), environment_.given_btf_note));
}

void HookFallback::refuse(Probe &probe, std::string why) {
    probe.refused.emplace_back(probe.chosen, std::move(why));
    if (!advance(probe, probe.chosen + 1) && probe.required)
        no_hook_left(probe);
}

std::vector<std::string> HookFallback::programs() const {
    std::vector<std::string> names;
    for (const auto &probe : probes_)
        if (const HookChoice *c = probe.choice())
            names.insert(names.end(), c->programs.begin(), c->programs.end());
    return names;
}

Probe *HookFallback::owner(std::string_view program) const {
    for (auto &probe : probes_)
        if (const HookChoice *c = probe.choice())
            if (std::find(c->programs.begin(), c->programs.end(), program) != c->programs.end())
                return &probe;
    return nullptr;
}

void HookFallback::load_refused(int err, const std::vector<std::string> &lines,
                                const ObjectFacts &facts) {
    auto program = refused_program(lines);
    Probe *probe = program ? owner(program->name) : nullptr;
    if (probe == nullptr) {
        // Nothing names a program of ours: the object as a whole was refused.
        if (err == EPERM || err == EACCES)
            throw RuntimeError("The kernel refused to load BPF programs (" + error_text(err) +
                               "). Run as root, or with CAP_BPF and CAP_PERFMON; check that "
                               "kernel.unprivileged_bpf_disabled and lockdown allow tracing." +
                               (lines.empty() ? "" : "\nlibbpf said: " + lines.back()));
        throw RuntimeError(
            object_refusal_message(err, lines, environment_.kernel_release, facts.map_requirement) +
            environment_.given_btf_note);
    }
    std::string needs = facts.program_requirement(program->name);
    std::string verdict = verifier_verdict(lines, program->name);
    refuse(*probe, fmt::format("program {} not loaded: {}{}{}", program->name, program->reason,
                               verdict.empty() ? "" : " (verifier: " + verdict + ")",
                               needs.empty() ? "" : " (" + needs + ")"));
}

void HookFallback::attach_refused(const std::string &program, int err) {
    Probe *probe = owner(program);
    if (probe == nullptr)
        throw std::logic_error("no probe loads the BPF program " + program);
    const HookKind kind = probe->choice()->kind;
    std::string why = fmt::format("{} not attached: {}", program, error_text(err));
    // ENOTSUPP (524) is kernel-internal: libc has no text for it. For fentry it means the
    // kernel has no BPF trampolines (arm64 before 6.4: no ftrace direct calls); the kprobe
    // fall-back follows.
    if (kind == HookKind::Fentry && err == enotsupp)
        why += " (ENOTSUPP: this kernel cannot attach fentry programs; arm64 has the ftrace "
               "direct calls they need from Linux 6.4)";
    if (kind == HookKind::Tracepoint && err == ENOENT && !environment_.tracefs_mounted)
        why += " (tracefs is not mounted: mount -t tracefs nodev /sys/kernel/tracing)";
    refuse(*probe, why);
}

std::vector<std::string> HookFallback::explanation() const {
    std::vector<std::string> lines;
    for (const auto &probe : probes_) {
        const HookChoice *c = probe.choice();
        if (c == nullptr) {
            lines.push_back(fmt::format("{}: not traced (no hook accepted){}", probe.name,
                                        refusals_text(probe)));
            continue;
        }
        std::string line = fmt::format("{}: using {}", probe.name, c->label());
        if (c->kind != HookKind::FromOtherProbes)
            line += fmt::format(" ({})", fmt::join(c->programs, ", "));
        if (!c->caveat.empty())
            line += "; " + c->caveat;
        lines.push_back(line);
        for (const auto &[index, why] : probe.refused)
            lines.push_back(fmt::format("  not {}: {}", probe.choices[index].label(), why));
        for (int i = probe.chosen + 1; i < static_cast<int>(probe.choices.size()); ++i)
            if (std::none_of(probe.refused.begin(), probe.refused.end(),
                             [i](const auto &r) { return r.first == i; }))
                lines.push_back(fmt::format("  not {}: not needed, {} was accepted",
                                            probe.choices[i].label(), c->label()));
    }
    return lines;
}

void say_what_probes_lost(std::string_view tool, const std::vector<Probe> &probes) {
    for (const auto &probe : probes) {
        if (const HookChoice *c = probe.choice(); c != nullptr && !c->note.empty())
            fmt::print(stderr, "{}: {}\n", tool, c->note);
        else if (c == nullptr && !probe.note_if_none.empty())
            fmt::print(stderr, "{}: {}{}\n", tool, probe.note_if_none,
                       probe.refused.empty() ? "" : " Tried:" + refusals_text(probe));
    }
}

} // namespace memlat
