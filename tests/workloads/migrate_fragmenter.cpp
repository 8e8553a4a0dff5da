// The compaction workload of the numamove tests: fragments physical memory, optionally makes
// the kernel compact it (which migrates pages on this node, through the same tracepoints as
// NUMA balancing), checks that its data survived the migrations, and frees everything.
//
//   migrate_fragmenter [--mib N] [--compact [--rounds R] [--min-migrated P]] [--wait-stdin]
//
// Each round maps N MiB (default 128) of anonymous memory in base pages (MADV_NOHUGEPAGE),
// writes a pattern to every page, then frees every other page (MADV_DONTNEED): the freed pages
// are holes between pages still in use, which compaction fills by migrating pages in use.
// --compact then writes 1 to /proc/sys/vm/compact_memory (synchronous: compaction of every
// zone runs in this process and is over when the write returns). Where compaction's two
// scanners meet depends on where the zone's free memory is, so one round may move few pages;
// with --rounds R it fragments and compacts again (keeping the earlier regions) until
// pgmigrate_success in /proc/vmstat grew by P pages (--min-migrated) or R rounds ran.
// It prints "fragmented kept=K freed=F" (pages) and "compacted rounds=R migrated=M";
// --wait-stdin then waits for EOF on stdin. Finally it checks the pattern of every kept page,
// unmaps everything and prints "pid=PID iterations=ROUNDS". Exit status 1 on any error (a
// corrupted page included). With --stdin-rounds the same thread fragments and compacts once
// for every line on stdin (bench/'s steady state: a tool's per-thread state made once, then
// reused), checking and unmapping each region after its round, and prints
// "round migrated=M" after each, until EOF.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "workload.h"

namespace {

using workload::die;
using workload::Option;

// Maps `size` bytes of base pages, writes a pattern, frees every other page.
unsigned char *fragment(size_t size, size_t page, size_t &kept, size_t &freed) {
    auto *base = static_cast<unsigned char *>(
        mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base == MAP_FAILED)
        die("mmap");
    // Base pages only: a THP would be migrated whole and leave no holes when half freed.
    if (madvise(base, size, MADV_NOHUGEPAGE) != 0)
        die("madvise(MADV_NOHUGEPAGE)");
    const size_t pages = size / page;
    for (size_t i = 0; i < pages; ++i)
        std::memset(base + i * page, static_cast<int>(i * 7 + 1), page);
    for (size_t i = 1; i < pages; i += 2, ++freed)
        if (madvise(base + i * page, page, MADV_DONTNEED) != 0)
            die("madvise(MADV_DONTNEED)");
    kept += pages - pages / 2;
    return base;
}

bool intact(const unsigned char *base, size_t size, size_t page) {
    for (size_t i = 0; i < size / page; i += 2) {
        const unsigned char want = static_cast<unsigned char>(i * 7 + 1);
        const unsigned char *p = base + i * page;
        for (size_t off = 0; off < page; ++off)
            if (p[off] != want) {
                std::fprintf(stderr, "page %zu corrupted at offset %zu\n", i, off);
                return false;
            }
    }
    return true;
}

uint64_t pgmigrate_success() {
    char buf[1 << 16];
    int fd = open("/proc/vmstat", O_RDONLY);
    if (fd < 0)
        die("open /proc/vmstat");
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        die("read /proc/vmstat");
    buf[n] = '\0';
    const char *p = std::strstr(buf, "pgmigrate_success ");
    return p ? std::strtoull(p + std::strlen("pgmigrate_success "), nullptr, 10) : 0;
}

void compact_memory() {
    int fd = open("/proc/sys/vm/compact_memory", O_WRONLY);
    if (fd < 0)
        die("open /proc/sys/vm/compact_memory");
    if (write(fd, "1", 1) != 1)
        die("write /proc/sys/vm/compact_memory");
    close(fd);
}

} // namespace

int main(int argc, char **argv) {
    size_t mib = 128, rounds = 1, min_migrated = 0;
    bool compact = false, wait_stdin = false, stdin_rounds = false;
    workload::parse_options("migrate_fragmenter", argc, argv,
                            {Option("--mib", mib), Option("--compact", compact),
                             Option("--rounds", rounds), Option("--min-migrated", min_migrated),
                             Option("--wait-stdin", wait_stdin),
                             Option("--stdin-rounds", stdin_rounds)});
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t size = mib << 20;
    std::vector<unsigned char *> regions;
    size_t kept = 0, freed = 0, round = 0;
    if (stdin_rounds) {
        std::printf("ready\n");
        std::fflush(stdout);
        char line[64];
        while (std::fgets(line, sizeof(line), stdin) != nullptr) {
            const uint64_t start = pgmigrate_success();
            unsigned char *base = fragment(size, page, kept, freed);
            if (compact)
                compact_memory();
            if (!intact(base, size, page))
                return 1;
            munmap(base, size);
            std::printf("round migrated=%llu\n",
                        static_cast<unsigned long long>(pgmigrate_success() - start));
            std::fflush(stdout);
        }
        return 0;
    }
    const uint64_t before = pgmigrate_success();
    uint64_t migrated = 0;
    do {
        regions.push_back(fragment(size, page, kept, freed));
        if (!compact)
            break;
        compact_memory();
        migrated = pgmigrate_success() - before;
        ++round;
    } while (round < rounds && migrated < min_migrated);
    std::printf("fragmented kept=%zu freed=%zu\n", kept, freed);
    if (compact)
        std::printf("compacted rounds=%zu migrated=%llu\n", round,
                    static_cast<unsigned long long>(migrated));
    std::fflush(stdout);
    if (wait_stdin) {
        char buf[64];
        while (read(STDIN_FILENO, buf, sizeof(buf)) > 0) {
        }
    }
    for (auto *base : regions) {
        if (!intact(base, size, page))
            return 1;
        munmap(base, size);
    }
    std::printf("pid=%d iterations=%zu\n", getpid(), round);
    return 0;
}
