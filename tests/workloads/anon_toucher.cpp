// Anonymous memory, touched page by page, for memstall's memory.high and swap-in scenarios
// (VM, cgroup v2): optionally first moves itself into a cgroup, then maps MIB MiB of private
// anonymous memory and writes one byte per page, PASSES times over (default 1). Over the
// cgroup's memory.high (and without swap to reclaim it to) each return to user space is
// throttled; over its memory.max with swap, the second and later passes swap pages back in.
//
//   anon_toucher --mb MIB [--cgroup DIR] [--passes PASSES] [--hold FILE] [--linger]
//                [--bind-node NODE] [--start FIFO]
// With --hold it prints "first pass done" after the first pass and waits until FILE exists
// (a test then changes the cgroup's limit, or reads the delay accounting in between). Prints
// "pid=PID iterations=PASSES" when done; with --linger it then waits to be killed, so that its
// delay accounting can still be read. With --bind-node its memory policy binds it to NODE
// (set_mempolicy MPOL_BIND), as `numactl --membind` would: more than the node holds then
// ends in an OOM kill the kernel calls CONSTRAINT_MEMORY_POLICY (oomwhy's VM test). With
// --start it first waits, before joining the cgroup, until the named pipe FIFO is opened for
// writing: many touchers started ahead then allocate at once (oomwhy's storm of kills).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "workload.h"

using workload::Option;

int main(int argc, char **argv) {
    long mb = 0, passes = 1, bind_node = -1;
    bool linger = false;
    std::string cgroup, hold, start;
    workload::parse_options("anon_toucher", argc, argv,
                            {Option("--mb", mb), Option("--cgroup", cgroup),
                             Option("--passes", passes), Option("--hold", hold),
                             Option("--linger", linger), Option("--bind-node", bind_node),
                             Option("--start", start)});
    if (mb <= 0 || passes <= 0) {
        fprintf(stderr, "anon_toucher: --mb MIB (positive) is required, --passes positive\n");
        return 2;
    }
    if (!start.empty()) {
        // Blocks until a writer opens the pipe: every waiter is released by the one open.
        const int fd = open(start.c_str(), O_RDONLY);
        if (fd < 0) {
            perror(start.c_str());
            return 1;
        }
        close(fd);
    }
    if (!cgroup.empty()) {
        std::string procs = cgroup + "/cgroup.procs";
        FILE *f = fopen(procs.c_str(), "w");
        if (f == nullptr || fprintf(f, "%d\n", getpid()) < 0 || fclose(f) != 0) {
            perror(procs.c_str());
            return 1;
        }
    }
    if (bind_node >= 0) {
        constexpr int mpol_bind = 2; // MPOL_BIND (linux/mempolicy.h)
        unsigned long mask = 1UL << bind_node;
        if (bind_node >= 64 ||
            syscall(SYS_set_mempolicy, mpol_bind, &mask, sizeof(mask) * 8) != 0) {
            perror("set_mempolicy");
            return 1;
        }
    }
    size_t bytes = static_cast<size_t>(mb) << 20;
    auto *p = static_cast<volatile char *>(
        mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    for (long pass = 0; pass < passes; ++pass) {
        for (size_t off = 0; off < bytes; off += 4096)
            p[off] = static_cast<char>(pass + 1);
        if (pass == 0 && !hold.empty()) {
            printf("first pass done\n");
            fflush(stdout);
            struct stat st;
            while (stat(hold.c_str(), &st) != 0)
                usleep(10000);
        }
    }
    printf("pid=%d iterations=%ld\n", getpid(), passes);
    fflush(stdout);
    while (linger)
        pause();
    return 0;
}
