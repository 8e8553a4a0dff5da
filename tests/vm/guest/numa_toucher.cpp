// The NUMA-balancing workload of the VM tests (guest only: it needs two NUMA nodes). It maps
// MiB of anonymous memory in base pages, touches every page from CPU A (so that the pages are
// allocated on A's node), then moves itself to CPU B and keeps writing every page for SECONDS:
// with kernel.numa_balancing=1 the kernel's NUMA hinting faults find the pages misplaced and
// migrate them to B's node (reason numa_misplaced).
//
//   numa_toucher [--mib N] [--from-cpu A] [--to-cpu B] [--seconds S]
// Prints "pid=PID iterations=PASSES pages=P before_on_to_node=X after_on_to_node=Y", the node
// placement read with move_pages(2) (query mode) before and after.
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "workload.h"

namespace {

using workload::Option;
using workload::pin_to;

int node_of_cpu(int cpu) {
    for (int node = 0; node < 64; ++node) {
        std::string path =
            "/sys/devices/system/node/node" + std::to_string(node) + "/cpu" + std::to_string(cpu);
        if (access(path.c_str(), F_OK) == 0)
            return node;
    }
    return -1;
}

// Pages of [p, p + size) that are on `node` (move_pages with nodes == NULL only queries).
long pages_on(char *p, size_t size, int node) {
    size_t n = size / 4096;
    std::vector<void *> pages(n);
    std::vector<int> status(n, -1);
    for (size_t i = 0; i < n; ++i)
        pages[i] = p + i * 4096;
    if (syscall(SYS_move_pages, 0, n, pages.data(), nullptr, status.data(), 0) != 0) {
        perror("move_pages");
        return -1;
    }
    long on = 0;
    for (int s : status)
        on += s == node;
    return on;
}

} // namespace

int main(int argc, char **argv) {
    size_t mib = 64;
    int from = 0, to = 1;
    double seconds = 10;
    workload::parse_options("numa_toucher", argc, argv,
                            {Option("--mib", mib), Option("--from-cpu", from),
                             Option("--to-cpu", to), Option("--seconds", seconds)});
    size_t size = mib << 20;
    auto *p = static_cast<char *>(
        mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    madvise(p, size, MADV_NOHUGEPAGE);
    pin_to(from);
    for (size_t off = 0; off < size; off += 4096)
        p[off] = 1;
    int to_node = node_of_cpu(to);
    long before = pages_on(p, size, to_node);
    pin_to(to);
    long passes = 0;
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
        for (size_t off = 0; off < size; off += 4096)
            p[off]++;
        ++passes;
    }
    long after = pages_on(p, size, to_node);
    printf("pid=%d iterations=%ld pages=%zu before_on_to_node=%ld after_on_to_node=%ld\n", getpid(),
           passes, size / 4096, before, after);
    return 0;
}
