#include "bpf_runtime.h"

#include "options.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <fmt/format.h>
#include <map>
#include <set>
#include <unistd.h>
#include <utility>
#include <vector>
#include <zlib.h>

#include "kernel_btf.h"
#include "kernel_features.h"

namespace memlat {

namespace {

// libbpf reports why it refused something only through its print callback. We keep what it
// said during the current attempt, to name the program the kernel refused and to quote the
// kernel's answer; with -vv everything is also passed through to stderr.
struct LibbpfLog {
    std::vector<std::string> lines;
    int passthrough_level = 0;
};
LibbpfLog &libbpf_log() {
    static LibbpfLog log;
    return log;
}

int capture_libbpf(enum libbpf_print_level level, const char *format, va_list args) {
    // Debug lines are neither kept nor shown below -vv: libbpf writes hundreds while loading
    // (one per CO-RE candidate), so not formatting them is measurable at start-up.
    if (level == LIBBPF_DEBUG && libbpf_log().passthrough_level < 2)
        return 0;
    // Verifier logs come through here whole, so size the buffer to the message.
    va_list copy;
    va_copy(copy, args);
    int length = vsnprintf(nullptr, 0, format, copy);
    va_end(copy);
    std::string line(length > 0 ? length : 0, '\0');
    vsnprintf(line.data(), line.size() + 1, format, args);
    auto &log = libbpf_log();
    if (log.passthrough_level >= 2)
        fputs(line.c_str(), stderr);
    if (level != LIBBPF_DEBUG) {
        while (!line.empty() && line.back() == '\n')
            line.pop_back();
        log.lines.push_back(std::move(line));
    }
    return 0;
}

// The kernel's ENOTSUPP, which it returns to user space for some unsupported attachments
// (include/linux/errno.h; not in libc's errno.h).
constexpr int enotsupp = 524;

std::string strerr(int err) {
    char buf[128];
    libbpf_strerror(err < 0 ? -err : err, buf, sizeof(buf));
    return buf;
}

bool has_capability(int cap) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    if (syscall(SYS_capget, &header, data) != 0)
        return false;
    return (data[cap / 32].effective & (1u << (cap % 32))) != 0;
}

// The program named in the last libbpf error line that names one: libbpf writes
// "prog 'NAME': ..." for every per-program failure.
std::string refused_program(const std::vector<std::string> &lines, std::string &reason) {
    constexpr std::string_view marker = "prog '";
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
        auto start = it->find(marker);
        if (start == std::string::npos)
            continue;
        start += marker.size();
        auto end = it->find("': ", start);
        if (end == std::string::npos)
            continue;
        reason = it->substr(end + 3);
        return it->substr(start, end - start);
    }
    return {};
}

