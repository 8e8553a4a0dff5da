// The multi-call binary `memlat` (tools/memlat/main.cpp) holds every tool: each tools/NAME.cpp
// defines its entry, memlat_tool_NAME, and the build lists them all in tool_entries() (a
// source generated from the tools/*.cpp files, CMakeLists.txt), so a new tool joins by its
// file alone.
#pragma once

#include <span>

namespace memlat {

struct ToolEntry {
    const char *name;    // what `memlat NAME` and a link named NAME run
    const char *summary; // its line in `memlat -h`
    int (*main)(int argc, char **argv);
};

// Every tool of this build, in the order `memlat -h` lists them.
std::span<const ToolEntry *const> tool_entries();

} // namespace memlat
