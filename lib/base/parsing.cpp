#include "base/parsing.h"

#include <cstdlib>

namespace memlat {

std::vector<std::string> split_list(std::string_view list, std::string_view what) {
    std::vector<std::string> items;
    while (true) {
        auto comma = list.find(',');
        auto item = list.substr(0, comma);
        if (item.empty())
            throw UsageError(fmt::format("empty item in {} '{}'", what, list));
        items.emplace_back(item);
        if (comma == std::string_view::npos)
            return items;
        list.remove_prefix(comma + 1);
    }
}

uint32_t parse_kind_list(std::string_view list, uint32_t count,
                         const std::function<std::string_view(uint32_t)> &name_of,
                         std::string_view what) {
    uint32_t mask = 0;
    for (const auto &name : split_list(list, "kind list")) {
        uint32_t kind = 0;
        while (kind < count && name != name_of(kind))
            ++kind;
        if (kind == count) {
            std::string kinds;
            for (uint32_t k = 0; k < count; ++k)
                kinds += fmt::format("{}{}", k == 0 ? "" : ", ", name_of(k));
            throw UsageError(fmt::format("unknown {} '{}'; the kinds are {}", what, name, kinds));
        }
        mask |= 1u << kind;
    }
    return mask;
}

std::vector<std::string> environment_list(const char *name) {
    std::vector<std::string> items;
    const char *env = getenv(name);
    if (env == nullptr)
        return items;
    std::string_view list(env);
    while (!list.empty()) {
        auto comma = list.find(',');
        if (auto item = list.substr(0, comma); !item.empty())
            items.emplace_back(item);
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    }
    return items;
}

namespace {

int parse_cpu(std::string_view text, std::string_view list, int ncpus) {
    int cpu = -1;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), cpu);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || cpu < 0)
        throw UsageError(fmt::format("'{}' in CPU list '{}' is not a CPU number", text, list));
    if (cpu >= ncpus)
        throw UsageError(fmt::format("CPU {} in '{}' does not exist: this machine has CPUs 0-{}",
                                     cpu, list, ncpus - 1));
    return cpu;
}

} // namespace

std::vector<bool> parse_cpu_list(std::string_view list, int ncpus) {
    if (list.starts_with('-'))
        throw UsageError(fmt::format("'{}' is not a CPU list (e.g. 11 or 0,2-5); did an option "
                                     "take the place of the list?",
                                     list));
    std::vector<bool> mask(ncpus, false);
    for (const auto &item : split_list(list, "CPU list")) {
        std::string_view range(item);
        auto dash = range.find('-');
        int first = parse_cpu(range.substr(0, dash), list, ncpus);
        int last =
            dash == std::string_view::npos ? first : parse_cpu(range.substr(dash + 1), list, ncpus);
        if (last < first)
            throw UsageError(fmt::format("range '{}' in CPU list '{}' runs backwards", item, list));
        for (int cpu = first; cpu <= last; ++cpu)
            mask[cpu] = true;
    }
    return mask;
}

} // namespace memlat
