#include "kernel_features.h"

#include <bpf/libbpf.h>
#include <unistd.h>

#include <cstdlib>
#include <fmt/format.h>
#include <optional>

#include "kernel_btf.h"

namespace memlat {

namespace {

// libbpf_probe_bpf_map_type() answers 1 (supported), 0 (not) or a negative errno (could not
// tell, e.g. no privileges); only a clear "not" turns a feature off.
bool map_type_supported(bpf_map_type type) {
    return libbpf_probe_bpf_map_type(type, nullptr) != 0;
}

void apply_disabled(KernelFeatures &f) {
    const char *env = getenv("MEMLAT_DISABLE_FEATURES");
    if (env == nullptr)
        return;
    std::string_view list(env);
    while (!list.empty()) {
        auto comma = list.find(',');
        auto token = list.substr(0, comma);
        if (token == "task_storage")
            f.task_storage = false;
        else if (token == "ringbuf")
            f.ringbuf = false;
        else if (token == "kernel_btf")
            f.kernel_btf = false;
        else if (!token.empty())
            throw UsageError(fmt::format("MEMLAT_DISABLE_FEATURES: unknown feature '{}' (known: "
                                         "{})",
                                         token, fmt::join(feature_names(), ", ")));
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    }
}

} // namespace

const std::vector<std::string_view> &feature_names() {
    static const std::vector<std::string_view> names{"task_storage", "ringbuf", "kernel_btf"};
    return names;
}

const KernelFeatures &kernel_features() {
    static std::optional<KernelFeatures> cached;
    if (!cached) {
        KernelFeatures f;
        f.task_storage = map_type_supported(BPF_MAP_TYPE_TASK_STORAGE);
        f.ringbuf = map_type_supported(BPF_MAP_TYPE_RINGBUF);
        f.kernel_btf = access(kernel_btf_sysfs_path, R_OK) == 0;
        apply_disabled(f);
        // bpf_task_storage_get() takes a task pointer that only the kernel's own BTF types.
        if (!f.kernel_btf)
            f.task_storage = false;
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
        line("task-local storage (5.11)", task_storage,
             "a hash map keyed by thread id, emptied on end and on thread exit"),
        line("ring buffer (5.8)", ringbuf, "a perf buffer per CPU"),
        line("kernel BTF (/sys/kernel/btf/vmlinux)", kernel_btf,
             "another BTF for CO-RE; no tp_btf or fentry programs"),
    };
}

} // namespace memlat
