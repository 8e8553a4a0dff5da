// How chatty a tool is on stderr: -v prints each hook chosen and why the others were not,
// the kernel features and how events travel; -vv adds libbpf's own messages.
#pragma once

#include <string_view>

namespace memlat {

struct Verbosity {
    int level = 0;
    bool on() const { return level > 0; }
};

// Prints `line` on stderr when -v was given.
void verbose(const Verbosity &v, std::string_view line);

} // namespace memlat