// The verifier's verdict on `program`: the last meaningful line of the load log libbpf quotes
// ("-- BEGIN PROG LOAD LOG --" ... "-- END PROG LOAD LOG --"), e.g. "invalid func unknown#158"
// (a helper the kernel does not have). Empty when libbpf quoted none.
std::string verifier_verdict(const std::vector<std::string> &lines, const std::string &program) {
    const std::string begin = "prog '" + program + "': -- BEGIN PROG LOAD LOG --";
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

// Hook kinds or families listed in MEMLAT_DISABLE_HOOKS are never tried: the tests and the VM
// harness use it to force each fall-back path on a kernel that would accept the preferred one.
bool disabled_by_environment(const HookChoice &choice) {
    const char *env = getenv("MEMLAT_DISABLE_HOOKS");
    if (env == nullptr)
        return false;
    std::string_view list(env);
    while (!list.empty()) {
        auto comma = list.find(',');
        auto token = list.substr(0, comma);
        // A choice without programs of its own (it reuses another probe's) is not of a kind:
        // disabling tp_btf must not take away, say, tlbflush's tlb_flush marks.
        if ((!choice.programs.empty() && token == hook_kind_name(choice.kind)) ||
            (!choice.family.empty() && token == choice.family) || token == choice.label())
            return true;
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    }
    return false;
}

// Every token of MEMLAT_DISABLE_HOOKS must name a hook kind, or a family or choice label of
// this tool's probes: a misspelt token would otherwise disable nothing, silently, and a test
// that forces a fall-back would test the preferred path instead.
void check_disabled_hooks(const std::vector<Probe> &probes) {
    const char *env = getenv("MEMLAT_DISABLE_HOOKS");
    if (env == nullptr)
        return;
    std::set<std::string> known;
    for (auto kind : {HookKind::TpBtf, HookKind::RawTp, HookKind::Tracepoint, HookKind::Fentry,
                      HookKind::Kprobe})
        known.insert(std::string(hook_kind_name(kind)));
    for (const auto &probe : probes)
        for (const auto &choice : probe.choices) {
            if (!choice.family.empty())
                known.insert(choice.family);
            known.insert(choice.label());
        }
    std::string_view list(env);
    while (!list.empty()) {
        auto comma = list.find(',');
        auto token = list.substr(0, comma);
        if (!token.empty() && !known.contains(std::string(token))) {
            std::string names;
            for (const auto &name : known)
                names += (names.empty() ? "" : ", ") + name;
            throw UsageError(fmt::format("MEMLAT_DISABLE_HOOKS: '{}' is not a hook kind or a "
                                         "hook of this tool ({})",
                                         token, names));
        }
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    }
}

// A choice naming a program the object lacks is a mistake in the tool: caught at the first
// open on every kernel, not only on the kernel that would try that choice.
void check_program_names(bpf_object *obj, const std::vector<Probe> &probes) {
    for (const auto &probe : probes)
        for (const auto &choice : probe.choices)
            for (const auto &name : choice.programs)
                if (bpf_object__find_program_by_name(obj, name.c_str()) == nullptr)
                    throw std::logic_error(fmt::format("probe {}, choice {}: no BPF program "
                                                       "named {}",
                                                       probe.name, choice.label(), name));
}

// Advances a probe to its next choice not disabled by the environment; false when none is left.
bool advance(Probe &probe, int from) {
    for (int i = from; i < static_cast<int>(probe.choices.size()); ++i) {
        if (disabled_by_environment(probe.choices[i])) {
            probe.refused.emplace_back(i, "disabled by MEMLAT_DISABLE_HOOKS");
            continue;
        }
        // tp_btf and fentry programs are attached by the kernel's own BTF type ids: another
        // BTF (embedded, --btf) serves CO-RE but cannot name the attach point. A choice
        // without programs of its own attaches nothing, whatever its kind.
        const HookChoice &choice = probe.choices[i];
        if ((choice.kind == HookKind::TpBtf || choice.kind == HookKind::Fentry) &&
            !choice.programs.empty() && !kernel_features().kernel_btf) {
            probe.refused.emplace_back(i, "needs the kernel's own BTF");
            continue;
        }
        if (!probe.choices[i].unavailable.empty()) {
            probe.refused.emplace_back(i, probe.choices[i].unavailable);
            continue;
        }
        probe.chosen = i;
        return true;
    }
    probe.chosen = -1;
    return false;
}

std::string refusals_text(const Probe &probe) {
    std::string text;
    for (const auto &[index, why] : probe.refused)
        text += fmt::format("\n  {}: {}", probe.choices[index].label(), why);
    return text;
}

[[noreturn]] void no_hook_left(const Probe &probe) {
    throw RuntimeError(fmt::format(
        "The running kernel ({}) refused every way to trace {}. {}Tried:{}",
        [] {
            utsname u{};
            uname(&u);
            return std::string(u.release);
        }(),
        probe.name, probe.needs.empty() ? "" : probe.needs + " ", refusals_text(probe)));
}

std::string kernel_release() {
    utsname u{};
    uname(&u);
    return u.release;
}

// Explains a load failure that names no program: the object as a whole was refused.
[[noreturn]] void object_refused(int err, const std::vector<std::string> &lines, bpf_object *obj) {
    if (err == EPERM || err == EACCES)
        throw RuntimeError("The kernel refused to load BPF programs (" + strerr(err) +
                           "). Run as root, or with CAP_BPF and CAP_PERFMON; check that "
                           "kernel.unprivileged_bpf_disabled and lockdown allow tracing." +
                           (lines.empty() ? "" : "\nlibbpf said: " + lines.back()));
    throw RuntimeError(object_refusal_message(
        err, lines, kernel_release(), [obj](const std::string &name) -> std::string {
            const bpf_map *map = bpf_object__find_map_by_name(obj, name.c_str());
            if (map == nullptr)
                return "";
            return map_type_requirement(bpf_map__type(map), bpf_map__is_internal(map));
        }));
}

void explain_choices(const std::vector<Probe> &probes, const Verbosity &v) {
    if (!v.on())
        return;
    for (const auto &probe : probes) {
        const HookChoice *c = probe.choice();
        if (c == nullptr) {
            verbose(v, fmt::format("{}: not traced (no hook accepted){}", probe.name,
                                   refusals_text(probe)));
            continue;
        }
        std::string line = fmt::format("{}: using {}", probe.name, c->label());
        if (!c->programs.empty())
            line += fmt::format(" ({})", fmt::join(c->programs, ", "));
        if (!c->caveat.empty())
            line += "; " + c->caveat;
        verbose(v, line);
        for (const auto &[index, why] : probe.refused)
            verbose(v, fmt::format("  not {}: {}", probe.choices[index].label(), why));
        for (int i = probe.chosen + 1; i < static_cast<int>(probe.choices.size()); ++i)
            if (std::none_of(probe.refused.begin(), probe.refused.end(),
                             [i](const auto &r) { return r.first == i; }))
                verbose(v, fmt::format("  not {}: not needed, {} was accepted",
                                       probe.choices[i].label(), c->label()));
    }
}

} // namespace

