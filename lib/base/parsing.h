// The small languages of options and of the environment: numbers, comma lists.
#pragma once

#include <charconv>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "base/errors.h"

namespace memlat {

// "12", "0.5": a number for option `what`, or a UsageError that names the option and the text.
template <typename Number>
Number parse_number(std::string_view text, std::string_view what) {
    Number value{};
    const char *end = text.data() + text.size();
    auto r = std::from_chars(text.data(), end, value);
    if (text.empty() || r.ec != std::errc{} || r.ptr != end)
        throw UsageError(fmt::format("{} takes a number, not '{}'", what, text));
    return value;
}

// "a,b,c" -> {"a", "b", "c"}; empty items are a UsageError naming `what`.
std::vector<std::string> split_list(std::string_view list, std::string_view what);

// "direct,memcg": the kinds named in `list` as a mask (bit k for kind k), where `name_of(k)` is
// the name of kind k < `count`. An unknown name is a UsageError naming `what` ("reclaim kind")
// and listing the kinds.
uint32_t parse_kind_list(std::string_view list, uint32_t count,
                         const std::function<std::string_view(uint32_t)> &name_of,
                         std::string_view what);

// The comma-separated names in environment variable `name` (MEMLAT_DISABLE_HOOKS,
// MEMLAT_DISABLE_FEATURES), empty items skipped; nothing when it is not set.
std::vector<std::string> environment_list(const char *name);

// "11", "0,2-5": the selected CPUs as a mask of `ncpus` entries. Throws UsageError naming the
// bad part (not a number, reversed range, CPU beyond the machine's).
std::vector<bool> parse_cpu_list(std::string_view list, int ncpus);

} // namespace memlat
