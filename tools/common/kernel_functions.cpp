#include "kernel_functions.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <memory>

#include "kernel_function_query.h"
#include "kernel_functions.skel.h"

namespace memlat {

std::optional<uint64_t> size_from_described(std::string_view described, std::string_view name) {
    // "folio_wait_bit_common+0x0/0x2f0", with " [module]" after it for a module's function.
    if (!described.starts_with(name))
        return std::nullopt;
    described.remove_prefix(name.size());
    constexpr std::string_view at_start = "+0x0/0x";
    if (!described.starts_with(at_start))
        return std::nullopt;
    described.remove_prefix(at_start.size());
    uint64_t size = 0;
    const auto [end, err] =
        std::from_chars(described.data(), described.data() + described.size(), size, 16);
    if (err != std::errc() || end == described.data() || size == 0)
        return std::nullopt;
    return size;
}

std::optional<std::vector<KernelFunction>>
find_kernel_functions(const std::vector<std::string> &names) {
    for (const auto &name : names)
        if (name.empty() || name.size() >= KERNEL_FUNCTION_NAME_LEN)
            return std::nullopt;
    // A kernel before 5.16 refuses the program, and libbpf would say so on stderr: nothing the
    // user needs, as the tool then reads /proc/kallsyms.
    const libbpf_print_fn_t previous = libbpf_set_print(nullptr);
    std::unique_ptr<kernel_functions_bpf, decltype(&kernel_functions_bpf__destroy)> skel(
        kernel_functions_bpf__open(), kernel_functions_bpf__destroy);
    const bool loaded = skel && kernel_functions_bpf__load(skel.get()) == 0;
    libbpf_set_print(previous);
    if (!loaded)
        return std::nullopt;
    std::vector<KernelFunction> found;
    for (size_t first = 0; first < names.size(); first += KERNEL_FUNCTIONS_MAX) {
        const size_t count = std::min<size_t>(KERNEL_FUNCTIONS_MAX, names.size() - first);
        auto *bss = skel->bss;
        std::memset(bss->queries, 0, sizeof(bss->queries));
        for (size_t i = 0; i < count; ++i)
            std::memcpy(bss->queries[i].name, names[first + i].data(), names[first + i].size());
        bss->query_count = static_cast<uint32_t>(count);
        LIBBPF_OPTS(bpf_test_run_opts, run);
        if (bpf_prog_test_run_opts(bpf_program__fd(skel->progs.find_functions), &run) != 0)
            return std::nullopt;
        for (size_t i = 0; i < count; ++i) {
            const auto &q = bss->queries[i];
            KernelFunction f{names[first + i]};
            if (q.err == -EPERM || (q.err != 0 && q.err != -ENOENT))
                return std::nullopt; // hidden addresses, or an answer not understood
            if (q.err == 0) {
                f.address = q.address;
                const std::string_view described(q.described,
                                                 strnlen(q.described, sizeof(q.described)));
                f.size = size_from_described(described, f.name).value_or(0);
            }
            found.push_back(std::move(f));
        }
    }
    return found;
}

} // namespace memlat