void verbose(const Verbosity &v, std::string_view line) {
    if (v.on())
        fmt::print(stderr, "{}\n", line);
}

Link &Link::operator=(Link &&other) noexcept {
    if (this != &other) {
        if (link_ != nullptr)
            bpf_link__destroy(link_);
        link_ = std::exchange(other.link_, nullptr);
    }
    return *this;
}

Link::~Link() {
    if (link_ != nullptr)
        bpf_link__destroy(link_);
}

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

// The capabilities this process lacks to load and attach tracing programs, named: CAP_BPF
// and CAP_PERFMON (Linux 5.8 and later; CAP_SYS_ADMIN stands for both), or CAP_SYS_ADMIN on
// kernels that predate them (capget's last capability tells). Empty when nothing is missing.
std::string missing_bpf_capabilities() {
    if (has_capability(CAP_SYS_ADMIN))
        return "";
    int last_cap = 0;
    if (FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "r")) {
        if (fscanf(f, "%d", &last_cap) != 1)
            last_cap = 0;
        fclose(f);
    }
    if (last_cap != 0 && last_cap < CAP_BPF)
        return "CAP_SYS_ADMIN (this kernel predates CAP_BPF and CAP_PERFMON, Linux 5.8)";
    std::string missing;
    if (!has_capability(CAP_BPF))
        missing = "CAP_BPF";
    if (!has_capability(CAP_PERFMON))
        missing += missing.empty() ? "CAP_PERFMON" : " and CAP_PERFMON";
    return missing;
}

bool process_has_capability(int capability) {
    return has_capability(capability);
}

void check_environment(std::string_view tool) {
    if (const std::string missing = missing_bpf_capabilities(); !missing.empty())
        throw RuntimeError(fmt::format(
            "missing {}: loading BPF programs needs root, or the capabilities CAP_BPF and "
            "CAP_PERFMON. Run {} with sudo, or grant them (README: \"Least privilege\").",
            missing, tool));
    // Chooses the BTF (or explains that there is none) and reads any other than the
    // kernel's own now, so that a bad --btf file is reported as such and not as a failure deep
    // inside libbpf. The kernel's own is read only if user space needs it.
    KernelBtf &btf = kernel_btf();
    if (btf.choice().origin != BtfChoice::Origin::Kernel)
        btf.types();
}

