#include "bpf_runtime.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <fmt/format.h>
#include <unistd.h>
#include <utility>

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
        if (token == hook_kind_name(choice.kind) ||
            (!choice.family.empty() && token == choice.family) || token == choice.label())
            return true;
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    }
    return false;
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

// Explains a load failure that names no program: the object as a whole was refused.
[[noreturn]] void object_refused(int err, const std::vector<std::string> &lines) {
    std::string detail = lines.empty() ? "" : "\nlibbpf said: " + lines.back();
    if (err == EPERM || err == EACCES)
        throw RuntimeError("The kernel refused to load BPF programs (" + strerr(err) +
                           "). Run as root, or with CAP_BPF and CAP_PERFMON; check that "
                           "kernel.unprivileged_bpf_disabled and lockdown allow tracing." +
                           detail);
    throw RuntimeError("The kernel refused the BPF object: " + strerr(err) + "." + detail);
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

void check_environment(std::string_view tool) {
    if (geteuid() != 0 && !(has_capability(CAP_BPF) && has_capability(CAP_PERFMON)))
        throw RuntimeError(fmt::format(
            "loading BPF programs needs root, or the capabilities CAP_BPF and CAP_PERFMON. "
            "Run {} with sudo.",
            tool));
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
    verbose(v, kernel_btf().choice().describe());
    // User space has read what it needs from BTF before loading; libbpf parses the file
    // itself, so free our copy first and keep peak memory at one parsed BTF.
    kernel_btf().release_types();
    for (auto &probe : probes)
        if (probe.chosen < 0 && !advance(probe, 0) && probe.required)
            no_hook_left(probe);

    // Each refusal moves one probe to its next choice, so this ends.
    for (;;) {
        libbpf_log().lines.clear();
        bpf_object *obj = reopen();
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
                object_refused(-err, libbpf_log().lines);
            refuse(*probe, fmt::format("program {} not loaded: {}", program, reason));
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
        // libbpf is done with the BTF: close the memfd of embedded BTF too.
        kernel_btf().release();
        return links;
    }
}

RingBuffer::RingBuffer(bpf_map *map, Handler handler) : handler_(std::move(handler)) {
    rb_ = ring_buffer__new(bpf_map__fd(map), dispatch, this, nullptr);
    if (rb_ == nullptr)
        throw RuntimeError("Cannot set up the ring buffer: " + strerr(errno));
}

RingBuffer::~RingBuffer() {
    ring_buffer__free(rb_);
}

int RingBuffer::dispatch(void *self, void *data, size_t size) {
    static_cast<RingBuffer *>(self)->handler_(data, size);
    return 0;
}

bool RingBuffer::poll(std::chrono::milliseconds timeout) {
    int n = ring_buffer__poll(rb_, static_cast<int>(timeout.count()));
    if (n == -EINTR)
        return false;
    if (n < 0)
        throw RuntimeError("Reading the ring buffer failed: " + strerr(-n));
    // The BPF side wakes us only when a batch has built up; take the rest now.
    ring_buffer__consume(rb_);
    return true;
}

void RingBuffer::drain() {
    ring_buffer__consume(rb_);
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
