#include "base/verbosity.h"

#include <fmt/format.h>

namespace memlat {

void verbose(const Verbosity &v, std::string_view line) {
    if (v.on())
        fmt::print(stderr, "{}\n", line);
}

} // namespace memlat
