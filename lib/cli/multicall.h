// The multi-call binary `memlat` (tools/memlat/main.cpp) holds every tool: each tools/NAME.cpp
// defines its entry, memlat_tool_NAME, and the build lists them all in tool_entries() (a
// source generated from the tools/*.cpp files, CMakeLists.txt), so a new tool joins by its
// file alone.
#pragma once

#include <memory>
#include <span>

namespace memlat {

class ExporterPart; // metrics_serving.h

struct ToolEntry {
    const char *name;    // what `memlat NAME` and a link named NAME run
    const char *summary; // its line in `memlat -h`
    int (*main)(int argc, char **argv);
    // Its counting side in `memlat exporter`, made anew for each run.
    std::unique_ptr<ExporterPart> (*exporter_part)();
};

// Every tool of this build, in the order `memlat -h` lists them.
std::span<const ToolEntry *const> tool_entries();

// `memlat exporter ARGS` (tools/memlat/exporter.cpp): every tool's counting side on one port.
int exporter_main(int argc, char **argv);

// `memlat top ARGS` (tools/memlat/top.cpp): the live view of memory stalls per cgroup.
int top_main(int argc, char **argv);

} // namespace memlat
