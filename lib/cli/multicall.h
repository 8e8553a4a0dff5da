// The multi-call binary `memlat` (tools/main.cpp) holds every tool: each tools/NAME/NAME.cpp
// defines its entry, memlat_tool_NAME, and the build lists them all in tool_entries() (a
// source generated from the tool folders, CMakeLists.txt), so a new tool joins by its folder
// alone: a tracing tool, the live view (top) and the fleet mode (exporter) alike.
#pragma once

#include <memory>
#include <span>
#include <string_view>

namespace memlat {

class ExporterPart; // metrics_serving.h

// Where `memlat -h` lists an entry.
enum class ToolKind {
    Tracer,   // a tool that traces one concern (drsnoop, tlbflush, ...)
    LiveView, // memlat top
    Fleet,    // memlat exporter
};

struct ToolEntry {
    const char *name;    // what `memlat NAME` and a link named memlat-NAME run
    const char *summary; // its line in `memlat -h`
    int (*main)(int argc, char **argv);
    // Its counting side in `memlat exporter`, made anew for each run; null for an entry that
    // has none (top, the exporter itself).
    std::unique_ptr<ExporterPart> (*exporter_part)();
    ToolKind kind = ToolKind::Tracer;
};

// An entry of this build and the name of the link that runs it besides memlat-NAME: NAME
// for a tracing tool (as BCC's own binary), another (memtop: a bare top is procps's) or none,
// as its folder's tool.cmake says.
struct RegisteredTool {
    const ToolEntry *entry;
    std::string_view link;
};

// Every entry of this build, in the order of their folders' names.
std::span<const RegisteredTool> registered_tools();

// The entries alone, in the same order.
std::span<const ToolEntry *const> tool_entries();

} // namespace memlat
