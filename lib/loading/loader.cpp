#include "loading/loader.h"

#include <bpf/bpf.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <stdexcept>
#include <utility>

#include "base/capabilities.h"
#include "base/machine.h"
#include "base/parsing.h"
#include "kernel/btf.h"
#include "kernel/features.h"
#include "loading/fallback.h"

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

bpf_program *program_named(bpf_object *obj, const std::string &name) {
    bpf_program *p = bpf_object__find_program_by_name(obj, name.c_str());
    if (p == nullptr)
        throw std::logic_error("no BPF program named " + name);
    return p;
}

// -v: how many instructions the verifier walked in each program it accepted, how close to its
// limit each is (and what start-up a change costs).
std::string verified_instructions(bpf_object *obj, const std::vector<std::string> &programs) {
    std::string line;
    for (const auto &name : programs) {
        bpf_prog_info info{};
        uint32_t size = sizeof(info);
        if (bpf_prog_get_info_by_fd(bpf_program__fd(program_named(obj, name)), &info, &size) != 0 ||
            info.verified_insns == 0)
            continue; // before 5.16 the kernel does not say
        line += fmt::format("{}{} {}", line.empty() ? "" : ", ", name, info.verified_insns);
    }
    // The verifier's limit is 1,000,000 instructions a program (BPF_COMPLEXITY_LIMIT_INSNS).
    return line.empty() ? "instructions the verifier walked: not reported (before Linux 5.16)"
                        : "instructions the verifier walked (of 1,000,000 a program): " + line;
}

FallbackEnvironment fallback_environment() {
    FallbackEnvironment environment;
    environment.disabled_hooks = environment_list("MEMLAT_DISABLE_HOOKS");
    environment.kernel_btf = kernel_features().kernel_btf;
    environment.tracefs_mounted = access("/sys/kernel/tracing/events", F_OK) == 0 ||
                                  access("/sys/kernel/debug/tracing/events", F_OK) == 0;
    environment.kernel_release = kernel_release();
    try {
        environment.given_btf_note = kernel_btf().given_file_note();
    } catch (const RuntimeError &) {
        // No BTF could be chosen: the load reports that itself.
    }
    return environment;
}

// What the object says about a map or program libbpf named, for the refusal messages.
ObjectFacts object_facts(bpf_object *obj) {
    return {
        [obj](const std::string &name) -> std::string {
            const bpf_map *map = bpf_object__find_map_by_name(obj, name.c_str());
            if (map == nullptr)
                return "";
            return map_type_requirement(bpf_map__type(map), bpf_map__is_internal(map));
        },
        [obj](const std::string &name) -> std::string {
            const bpf_program *p = bpf_object__find_program_by_name(obj, name.c_str());
            if (p == nullptr)
                return "";
            return program_requirement(bpf_program__type(p), bpf_program__expected_attach_type(p));
        },
    };
}

} // namespace

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

void check_environment(std::string_view tool) {
    if (const std::string missing = missing_bpf_capabilities(); !missing.empty())
        throw RuntimeError(fmt::format(
            "missing {}: loading BPF programs needs root, or the capabilities CAP_BPF and "
            "CAP_PERFMON. Run {} with sudo, or grant them (docs/least-privilege.md).",
            missing, tool));
    // Chooses the BTF (or explains that there is none) and reads it now, so that a bad --btf
    // file, or a kernel's own BTF libbpf refuses, is reported as such and not as the kernel
    // refusing the object. Every object relocates against it: this is the parse libbpf is
    // lent (KernelBtf), not another.
    kernel_btf().types();
}

std::string libbpf_btf_path() {
    return kernel_btf().libbpf_path();
}

