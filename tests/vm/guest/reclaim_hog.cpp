// Global direct reclaim on demand, for the VM tests. kswapd of a node runs only on that node's
// CPUs; this process binds its memory to one node, pins itself to that node's CPU and runs
// SCHED_FIFO there, so kswapd barely runs (RT throttling leaves it 5%) while the process
// allocates past the node's free memory: the allocations must reclaim the node's page cache
// themselves. First it fills the node's page cache by reading FILL.
//
//   reclaim_hog --node N --cpu C --fill PATH --fill-mb F --mb M [--linger]
// Prints "pid=PID iterations=M" when done (M MiB touched); with --linger it then waits to be
// killed (keeping its memory), so that its delay accounting can still be read.
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "workload.h"

using workload::die;
using workload::Option;
using workload::pin_to;

int main(int argc, char **argv) {
    int node = 0, cpu = 0;
    long fill_mb = 0, mb = 0;
    bool linger = false;
    std::string fill;
    workload::parse_options("reclaim_hog", argc, argv,
                            {Option("--node", node), Option("--cpu", cpu), Option("--fill", fill),
                             Option("--fill-mb", fill_mb), Option("--mb", mb),
                             Option("--linger", linger)});
    pin_to(cpu);
    // Kept open to the end: the last close of a block device drops its page cache.
    int fd = -1;
    if (!fill.empty()) {
        fd = open(fill.c_str(), O_RDONLY);
        if (fd < 0)
            die(fill.c_str());
        std::vector<char> buf(1 << 20);
        long filled = 0;
        for (; filled < fill_mb; ++filled) {
            ssize_t n = read(fd, buf.data(), buf.size());
            if (n < 0)
                die("read");
            if (n == 0)
                break;
        }
        fprintf(stderr, "reclaim_hog: read %ld MiB of %s\n", filled, fill.c_str());
        for (const char *meminfo :
             {"/sys/devices/system/node/node0/meminfo", "/sys/devices/system/node/node1/meminfo"}) {
            // Where the page cache went, for the scenario's log.
            FILE *f = fopen(meminfo, "r");
            char line[256];
            while (f != nullptr && fgets(line, sizeof(line), f) != nullptr)
                if (strstr(line, "MemFree") || strstr(line, "FilePages"))
                    fputs(line, stderr);
            if (f != nullptr)
                fclose(f);
        }
        if (filled < fill_mb) {
            fprintf(stderr, "reclaim_hog: %s ended before %ld MiB\n", fill.c_str(), fill_mb);
            return 1;
        }
    }
    // MPOL_BIND (2) to one node for the memory it touches now: it cannot fall back to the
    // other node's free memory. (The page cache above was read with the default, local
    // policy from the node's CPU, which puts it on the same node.)
    unsigned long nodemask = 1ul << node;
    if (syscall(SYS_set_mempolicy, 2, &nodemask, sizeof(nodemask) * 8) != 0)
        die("set_mempolicy");
    sched_param param{};
    param.sched_priority = 1;
    if (sched_setscheduler(0, SCHED_FIFO, &param) != 0)
        die("sched_setscheduler");
    size_t bytes = static_cast<size_t>(mb) << 20;
    auto *p = static_cast<char *>(
        mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED)
        die("mmap");
    for (size_t off = 0; off < bytes; off += 4096)
        p[off] = 1;
    if (fd >= 0)
        close(fd);
    printf("pid=%d iterations=%ld\n", getpid(), mb);
    fflush(stdout);
    while (linger)
        pause();
    return 0;
}
