// The NUMA-balancing workload of the numamove tests (machines with two NUMA nodes or more):
// memory first touched on one node is then used from a CPU of another node, so automatic NUMA
// balancing (kernel.numa_balancing=1) finds it misplaced and migrates it, page by page, from
// its hinting faults (reason numa_misplaced).
//
//   numa_misplacer --from-cpu A --to-cpu B [--mib N] [--seconds S]
//
// The main thread, pinned to CPU A, maps N MiB (default 128) of anonymous base pages
// (MADV_NOHUGEPAGE) and writes every page, so that the default policy places them on A's node;
// it then pins itself to CPU B and keeps reading and writing every page for S seconds
// (default 15): NUMA balancing needs a few scan periods (1 s or more each) and two faults from
// the same node before it migrates a page. It prints "pid=PID iterations=N" (passes over the
// memory) when done.
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "workload.h"

using workload::Option;
using workload::pin_to;

int main(int argc, char **argv) {
    int from = -1, to = -1;
    size_t mib = 128;
    double seconds = 15;
    workload::parse_options("numa_misplacer", argc, argv,
                            {Option("--from-cpu", from), Option("--to-cpu", to),
                             Option("--mib", mib), Option("--seconds", seconds)});
    if (from < 0 || to < 0) {
        std::fprintf(stderr, "usage: %s --from-cpu A --to-cpu B [--mib N] [--seconds S]\n",
                     argv[0]);
        return 2;
    }
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t size = mib << 20;
    pin_to(from);
    auto *base = static_cast<volatile unsigned char *>(
        mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    if (madvise(const_cast<unsigned char *>(base), size, MADV_NOHUGEPAGE) != 0) {
        perror("madvise");
        return 1;
    }
    for (size_t off = 0; off < size; off += page)
        base[off] = 1;

    pin_to(to);
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    unsigned long passes = 0;
    while (std::chrono::steady_clock::now() < end) {
        for (size_t off = 0; off < size; off += page)
            base[off] = static_cast<unsigned char>(base[off] + 1);
        ++passes;
    }
    munmap(const_cast<unsigned char *>(base), size);
    std::printf("pid=%d iterations=%lu\n", getpid(), passes);
    return 0;
}
