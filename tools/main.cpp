// memlat: every tool in one static binary. `memlat TOOL ARGS...` runs a tool; so does
// `TOOL ARGS...` through a link (symbolic or hard) named after it, exactly as a binary of its
// own would: same options, output and exit statuses. A link named memlat-TOOL does the same:
// the Debian package installs those, since Debian's libbpf-tools owns /usr/sbin/drsnoop,
// cachestat and numamove (docs/building.md, "Installing"). `memlat exporter` serves every tool's
// counters to Prometheus from one process; `memlat top` (or a link named memtop) is the live
// view of memory stalls per cgroup. Each is an entry of the registry (cli/multicall.h), listed
// by the build from the folders of tools/: nothing here names one.
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <malloc.h>
#include <string_view>
#include <utility>

#include "base/binary_pages.h"
#include "cli/multicall.h"

namespace {

using memlat::RegisteredTool;
using memlat::ToolEntry;
using memlat::ToolKind;

// The entry that `memlat NAME` runs.
const ToolEntry *find_tool(std::string_view name) {
    for (const ToolEntry *tool : memlat::tool_entries())
        if (name == tool->name)
            return tool;
    return nullptr;
}

// The entry a link named `invoked` runs: its own link's name, or memlat-NAME.
const ToolEntry *linked_tool(std::string_view invoked) {
    for (const RegisteredTool &tool : memlat::registered_tools())
        if (!tool.link.empty() && invoked == tool.link)
            return tool.entry;
    constexpr std::string_view prefix = "memlat-";
    return invoked.starts_with(prefix) ? find_tool(invoked.substr(prefix.size())) : nullptr;
}

void usage(FILE *out) {
    fmt::print(out, "Usage: memlat TOOL [OPTION...]\n"
                    "   or: TOOL [OPTION...]  (through a link named TOOL or memlat-TOOL)\n"
                    "Where Linux memory management stalls programs, traced with BPF.\n");
    constexpr std::pair<ToolKind, const char *> sections[] = {{ToolKind::Tracer, "Tools"},
                                                              {ToolKind::LiveView, "Live view"},
                                                              {ToolKind::Fleet, "Fleet mode"}};
    for (const auto &[kind, title] : sections) {
        fmt::print(out, "\n{}:\n", title);
        for (const ToolEntry *tool : memlat::tool_entries())
            if (tool->kind == kind)
                fmt::print(out, "  {:<14}{}\n", tool->name, tool->summary);
    }
    fmt::print(out, "\n'memlat TOOL -h' shows a tool's options.\n"
                    "  -h, --help     Show this list and exit\n"
                    "  -V, --version  Print the version and exit\n");
}

} // namespace

int main(int argc, char **argv) {
    memlat::map_binary_pages_singly();
    // Blocks of 16 KiB and more are mapped on their own and go back to the system when freed.
    // With glibc's defaults (128 KiB, then adaptive) the steps by which libbpf's index of the
    // kernel BTF grows while the tool loads (19 KB to 117 KB, then 550 KB) stayed in the heap
    // after it was freed: 200-300 KiB of every tool's RSS, at its peak too.
    mallopt(M_MMAP_THRESHOLD, 16 * 1024);
    mallopt(M_TRIM_THRESHOLD, 64 * 1024);
    // A link named after a tool runs that tool.
    const char *slash = argc > 0 ? strrchr(argv[0], '/') : nullptr;
    const std::string_view invoked = argc > 0 ? (slash ? slash + 1 : argv[0]) : "memlat";
    if (const ToolEntry *tool = linked_tool(invoked))
        return tool->main(argc, argv);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const std::string_view first = argv[1];
    if (first == "-h" || first == "--help") {
        usage(stdout);
        return 0;
    }
    if (first == "-V" || first == "--version") {
        fmt::print("memlat {}\n", MEMLAT_VERSION);
        return 0;
    }
    if (const ToolEntry *tool = find_tool(first))
        return tool->main(argc - 1, argv + 1);
    std::string names;
    for (const ToolEntry *tool : memlat::tool_entries())
        names += (names.empty() ? "" : ", ") + std::string(tool->name);
    fmt::print(
        stderr,
        "memlat: no tool named '{}'; the tools are: {}\nRun 'memlat -h' for what each does.\n",
        first, names);
    return 2;
}
