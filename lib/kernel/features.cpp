#include "kernel/features.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fmt/format.h>
#include <iterator>
#include <optional>

#include "base/errors.h"
#include "base/files.h"
#include "base/machine.h"
#include "base/parsing.h"

namespace memlat {

namespace {

// libbpf_probe_bpf_map_type() answers 1 (supported), 0 (not) or a negative errno (could not
// tell, e.g. no privileges); only a clear "not" turns a feature off.
bool map_type_supported(bpf_map_type type) {
    return libbpf_probe_bpf_map_type(type, nullptr) != 0;
}

void apply_disabled(KernelFeatures &f) {
    for (const auto &token : environment_list("MEMLAT_DISABLE_FEATURES")) {
        if (token == "task_btf" || token == "task_storage")
            f.task_btf = false;
        else if (token == "ringbuf")
            f.ringbuf = false;
        else if (token == "kernel_btf")
            f.kernel_btf = false;
        else if (token == "uffd_wp_async")
            ; // read by memlat's main() (tools/main.cpp), before anything else
        else if (token == "psi")
            ; // read by memstall (feature_forced_off())
        else if (token == "kernel_log")
            ; // read by hypervisor_at_boot() (kernel/hypervisor.cpp)
        else
            throw UsageError(fmt::format("MEMLAT_DISABLE_FEATURES: unknown feature '{}' (known: "
                                         "{})",
                                         token, fmt::join(feature_names(), ", ")));
    }
}

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

const std::vector<std::string_view> &feature_names() {
    static const std::vector<std::string_view> names{"task_btf",      "ringbuf", "kernel_btf",
                                                     "uffd_wp_async", "psi",     "kernel_log"};
    return names;
}

bool feature_forced_off(std::string_view name) {
    kernel_features(); // an unknown name is a UsageError, whoever asks first
    const auto listed = environment_list("MEMLAT_DISABLE_FEATURES");
    return std::find(listed.begin(), listed.end(), name) != listed.end();
}

const KernelFeatures &kernel_features() {
    static std::optional<KernelFeatures> cached;
    if (!cached) {
        KernelFeatures f;
        f.task_btf = map_type_supported(BPF_MAP_TYPE_TASK_STORAGE);
        f.ringbuf = map_type_supported(BPF_MAP_TYPE_RINGBUF);
        f.kernel_btf = access(kernel_btf_sysfs_path, R_OK) == 0;
        apply_disabled(f);
        // bpf_get_current_task_btf() returns a pointer only the kernel's own BTF types.
        if (!f.kernel_btf)
            f.task_btf = false;
        cached = f;
    }
    return *cached;
}

std::vector<std::string> KernelFeatures::describe() const {
    auto line = [](std::string_view what, bool have, std::string_view otherwise) {
        return have ? fmt::format("{}: yes", what)
                    : fmt::format("{}: no, using {}", what, otherwise);
    };
    return {
        line("bpf_get_current_task_btf() (5.11)", task_btf,
             "bpf_get_current_task() and CO-RE reads of the current task"),
        line("ring buffer (5.8)", ringbuf, "a perf buffer per CPU"),
        line("kernel BTF (/sys/kernel/btf/vmlinux)", kernel_btf,
             "another BTF for CO-RE; no tp_btf or fentry programs"),
    };
}

void size_thread_state_map(bpf_map *map, bpf_map *overflow, uint32_t max_entries) {
    if (const char *env = getenv("MEMLAT_THREAD_STATES")) {
        auto entries = parse_number<uint32_t>(env, "MEMLAT_THREAD_STATES");
        if (entries < 1 || entries > (1u << 20))
            throw UsageError(
                fmt::format("MEMLAT_THREAD_STATES must be 1 to {}, not {}", 1u << 20, entries));
        bpf_map__set_max_entries(map, entries);
        bpf_map__set_max_entries(overflow, entries);
        return;
    }
    if (max_entries > bpf_map__max_entries(map))
        bpf_map__set_max_entries(map, max_entries);
}

void use_events_map(bpf_map *map, const KernelFeatures &f) {
    if (f.ringbuf)
        return;
    bpf_map__set_type(map, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
    bpf_map__set_key_size(map, sizeof(uint32_t));
    bpf_map__set_value_size(map, sizeof(uint32_t));
    bpf_map__set_max_entries(map, static_cast<uint32_t>(possible_cpus()));
}

Probe thread_exit_probe() {
    return Probe{"sched:sched_process_exit (per-thread hash map clean-up)",
                 "It needs the sched:sched_process_exit tracepoint, which removes an exiting "
                 "thread's entry from the per-thread hash map.",
                 std::vector<HookChoice>{
                     {.kind = HookKind::RawTp, .programs = {"thread_exit_raw"}},
                     {.kind = HookKind::Tracepoint, .programs = {"thread_exit_tp"}},
                 }};
}

ThreadStateCount count_thread_state(bpf_map *map, bpf_map *overflow, uint64_t created,
                                    uint64_t removed_at_exit) {
    ThreadStateCount count{created, removed_at_exit, 0, 0, 0};
    for (bpf_map *m : {map, overflow}) {
        uint32_t key = 0, next = 0;
        const uint32_t *prev = nullptr;
        while (bpf_map__get_next_key(m, prev, &next, sizeof(next)) == 0) {
            ++count.left;
            count.left_in_overflow += m == overflow;
            // /proc/TID exists for every live thread, listed in /proc or not.
            struct stat st {};
            if (stat(fmt::format("/proc/{}", next).c_str(), &st) != 0)
                ++count.left_dead;
            key = next;
            prev = &key;
        }
    }
    return count;
}

void report_thread_state(const Verbosity &v, bpf_map *map, bpf_map *overflow, uint64_t created,
                         uint64_t removed_at_exit) {
    if (!v.on())
        return;
    auto c = count_thread_state(map, overflow, created, removed_at_exit);
    verbose(v, fmt::format("per-thread hash map {}: {} entries created, {} removed at thread "
                           "exit, {} left, {} of them of threads that no longer exist, {} evicted "
                           "(the map holds {} threads, its LRU overflow {}: {} left there)",
                           bpf_map__name(map), c.created, c.removed_at_exit, c.left, c.left_dead,
                           c.evicted(), bpf_map__max_entries(map), bpf_map__max_entries(overflow),
                           c.left_in_overflow));
}

void describe_features(const Verbosity &v, const KernelFeatures &f) {
    for (const auto &line : f.describe())
        verbose(v, line);
}

} // namespace memlat