std::string libbpf_btf_path() {
    return kernel_btf().libbpf_path();
}

void raise_memlock_limit(const Verbosity &v) {
    rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
    if (setrlimit(RLIMIT_MEMLOCK, &unlimited) != 0)
        verbose(v, fmt::format("setrlimit(RLIMIT_MEMLOCK) refused ({}); fine on kernels that "
                               "charge BPF memory to the memory cgroup (5.11 and later)",
                               strerr(errno)));
}

std::vector<Link> load_and_attach(const std::function<bpf_object *()> &reopen,
                                  const std::function<int()> &load, std::vector<Probe> &probes,
                                  const Verbosity &v) {
    libbpf_log().passthrough_level = v.level;
    libbpf_set_print(capture_libbpf);
    check_kernel_floor();
    verbose(v, kernel_btf().choice().describe());
    // libbpf relocates against the run's one parse of the kernel's BTF, lent to it (see
    // KernelBtf), for every attempt below; it is freed once the programs are attached.
    check_disabled_hooks(probes);
    for (auto &probe : probes)
        if (probe.chosen < 0 && !advance(probe, 0) && probe.required)
            no_hook_left(probe);

    // Each refusal moves one probe to its next choice, so this ends.
    for (bool first = true;; first = false) {
        libbpf_log().lines.clear();
        bpf_object *obj = reopen();
        if (first)
            check_program_names(obj, probes);
        bpf_program *prog = nullptr;
        bpf_object__for_each_program(prog, obj) bpf_program__set_autoload(prog, false);
        for (const auto &probe : probes)
            if (const HookChoice *c = probe.choice())
                for (const auto &name : c->programs) {
                    bpf_program *p = bpf_object__find_program_by_name(obj, name.c_str());
                    if (p == nullptr)
                        throw std::logic_error("no BPF program named " + name);
                    bpf_program__set_autoload(p, true);
                }

        auto owner_of = [&](const std::string &program) -> Probe * {
            for (auto &probe : probes)
                if (const HookChoice *c = probe.choice())
                    if (std::find(c->programs.begin(), c->programs.end(), program) !=
                        c->programs.end())
                        return &probe;
            return nullptr;
        };
        auto refuse = [&](Probe &probe, std::string why) {
            probe.refused.emplace_back(probe.chosen, std::move(why));
            if (!advance(probe, probe.chosen + 1) && probe.required)
                no_hook_left(probe);
        };

        int err = load();
        if (err != 0) {
            std::string reason;
            std::string program = refused_program(libbpf_log().lines, reason);
            Probe *probe = program.empty() ? nullptr : owner_of(program);
            if (probe == nullptr)
                object_refused(-err, libbpf_log().lines, obj);
            std::string needs;
            if (const bpf_program *p = bpf_object__find_program_by_name(obj, program.c_str()))
                needs =
                    program_requirement(bpf_program__type(p), bpf_program__expected_attach_type(p));
            std::string verdict = verifier_verdict(libbpf_log().lines, program);
            refuse(*probe, fmt::format("program {} not loaded: {}{}{}", program, reason,
                                       verdict.empty() ? "" : " (verifier: " + verdict + ")",
                                       needs.empty() ? "" : " (" + needs + ")"));
            continue;
        }

        std::vector<Link> links;
        bool retry = false;
        for (auto &probe : probes) {
            const HookChoice *c = probe.choice();
            if (c == nullptr)
                continue;
            for (const auto &name : c->programs) {
                bpf_program *p = bpf_object__find_program_by_name(obj, name.c_str());
                bpf_link *link = bpf_program__attach(p);
                if (link == nullptr) {
                    int attach_err = errno;
                    std::string why = fmt::format("{} not attached: {}", name, strerr(attach_err));
                    // ENOTSUPP (524) is kernel-internal: libc has no text for it. For fentry
                    // it means the kernel has no BPF trampolines (arm64 before 6.4: no ftrace
                    // direct calls); the kprobe fall-back follows.
                    if (c->kind == HookKind::Fentry && attach_err == enotsupp)
                        why += " (ENOTSUPP: this kernel cannot attach fentry programs; arm64 "
                               "has the ftrace direct calls they need from Linux 6.4)";
                    if (c->kind == HookKind::Tracepoint && attach_err == ENOENT &&
                        access("/sys/kernel/tracing/events", F_OK) != 0 &&
                        access("/sys/kernel/debug/tracing/events", F_OK) != 0)
                        why += " (tracefs is not mounted: mount -t tracefs nodev "
                               "/sys/kernel/tracing)";
                    refuse(probe, why);
                    retry = true;
                    break;
                }
                links.emplace_back(link);
            }
            if (retry)
                break;
        }
        if (retry)
            continue; // the partial links die here, before the object is reopened
        explain_choices(probes, v);
        // libbpf is done with the BTF: free the parse (before the tool's steady state) and
        // close the memfd of embedded BTF.
        kernel_btf().release();
        return links;
    }
}

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
                       strerr(err), lines.empty() ? "" : "\nlibbpf said: " + lines.back());
}

