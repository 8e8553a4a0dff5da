// The workload of the compactsnoop tests: fragments physical memory, then optionally asks for
// transparent huge pages, which the kernel may have to compact memory for.
//
//   compact_fragmenter [--mib N] [--thp-mib M] [--linger S]
//
// It maps N MiB of anonymous memory without huge pages, touches every page, then gives every
// other 4 KiB page back (MADV_DONTNEED): the kept pages pin the memory in a checkerboard, so
// the free pages they leave are order-0 holes that only compaction can merge. With --thp-mib
// it then faults M MiB of MADV_HUGEPAGE memory, one touch per 2 MiB, and reports how much of
// it became huge pages. It prints "pid=PID iterations=HOLES thp_kb=K" and keeps its memory for
// --linger seconds (default: until killed), so a test can compact while the holes exist.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "workload.h"

namespace {

using workload::die;
using workload::Option;

constexpr size_t page = 4096;
constexpr size_t huge = 2u << 20;

// AnonHugePages of this process, in KiB.
long anon_huge_kb() {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (f == nullptr)
        return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof(line), f) != nullptr)
        if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

} // namespace

int main(int argc, char **argv) {
    size_t mib = 256, thp_mib = 0;
    double linger = -1;
    workload::parse_options(
        "compact_fragmenter", argc, argv,
        {Option("--mib", mib), Option("--thp-mib", thp_mib), Option("--linger", linger)});

    const size_t size = mib << 20;
    auto *p = static_cast<char *>(
        mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED)
        die("mmap");
    if (madvise(p, size, MADV_NOHUGEPAGE) != 0)
        die("madvise(MADV_NOHUGEPAGE)");
    for (size_t off = 0; off < size; off += page)
        p[off] = 1;
    size_t holes = 0;
    for (size_t off = page; off < size; off += 2 * page) {
        if (madvise(p + off, page, MADV_DONTNEED) != 0)
            die("madvise(MADV_DONTNEED)");
        ++holes;
    }

    long thp_kb = 0;
    if (thp_mib > 0) {
        const size_t thp_size = thp_mib << 20;
        auto *raw = static_cast<char *>(mmap(nullptr, thp_size + huge, PROT_READ | PROT_WRITE,
                                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        if (raw == MAP_FAILED)
            die("mmap (THP)");
        char *t = reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(raw) + huge - 1) &
                                           ~(uintptr_t)(huge - 1));
        if (madvise(t, thp_size, MADV_HUGEPAGE) != 0)
            die("madvise(MADV_HUGEPAGE)");
        for (size_t off = 0; off < thp_size; off += huge)
            t[off] = 1;
        thp_kb = anon_huge_kb();
    }

    printf("pid=%d iterations=%zu thp_kb=%ld\n", getpid(), holes, thp_kb);
    fflush(stdout);
    if (linger < 0)
        for (;;)
            pause();
    usleep(static_cast<useconds_t>(linger * 1e6));
    return 0;
}
