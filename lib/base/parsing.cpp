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

} // namespace memlat