void raise_memlock_limit(const Verbosity &v) {
    rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
    if (setrlimit(RLIMIT_MEMLOCK, &unlimited) != 0)
        verbose(v, fmt::format("setrlimit(RLIMIT_MEMLOCK) refused ({}); fine on kernels that "
                               "charge BPF memory to the memory cgroup (5.11 and later)",
                               error_text(errno)));
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
    HookFallback fallback(probes, fallback_environment());

    // Each refusal moves one probe to its next choice, so this ends.
    for (bool first = true;; first = false) {
        libbpf_log().lines.clear();
        bpf_object *obj = reopen();
        if (first)
            check_program_names(obj, probes);
        bpf_program *prog = nullptr;
        bpf_object__for_each_program(prog, obj) bpf_program__set_autoload(prog, false);
        const std::vector<std::string> programs = fallback.programs();
        for (const auto &name : programs)
            bpf_program__set_autoload(program_named(obj, name), true);

        if (int err = load(); err != 0) {
            fallback.load_refused(-err, libbpf_log().lines, object_facts(obj));
            continue;
        }

        std::vector<Link> links;
        bool refused = false;
        for (const auto &name : programs) {
            bpf_link *link = bpf_program__attach(program_named(obj, name));
            if (link == nullptr) {
                fallback.attach_refused(name, errno);
                refused = true;
                break;
            }
            links.emplace_back(link);
        }
        if (refused)
            continue; // the partial links die here, before the object is reopened
        if (v.on()) {
            for (const auto &line : fallback.explanation())
                verbose(v, line);
            verbose(v, verified_instructions(obj, programs));
        }
        // libbpf is done with the BTF: free the parse (before the tool's steady state) and
        // close the memfd of embedded BTF.
        kernel_btf().release();
        return links;
    }
}

void size_global_array(bpf_map *section, size_t count, size_t element_bytes) {
    const int err = bpf_map__set_value_size(section, static_cast<uint32_t>(count * element_bytes));
    if (err != 0)
        throw RuntimeError(fmt::format("Cannot size the BPF section {} for {} elements: {}",
                                       bpf_map__name(section), count, error_text(err)));
}

MappedArray::MappedArray(const bpf_map *map) {
    // The kernel lays a mappable array's values out from the mapping's start, each rounded up
    // to 8 bytes.
    value_bytes_ = (bpf_map__value_size(map) + 7) / 8 * 8;
    const size_t page = static_cast<size_t>(getpagesize());
    length_ = (value_bytes_ * bpf_map__max_entries(map) + page - 1) / page * page;
    void *address = mmap(nullptr, length_, PROT_READ, MAP_SHARED, bpf_map__fd(map), 0);
    if (address == MAP_FAILED)
        throw RuntimeError(fmt::format("Cannot map the BPF array {}: {}", bpf_map__name(map),
                                       std::strerror(errno)));
    address_ = address;
}

MappedArray &MappedArray::operator=(MappedArray &&other) noexcept {
    if (this != &other) {
        if (address_ != nullptr)
            munmap(address_, length_);
        address_ = std::exchange(other.address_, nullptr);
        length_ = std::exchange(other.length_, 0);
        value_bytes_ = std::exchange(other.value_bytes_, 0);
    }
    return *this;
}

MappedArray::~MappedArray() {
    if (address_ != nullptr)
        munmap(address_, length_);
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

void report_skipped_runs(std::string_view tool, bpf_object *obj, std::string_view what) {
    if (uint64_t misses = recursion_misses(obj); misses != 0)
        fmt::print(stderr,
                   "{}: the kernel skipped {} program runs because another BPF program was "
                   "running on the same CPU; those {} are not counted.\n",
                   tool, misses, what);
}

OwnedFd enable_bpf_run_stats() {
    const int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
    if (fd >= 0)
        return OwnedFd(fd);
    if (fd == -EPERM)
        throw RuntimeError("--bpf-stats: the kernel refused BPF_ENABLE_STATS (EPERM): turning "
                           "on the run statistics of BPF programs needs CAP_SYS_ADMIN; run "
                           "with it, or leave --bpf-stats out (kernel.bpf_stats_enabled=1 "
                           "gives the same numbers, for every process)");
    if (fd == -EINVAL)
        throw RuntimeError("--bpf-stats: this kernel has no BPF_ENABLE_STATS (Linux 5.8 and "
                           "later); set kernel.bpf_stats_enabled=1 instead while you need the "
                           "numbers");
    throw RuntimeError(fmt::format("--bpf-stats: BPF_ENABLE_STATS failed: {}", error_text(fd)));
}

} // namespace memlat
