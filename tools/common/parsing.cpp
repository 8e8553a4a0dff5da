#include "parsing.h"

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
