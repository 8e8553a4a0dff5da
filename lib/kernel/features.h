// Kernel features that a tool's BPF side can do without, detected once per run and shared by
// every part of the tool. Each has a fall-back on the BPF side, chosen through the read-only
// flags of bpf/compat.bpf.h (set_compat() below), and each can be forced off on a kernel that
// has it with MEMLAT_DISABLE_FEATURES=LIST, so the host tests cover the old kernels' paths.
// Also the features a tool cannot do without: the floor (check_kernel_floor()).
#pragma once

#include <bpf/libbpf.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/verbosity.h"
#include "kernel/hooks.h"

namespace memlat {

// Where the running kernel publishes its own BTF.
inline constexpr const char *kernel_btf_sysfs_path = "/sys/kernel/btf/vmlinux";

// The oldest kernel memlat runs on is 5.5: the tools keep their counters in global variables
// (Linux 5.2) that they read through memory-mapped BPF arrays (BPF_F_MMAPABLE, 5.5). Probes
// both; empty when present (or when the probe cannot tell), else the missing feature.
std::string missing_floor_feature();
// Throws the one-line RuntimeError for a kernel below the floor; called before loading.
void check_kernel_floor();

struct KernelFeatures {
    // bpf_get_current_task_btf() (Linux 5.11), probed through BPF_MAP_TYPE_TASK_STORAGE in
    // tracing programs, which came with it (a helper cannot be probed for tracing programs
    // without attaching one): without it the BPF side reads the current task through helpers.
    // (Per-thread state is a hash map keyed by thread id on every kernel: bpf/compat.bpf.h,
    // thread_state(), says why; the tools use no task storage.)
    bool task_btf = true;
    // BPF_MAP_TYPE_RINGBUF (Linux 5.8). Without it, events go through a perf buffer.
    bool ringbuf = true;
    // The running kernel's own BTF (/sys/kernel/btf/vmlinux): tp_btf and fentry programs need
    // it, and bpf_get_current_task_btf() (which also needs 5.11). Without it,
    // CO-RE relocates against another BTF (embedded or --btf) and the programs use
    // raw_tp/tracepoint/kprobe and bpf_get_current_task() with CO-RE reads.
    bool kernel_btf = true;

    // One line per feature for -v: "ring buffer (5.8): yes" / "...: no, using ...".
    std::vector<std::string> describe() const;
};

// The names MEMLAT_DISABLE_FEATURES accepts: task_btf, ringbuf, kernel_btf (and task_storage,
// the name task_btf had before the tools stopped using task storage), uffd_wp_async (the
// binary's pages mapped 64 KiB at a time, as before Linux 6.7: tools/main.cpp), psi
// (memstall as on a kernel booted with PSI disabled: it ignores task_struct->in_memstall),
// kernel_log (as on a host whose log no longer holds the boot: the hypervisor is not read
// from it, kernel/hypervisor.h).
const std::vector<std::string_view> &feature_names();

// Whether MEMLAT_DISABLE_FEATURES names `name` (one a tool reads itself: uffd_wp_async, psi).
bool feature_forced_off(std::string_view name);

// Probes the running kernel once (later calls return the same answers) and applies
// MEMLAT_DISABLE_FEATURES; an unknown name there is a UsageError.
const KernelFeatures &kernel_features();

// Copies the features into the rodata flags every BPF object gets from bpf/compat.bpf.h.
template <typename Rodata>
void set_compat(Rodata &rodata, const KernelFeatures &f) {
    rodata.memlat_task_btf = f.task_btf;
    rodata.memlat_ringbuf = f.ringbuf;
    rodata.memlat_kernel_btf = f.kernel_btf;
}

// A per-thread state map (bpf/compat.bpf.h, thread_state()) keeps its declared size, or
// --max-entries when that is larger: a smaller table for the per-process rows must not leave
// threads to the overflow map. MEMLAT_THREAD_STATES=N in the environment sets both it and its
// LRU overflow map to N (1 to 2^20), smaller too: the tests fill them with few threads.
void size_thread_state_map(bpf_map *map, bpf_map *overflow, uint32_t max_entries);

// A map declared BPF_MAP_TYPE_RINGBUF becomes, on a kernel without ring buffers, a perf event
// array with one slot per possible CPU (compat.bpf.h's event_submit() writes to it so, and
// EventReader reads it). Call after the tool has sized the ring buffer.
void use_events_map(bpf_map *map, const KernelFeatures &f);

// sched:sched_process_exit, which removes an exiting thread's entries from the per-thread hash
// maps (on every kernel: the entries stay while their threads live). Every BPF object that
// keeps per-thread state has the programs thread_exit_raw and thread_exit_tp.
Probe thread_exit_probe();

// With -v: how many per-thread entries the BPF side created, how many
// the thread-exit program removed, and how many are left in `map` and its `overflow` map, of
// those how many belong to threads that no longer exist (a leak; there should be none). The
// rest the overflow LRU map evicted to make room for other threads (the kernel counts no
// evictions: this is the difference).
struct ThreadStateCount {
    uint64_t created = 0;
    uint64_t removed_at_exit = 0;
    uint64_t left = 0;
    uint64_t left_dead = 0;
    uint64_t left_in_overflow = 0;
    uint64_t evicted() const {
        return created > removed_at_exit + left ? created - removed_at_exit - left : 0;
    }
};
ThreadStateCount count_thread_state(bpf_map *map, bpf_map *overflow, uint64_t created,
                                    uint64_t removed_at_exit);
void report_thread_state(const Verbosity &v, bpf_map *map, bpf_map *overflow, uint64_t created,
                         uint64_t removed_at_exit);

// -v lines: the features, then how the tool's events travel.
void describe_features(const Verbosity &v, const KernelFeatures &f);

} // namespace memlat
