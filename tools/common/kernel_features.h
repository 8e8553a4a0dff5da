// (Named kernel_features.h: a features.h in the include path would hide glibc's.)
// Kernel features that a tool's BPF side can do without, detected once per run and shared by
// every part of the tool. Each has a fall-back on the BPF side, chosen through the read-only
// flags of bpf/compat.bpf.h (set_compat() below), and each can be forced off on a kernel that
// has it with MEMLAT_DISABLE_FEATURES=LIST, so the host tests cover the old kernels' paths.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bpf_runtime.h"

namespace memlat {

struct KernelFeatures {
    // BPF_MAP_TYPE_TASK_STORAGE and its helpers in tracing programs (Linux 5.11). Without it,
    // per-thread state lives in a hash map keyed by thread id, removed on end and thread exit.
    bool task_storage = true;
    // BPF_MAP_TYPE_RINGBUF (Linux 5.8). Without it, events go through a perf buffer.
    bool ringbuf = true;
    // The running kernel's own BTF (/sys/kernel/btf/vmlinux): tp_btf and fentry programs and
    // bpf_get_current_task_btf() need it. Without it, CO-RE relocates against another BTF
    // (embedded or --btf) and the programs use raw_tp/tracepoint/kprobe and
    // bpf_get_current_task() with CO-RE reads.
    bool kernel_btf = true;

    // One line per feature for -v: "ring buffer: yes" / "task storage: no (...), using ...".
    std::vector<std::string> describe() const;
};

// The names MEMLAT_DISABLE_FEATURES accepts: task_storage, ringbuf, kernel_btf.
const std::vector<std::string_view> &feature_names();

// Probes the running kernel once (later calls return the same answers) and applies
// MEMLAT_DISABLE_FEATURES; an unknown name there is a UsageError.
const KernelFeatures &kernel_features();

// Copies the features into the rodata flags every BPF object gets from bpf/compat.bpf.h.
template <typename Rodata>
void set_compat(Rodata &rodata, const KernelFeatures &f) {
    rodata.memlat_task_storage = f.task_storage;
    rodata.memlat_ringbuf = f.ringbuf;
    rodata.memlat_kernel_btf = f.kernel_btf;
}

} // namespace memlat
