#include "loading/kernel_functions.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <memory>

#include "loading/kernel_function_query.h"
#include "loading/loader.h"

// After the query's struct, which the skeleton's global data holds.
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

namespace {

// The lookup program, loaded for as long as the caller holds it (nullptr where the kernel
// refuses it): nothing of it outlives the question but for the stack views, which keep it.
std::shared_ptr<kernel_functions_bpf> lookup_program() {
    // A kernel before 5.16 refuses the program, and libbpf would say so on stderr: nothing
    // the user needs, as the tool then reads /proc/kallsyms.
    const libbpf_print_fn_t previous = libbpf_set_print(nullptr);
    std::shared_ptr<kernel_functions_bpf> skel(kernel_functions_bpf__open(),
                                               kernel_functions_bpf__destroy);
    release_unpacked_bpf_object();
    if (skel && kernel_functions_bpf__load(skel.get()) != 0)
        skel.reset();
    libbpf_set_print(previous);
    return skel;
}

// Runs the queries (at most KERNEL_FUNCTIONS_MAX), each a name or an address; false when the
// kernel cannot.
bool run_queries(kernel_functions_bpf *skel, const std::vector<kernel_function_query> &in,
                 std::vector<kernel_function_query> &out) {
    auto *bss = skel->bss;
    std::memset(bss->queries, 0, sizeof(bss->queries));
    std::copy(in.begin(), in.end(), bss->queries);
    bss->query_count = static_cast<uint32_t>(in.size());
    LIBBPF_OPTS(bpf_test_run_opts, run);
    if (bpf_prog_test_run_opts(bpf_program__fd(skel->progs.find_functions), &run) != 0)
        return false;
    out.assign(bss->queries, bss->queries + in.size());
    return true;
}

std::string_view described(const kernel_function_query &q) {
    return {q.described, strnlen(q.described, sizeof(q.described))};
}

} // namespace

std::optional<std::vector<KernelFunction>>
find_kernel_functions(const std::vector<std::string> &names) {
    for (const auto &name : names)
        if (name.empty() || name.size() >= KERNEL_FUNCTION_NAME_LEN)
            return std::nullopt;
    const auto skel = lookup_program();
    if (skel == nullptr)
        return std::nullopt;
    std::vector<KernelFunction> found;
    std::vector<kernel_function_query> queries, answers;
    for (size_t first = 0; first < names.size(); first += KERNEL_FUNCTIONS_MAX) {
        const size_t count = std::min<size_t>(KERNEL_FUNCTIONS_MAX, names.size() - first);
        queries.assign(count, kernel_function_query{});
        for (size_t i = 0; i < count; ++i)
            std::memcpy(queries[i].name, names[first + i].data(), names[first + i].size());
        if (!run_queries(skel.get(), queries, answers))
            return std::nullopt;
        for (size_t i = 0; i < count; ++i) {
            const auto &q = answers[i];
            KernelFunction f{names[first + i]};
            if (q.err == -EPERM || (q.err != 0 && q.err != -ENOENT))
                return std::nullopt; // hidden addresses, or an answer not understood
            if (q.err == 0) {
                f.address = q.address;
                f.size = size_from_described(described(q), f.name).value_or(0);
                static_assert(sizeof(q.code) == std::tuple_size_v<decltype(f.code)>);
                std::copy(std::begin(q.code), std::end(q.code), f.code.begin());
            }
            found.push_back(std::move(f));
        }
    }
    return found;
}

std::shared_ptr<KernelDescriber> KernelDescriber::load() {
    auto skel = lookup_program();
    if (skel == nullptr)
        return nullptr;
    auto describer = std::make_shared<KernelDescriber>();
    describer->program_ = std::move(skel);
    return describer;
}

const bpf_object *KernelDescriber::object() const {
    return program_->obj;
}

std::optional<std::vector<std::string>>
KernelDescriber::describe(std::span<const uint64_t> ips) const {
    kernel_functions_bpf *skel = program_.get();
    std::vector<std::string> texts;
    std::vector<kernel_function_query> queries, answers;
    for (size_t first = 0; first < ips.size(); first += KERNEL_FUNCTIONS_MAX) {
        const size_t count = std::min<size_t>(KERNEL_FUNCTIONS_MAX, ips.size() - first);
        queries.assign(count, kernel_function_query{});
        for (size_t i = 0; i < count; ++i)
            queries[i].address = ips[first + i];
        if (!run_queries(skel, queries, answers))
            return std::nullopt;
        for (const auto &q : answers)
            texts.push_back(without_size(described(q)));
    }
    return texts;
}

std::string without_size(std::string_view described) {
    // "name+0xoff/0xsize [module]" -> "name+0xoff [module]"; a bare "0x..." stays.
    const size_t plus = described.find('+');
    const size_t slash = described.find('/', plus == std::string_view::npos ? 0 : plus);
    if (plus == std::string_view::npos || slash == std::string_view::npos)
        return std::string(described);
    const size_t end = described.find(' ', slash);
    std::string text(described.substr(0, slash));
    if (end != std::string_view::npos)
        text += described.substr(end);
    return text;
}

} // namespace memlat
