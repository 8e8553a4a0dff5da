// memlat: every tool in one static binary. `memlat TOOL ARGS...` runs a tool; so does
// `TOOL ARGS...` through a link (symbolic or hard) named after it, exactly as a binary of its
// own would: same options, output and exit statuses. A link named memlat-TOOL does the same:
// the Debian package installs those, since Debian's libbpf-tools owns /usr/sbin/drsnoop,
// cachestat and numamove (docs/building.md, "Installing"). `memlat exporter` serves every tool's
// counters to Prometheus from one process; `memlat top` (or a link named memtop) is the live
// view of memory stalls per cgroup.
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <link.h>
#include <linux/userfaultfd.h>
#include <malloc.h>
#include <string_view>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/parsing.h"
#include "cli/multicall.h"

namespace {

using memlat::ToolEntry;

const ToolEntry *find_tool(std::string_view name) {
    for (const ToolEntry *tool : memlat::tool_entries())
        if (name == tool->name)
            return tool;
    return nullptr;
}

// Linux 6.7's UFFD_FEATURE_WP_ASYNC and 5.11's UFFD_USER_MODE_ONLY, for older headers.
constexpr uint64_t uffd_feature_wp_async = uint64_t{1} << 15;
constexpr int uffd_user_mode_only = 1;

// Registers the binary's read-only segments (code and read-only data) with `uffd` for
// write-protect tracking, then drops the pages mapped so far, which come back one by one as
// they are used.
int register_read_only_segments(dl_phdr_info *info, size_t, void *uffd) {
    const uintptr_t page = static_cast<uintptr_t>(getpagesize());
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) &segment = info->dlpi_phdr[i];
        if (segment.p_type != PT_LOAD || (segment.p_flags & PF_W) != 0)
            continue;
        const uintptr_t start = (info->dlpi_addr + segment.p_vaddr) & ~(page - 1);
        const uintptr_t end =
            (info->dlpi_addr + segment.p_vaddr + segment.p_memsz + page - 1) & ~(page - 1);
        uffdio_register range{};
        range.range.start = start;
        range.range.len = end - start;
        range.mode = UFFDIO_REGISTER_MODE_WP;
        // Never written (no PF_W), so dropping them loses nothing: a later read maps the same
        // page of the file again.
        if (ioctl(*static_cast<int *>(uffd), UFFDIO_REGISTER, &range) == 0)
            madvise(reinterpret_cast<void *>(start), end - start, MADV_DONTNEED);
    }
    return 1; // the first object is the program itself
}

// The kernel maps a file's pages 64 KiB around each page a process faults on (fault-around),
// so a tool had the whole neighbourhood of every page of the binary it ran counted in its RSS:
// drsnoop 1.5 MiB of the binary's pages, of which it touches 0.6. Fault-around is skipped for
// a range registered with userfaultfd in write-protect mode (mm/memory.c,
// uffd_disable_fault_around()), which Linux 6.7 and later allow on any file mapping in
// asynchronous mode (UFFD_FEATURE_WP_ASYNC: the kernel resolves write faults itself; the
// segments are never written anyway). The registration lasts as long as the descriptor,
// which stays open for the life of the process (close-on-exec). Where the kernel refuses
// (older than 6.7, userfaultfd forbidden by seccomp or vm.unprivileged_userfaultfd), nothing
// changes (MEMLAT_DISABLE_FEATURES=uffd_wp_async plays such a kernel, for A/B measurements).
// Costs ~150 more minor faults at start-up: 0-0.25 ms more CPU to ready (bench/README.md).
void map_binary_pages_singly() {
    for (const std::string &feature : memlat::environment_list("MEMLAT_DISABLE_FEATURES"))
        if (feature == "uffd_wp_async")
            return;
    int uffd =
        static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | uffd_user_mode_only));
    if (uffd < 0 && errno == EINVAL) // before 5.11
        uffd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
    if (uffd < 0)
        return;
    if (uffd <= STDERR_FILENO) {
        // Started with stdin, stdout or stderr closed: keep those numbers free, or the tool's
        // output would go to this descriptor.
        const int moved = fcntl(uffd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
        close(uffd);
        if (moved < 0)
            return;
        uffd = moved;
    }
    uffdio_api api{};
    api.api = UFFD_API;
    api.features = uffd_feature_wp_async;
    if (ioctl(uffd, UFFDIO_API, &api) != 0) {
        close(uffd);
        return;
    }
    dl_iterate_phdr(register_read_only_segments, &uffd);
}

void usage(FILE *out) {
    fmt::print(out, "Usage: memlat TOOL [OPTION...]\n"
                    "   or: TOOL [OPTION...]  (through a link named TOOL or memlat-TOOL)\n"
                    "Where Linux memory management stalls programs, traced with BPF.\n\n"
                    "Tools:\n");
    for (const ToolEntry *tool : memlat::tool_entries())
        fmt::print(out, "  {:<14}{}\n", tool->name, tool->summary);
    fmt::print(out, "\nLive view:\n  {:<14}{}\n", "top",
               "which memory cgroups stall now, by what, with their memory and limits");
    fmt::print(out, "\nFleet mode:\n  {:<14}{}\n", "exporter",
               "every tool's counters and histograms for Prometheus, one process, one port");
    fmt::print(out, "\n'memlat TOOL -h' shows a tool's options.\n"
                    "  -h, --help     Show this list and exit\n"
                    "  -V, --version  Print the version and exit\n");
}

} // namespace

int main(int argc, char **argv) {
    map_binary_pages_singly();
    // Blocks of 16 KiB and more are mapped on their own and go back to the system when freed.
    // With glibc's defaults (128 KiB, then adaptive) the steps by which libbpf's index of the
    // kernel BTF grows while the tool loads (19 KB to 117 KB, then 550 KB) stayed in the heap
    // after it was freed: 200-300 KiB of every tool's RSS, at its peak too.
    mallopt(M_MMAP_THRESHOLD, 16 * 1024);
    mallopt(M_TRIM_THRESHOLD, 64 * 1024);
    // A link named after a tool runs that tool.
    const char *slash = argc > 0 ? strrchr(argv[0], '/') : nullptr;
    const std::string_view invoked = argc > 0 ? (slash ? slash + 1 : argv[0]) : "memlat";
    std::string_view linked = invoked;
    if (linked.starts_with("memlat-"))
        linked.remove_prefix(std::string_view("memlat-").size());
    if (const ToolEntry *tool = find_tool(linked))
        return tool->main(argc, argv);
    // memtop (the build's and a local install's link) or memlat-top (the Debian package's,
    // named as its tools are); never a bare "top", which is procps's.
    if (linked == "memtop" || invoked == "memlat-top")
        return memlat::top_main(argc, argv);
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
    if (first == "exporter")
        return memlat::exporter_main(argc - 1, argv + 1);
    if (first == "top")
        return memlat::top_main(argc - 1, argv + 1);
    std::string names;
    for (const ToolEntry *tool : memlat::tool_entries())
        names += (names.empty() ? "" : ", ") + std::string(tool->name);
    fmt::print(
        stderr,
        "memlat: no tool named '{}'; the tools are: {}\nRun 'memlat -h' for what each does.\n",
        first, names);
    return 2;
}
