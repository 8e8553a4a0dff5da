// The loader's decisions, apart from the libbpf calls that carry them out (loader.cpp): which
// choice of each probe to try, what a refusal means, and when to try again or give up. The
// kernel's refusals reach user space only as libbpf's log lines, so the wording of those lines
// is parsed here, where the unit tests check it against lines recorded from the libbpf
// versions memlat builds with (tests/unit/data/libbpf-VERSION/).
//
// A HookFallback is a state machine over the probes' choices. It starts with each probe at its
// first choice that the environment and the machine allow; each refusal (a failed load that
// names a program, a failed attach) moves that probe to its next choice, and the loader then
// reopens the object and tries again. It ends when everything loads and attaches, or with a
// RuntimeError: a required probe has no choice left, or the kernel refused the object as a
// whole (a map it cannot create, missing privileges).
#pragma once

#include <linux/bpf.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernel/hooks.h"

namespace memlat {

// The kernel's ENOTSUPP, which it returns to user space for some unsupported attachments
// (include/linux/errno.h; not in libc's errno.h).
inline constexpr int enotsupp = 524;

// What a kernel needs for a BPF map type or program kind, for messages: "BPF ring buffers
// (Linux 5.8)". Empty for what every supported kernel has.
std::string map_type_requirement(bpf_map_type type, bool internal);
std::string program_requirement(bpf_prog_type type, bpf_attach_type attach);

// The map libbpf names in its last "map 'NAME': failed to create" line, and what it said.
struct RefusedMap {
    std::string name;
    std::string reason;
};
std::optional<RefusedMap> refused_map(const std::vector<std::string> &libbpf_lines);

// The program named in libbpf's last error line that names one ("prog 'NAME': REASON", which
// libbpf writes for every per-program failure), and the reason.
struct RefusedProgram {
    std::string name;
    std::string reason;
};
std::optional<RefusedProgram> refused_program(const std::vector<std::string> &libbpf_lines);

// The verifier's verdict on `program`: the last meaningful line of the load log libbpf quotes
// ("-- BEGIN PROG LOAD LOG --" ... "-- END PROG LOAD LOG --"), e.g. "invalid func unknown#158"
// (a helper the kernel does not have). Empty when libbpf quoted none.
std::string verifier_verdict(const std::vector<std::string> &libbpf_lines,
                             std::string_view program);

// The message for a BPF object the kernel refused as a whole: names the map that could not be
// created and the kernel feature it needs (`requirement_of(name)`), else quotes libbpf.
std::string
object_refusal_message(int err, const std::vector<std::string> &libbpf_lines,
                       std::string_view kernel_release,
                       const std::function<std::string(const std::string &map)> &requirement_of);

// What the machine and the environment allow, read once by the loader.
struct FallbackEnvironment {
    std::vector<std::string> disabled_hooks; // MEMLAT_DISABLE_HOOKS
    bool kernel_btf = true;                  // kernel_features().kernel_btf
    bool tracefs_mounted = true;             // for the hint when a tracepoint is not found
    std::string kernel_release;              // for messages
    // Appended to a failed load's message: names a BTF file the user gave (--btf,
    // MEMLAT_BTF), the likely cause when it is another kernel's (KernelBtf::given_file_note).
    std::string given_btf_note;
};

// What the loaded object can tell about its own maps and programs, for messages.
struct ObjectFacts {
    std::function<std::string(const std::string &map)> map_requirement;
    std::function<std::string(const std::string &program)> program_requirement;
};

// `memlat exporter` runs several tools in one process, which share MEMLAT_DISABLE_HOOKS:
// after share_disabled_hooks() each tool leaves alone the names it does not know (another
// tool's family, say), and the exporter checks, once every tool has planned its probes, that
// each name was known to one of them (disabled_hooks_unknown()).
void share_disabled_hooks();
// The names of `listed` that no tool of this process knew as a hook kind, family or choice.
std::vector<std::string> disabled_hooks_unknown(const std::vector<std::string> &listed);

class HookFallback {
  public:
    // Checks MEMLAT_DISABLE_HOOKS against the probes' kinds, families and labels (a misspelt
    // name is a UsageError, not a silent no-op) and puts each probe on its first allowed
    // choice; a required probe without one is a RuntimeError.
    HookFallback(std::vector<Probe> &probes, FallbackEnvironment environment);

    // The programs the current choices load, in the probes' order.
    std::vector<std::string> programs() const;
    // The probe whose current choice loads `program`; nullptr when none does.
    Probe *owner(std::string_view program) const;

    // The load failed with errno `err` and libbpf logged `libbpf_lines`: the refused program's
    // probe moves on to its next choice (the caller tries again), or, when libbpf names no
    // program of a current choice, the object was refused: RuntimeError.
    void load_refused(int err, const std::vector<std::string> &libbpf_lines,
                      const ObjectFacts &facts);
    // Attaching `program` failed with errno `err`: its probe moves on to its next choice.
    void attach_refused(const std::string &program, int err);

    // For -v: per probe, the hook used (or none) and why each other one was not.
    std::vector<std::string> explanation() const;

  private:
    void refuse(Probe &probe, std::string why);
    bool advance(Probe &probe, int from);
    bool disabled(const HookChoice &choice) const;
    [[noreturn]] void no_hook_left(const Probe &probe) const;

    std::vector<Probe> &probes_;
    FallbackEnvironment environment_;
};

// What the choices made lose, said once on stderr in one form, -v or not: "TOOL: NOTE" for the
// note of each probe's choice, and for a probe nothing attached its note_if_none, followed by
// what each choice was refused with ("Tried:", as when a required probe has none).
void say_what_probes_lost(std::string_view tool, const std::vector<Probe> &probes);

} // namespace memlat