namespace {

// A file descriptor closed when it goes out of scope.
class OwnedFd {
  public:
    explicit OwnedFd(int fd) : fd_(fd) {}
    OwnedFd(const OwnedFd &) = delete;
    OwnedFd &operator=(const OwnedFd &) = delete;
    ~OwnedFd() {
        if (fd_ >= 0)
            close(fd_);
    }
    int get() const { return fd_; }

  private:
    int fd_;
};

// A refusal that says the kernel lacks something (not that we may not ask).
bool lacks(int fd) {
    return fd < 0 && errno != EPERM && errno != EACCES && errno != ENOMEM;
}

} // namespace

std::string missing_floor_feature() {
    OwnedFd array(bpf_map_create(BPF_MAP_TYPE_ARRAY, "memlat_floor", sizeof(uint32_t),
                                 sizeof(uint64_t), 1, nullptr));
    if (array.get() < 0)
        return ""; // no privileges or no memory: the real load says so
    // r1 = &value of the array (a global variable's access), r0 = *r1, exit.
    const bpf_insn global_data[] = {
        {BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_VALUE, 0, array.get()},
        {0, 0, 0, 0, 0},
        {BPF_LDX | BPF_MEM | BPF_DW, 0, 1, 0, 0},
        {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
    };
    OwnedFd prog(bpf_prog_load(BPF_PROG_TYPE_SOCKET_FILTER, "memlat_floor", "GPL", global_data,
                               std::size(global_data), nullptr));
    if (lacks(prog.get()))
        return "BPF global variables (Linux 5.2)";
    // Not LIBBPF_OPTS: its designated initializers leave members out, which C++ warns about.
    bpf_map_create_opts mmapable{};
    mmapable.sz = sizeof(mmapable);
    mmapable.map_flags = BPF_F_MMAPABLE;
    OwnedFd mapped(bpf_map_create(BPF_MAP_TYPE_ARRAY, "memlat_floor", sizeof(uint32_t),
                                  sizeof(uint64_t), 1, &mmapable));
    if (lacks(mapped.get()))
        return "memory-mapped BPF arrays (BPF_F_MMAPABLE, Linux 5.5), through which the tools "
               "read their counters";
    return "";
}

void check_kernel_floor() {
    static const std::string missing = missing_floor_feature();
    if (!missing.empty())
        throw RuntimeError(fmt::format("This kernel ({}) is too old for memlat: it lacks {}. "
                                       "memlat needs Linux 5.5 or later.",
                                       kernel_release(), missing));
}

// What an EventReader reads from: a BPF ring buffer or per-CPU perf buffers.
class EventReader::Buffer {
  public:
    virtual ~Buffer() = default;
    // Waits at most `timeout_ms` for a wake-up and consumes what arrived: the number of records
    // or a negative errno (-EINTR when a signal came).
    virtual int poll(int timeout_ms) = 0;
    virtual void consume() = 0;
    virtual uint64_t lost() const { return 0; }
    virtual std::string name() const = 0;
    virtual std::string describe() const = 0;
};

namespace {

class RingBufferSource final : public EventReader::Buffer {
  public:
    RingBufferSource(bpf_map *map, EventReader::Handler handler) : handler_(std::move(handler)) {
        rb_ = ring_buffer__new(bpf_map__fd(map), dispatch, this, nullptr);
        if (rb_ == nullptr)
            throw RuntimeError("Cannot set up the ring buffer: " + strerr(errno));
    }
    RingBufferSource(const RingBufferSource &) = delete;
    RingBufferSource &operator=(const RingBufferSource &) = delete;
    ~RingBufferSource() override { ring_buffer__free(rb_); }
    int poll(int timeout_ms) override { return ring_buffer__poll(rb_, timeout_ms); }
    void consume() override { ring_buffer__consume(rb_); }
    std::string name() const override { return "ring buffer"; }
    std::string describe() const override { return "a BPF ring buffer"; }

  private:
    static int dispatch(void *self, void *data, size_t size) {
        static_cast<RingBufferSource *>(self)->handler_(data, size);
        return 0;
    }
    EventReader::Handler handler_;
    ring_buffer *rb_ = nullptr;
};

// The records of a perf buffer that carries bpf_perf_event_output() data (PERF_SAMPLE_RAW).
struct PerfSampleRecord {
    perf_event_header header;
    uint32_t size; // followed by `size` bytes of data
    const void *data() const { return reinterpret_cast<const char *>(&size) + sizeof(size); }
};
struct PerfLostRecord {
    perf_event_header header;
    uint64_t id;
    uint64_t lost;
};

class PerfBufferSource final : public EventReader::Buffer {
  public:
    PerfBufferSource(bpf_map *map, EventReader::Handler handler, size_t buffer_bytes,
                     size_t wakeup_bytes)
        : handler_(std::move(handler)) {
        const size_t page = static_cast<size_t>(getpagesize());
        pages_ = perf_buffer_pages(buffer_bytes / static_cast<size_t>(possible_cpus()) / page);
        // The watermark must leave room to write while user space wakes up.
        wakeup_bytes_ = std::min(wakeup_bytes, pages_ * page / 2);
        perf_event_attr attr{};
        attr.type = PERF_TYPE_SOFTWARE;
        attr.config = PERF_COUNT_SW_BPF_OUTPUT;
        attr.sample_type = PERF_SAMPLE_RAW;
        attr.sample_period = 1;
        // Wake up after a batch of bytes, not after every record.
        attr.watermark = 1;
        attr.wakeup_watermark = static_cast<uint32_t>(std::max<size_t>(wakeup_bytes_, 1));
        pb_ = perf_buffer__new_raw(bpf_map__fd(map), pages_, &attr, dispatch, this, nullptr);
        if (pb_ == nullptr)
            throw RuntimeError("Cannot set up the perf buffers: " + strerr(errno));
    }
    PerfBufferSource(const PerfBufferSource &) = delete;
    PerfBufferSource &operator=(const PerfBufferSource &) = delete;
    ~PerfBufferSource() override { perf_buffer__free(pb_); }
    int poll(int timeout_ms) override { return perf_buffer__poll(pb_, timeout_ms); }
    void consume() override { perf_buffer__consume(pb_); }
    uint64_t lost() const override { return lost_; }
    std::string name() const override { return "perf buffer"; }
    std::string describe() const override {
        return fmt::format("perf buffers ({} pages per CPU, woken every {} bytes)", pages_,
                           wakeup_bytes_);
    }

  private:
    // A power of two (perf requires it), at least 8 (32 KiB: on a host with many CPUs the
    // ring buffer's share per CPU would be tiny); MEMLAT_PERF_BUFFER_PAGES overrides it so
    // that the tests can make the buffers overflow.
    static size_t perf_buffer_pages(size_t wanted) {
        constexpr size_t min_pages = 8;
        wanted = std::max(wanted, min_pages);
        if (const char *env = getenv("MEMLAT_PERF_BUFFER_PAGES"))
            wanted = std::max<size_t>(parse_number<size_t>(env, "MEMLAT_PERF_BUFFER_PAGES"), 1);
        size_t pages = 1;
        while (pages * 2 <= wanted)
            pages *= 2;
        return pages;
    }
    static bpf_perf_event_ret dispatch(void *self_ptr, int /*cpu*/, perf_event_header *header) {
        auto *self = static_cast<PerfBufferSource *>(self_ptr);
        if (header->type == PERF_RECORD_SAMPLE) {
            const auto *sample = reinterpret_cast<const PerfSampleRecord *>(header);
            self->handler_(sample->data(), sample->size);
        } else if (header->type == PERF_RECORD_LOST) {
            self->lost_ += reinterpret_cast<const PerfLostRecord *>(header)->lost;
        }
        return LIBBPF_PERF_EVENT_CONT;
    }
    EventReader::Handler handler_;
    perf_buffer *pb_ = nullptr;
    size_t pages_ = 0;
    size_t wakeup_bytes_ = 0;
    uint64_t lost_ = 0;
};

} // namespace

EventReader::EventReader(bpf_map *map, Handler handler, size_t buffer_bytes, size_t wakeup_bytes) {
    if (bpf_map__type(map) == BPF_MAP_TYPE_PERF_EVENT_ARRAY)
        buffer_ =
            std::make_unique<PerfBufferSource>(map, std::move(handler), buffer_bytes, wakeup_bytes);
    else
        buffer_ = std::make_unique<RingBufferSource>(map, std::move(handler));
}

EventReader::~EventReader() = default;

bool EventReader::poll(std::chrono::milliseconds timeout) {
    int n = buffer_->poll(static_cast<int>(timeout.count()));
    if (n == -EINTR)
        return false;
    if (n < 0)
        throw RuntimeError("Reading the event buffer failed: " + strerr(-n));
    // The BPF side wakes us only when a batch has built up; take the rest now.
    buffer_->consume();
    return true;
}

void EventReader::drain() {
    buffer_->consume();
}

uint64_t EventReader::lost(uint64_t counted_by_bpf) const {
    return std::max(counted_by_bpf, buffer_->lost());
}

std::string EventReader::name() const {
    return buffer_->name();
}

std::string EventReader::describe() const {
    return buffer_->describe();
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

int possible_cpus() {
    int n = libbpf_num_possible_cpus();
    if (n <= 0)
        throw RuntimeError("Cannot read the number of possible CPUs: " + strerr(-n));
    return n;
}

uint64_t recursion_misses(bpf_object *obj) {
    uint64_t total = 0;
    bpf_program *prog = nullptr;
    bpf_object__for_each_program(prog, obj) {
        int fd = bpf_program__fd(prog);
        if (fd < 0)
            continue;
        bpf_prog_info info{};
        uint32_t len = sizeof(info);
        if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0)
            total += info.recursion_misses;
    }
    return total;
}

} // namespace memlat

// Every skeleton's NAME_bpf__elf_bytes() (btfgen pack-skeleton, cmake/BpfSkeleton.cmake): its
// BPF object, inflated once and kept for the run, since libbpf reads it at each open (a tool
// that falls back to other hooks opens its skeleton again).
const void *memlat_unpack_bpf_object(const unsigned char *packed, size_t packed_size,
                                     size_t raw_size, size_t *size) {
    static std::map<const unsigned char *, std::vector<unsigned char>> unpacked;
    auto &raw = unpacked[packed];
    if (raw.empty()) {
        raw.resize(raw_size);
        uLongf length = raw_size;
        const int err = uncompress(raw.data(), &length, packed, packed_size);
        if (err != Z_OK || length != raw_size) {
            unpacked.erase(packed);
            throw memlat::RuntimeError(
                fmt::format("The BPF object embedded in this binary is damaged ({}).",
                            err != Z_OK ? zError(err) : "wrong size"));
        }
    }
    *size = raw.size();
    return raw.data();
}
