// Global direct reclaim on demand, for the VM tests. kswapd of a node runs only on that node's
// CPUs; this process binds its memory to one node, pins itself to that node's CPU and, while
// it allocates past the node's free memory, leaves kswapd only what the CPU has spare: the
// allocations must reclaim the node's page cache themselves. First it fills the node's page
// cache by reading FILL.
//
// How kswapd is kept off: the hog runs at nice -20 and kswapdN is SCHED_IDLE while it touches
// (its policy is restored after). Not SCHED_FIFO, which this hog used until 7.3 failed with
// it: from 6.3 ("mm/page_alloc: treat RT tasks similar to __GFP_HIGH") an RT task's
// allocations may take half of the min watermark, so the node falls below the pfmemalloc
// reserve and throttle_direct_reclaim() puts the hog to sleep until kswapd has reclaimed for
// it. On 7.3 every switch away from the SCHED_FIFO hog was in throttle_direct_reclaim, most
// to kswapd0 (pgsteal_kswapd +20,640 against pgsteal_direct +1,120; one CI run had no direct
// stall at all). kswapdN's CPU time is logged before and after.
//
//   reclaim_hog --node N --cpu C --fill PATH --fill-mb F --mb M [--linger]
// Prints "pid=PID iterations=M" when done (M MiB touched); with --linger it then waits to be
// killed (keeping its memory), so that its delay accounting can still be read.
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "workload.h"

using workload::die;
using workload::Option;
using workload::pin_to;

namespace {

std::string read_first_line(const std::string &path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

// kswapdN's pid, or 0 if none was found.
pid_t find_kswapd(int node) {
    const std::string comm = "kswapd" + std::to_string(node);
    pid_t found = 0;
    DIR *proc = opendir("/proc");
    for (dirent *entry; proc != nullptr && found == 0 && (entry = readdir(proc)) != nullptr;)
        if (read_first_line(std::string("/proc/") + entry->d_name + "/comm") == comm)
            found = std::atoi(entry->d_name);
    if (proc != nullptr)
        closedir(proc);
    return found;
}

// kswapd at SCHED_IDLE for as long as this lives, then back to the policy it had. A guard
// process restores it too when the hog dies first (the OOM killer's SIGKILL runs no
// destructor, and an idle kswapd would then skew every later scenario of the boot): it waits
// for the end of a pipe only the hog holds open.
class IdleWhileTouching {
  public:
    explicit IdleWhileTouching(pid_t pid) : pid_(pid), policy_(sched_getscheduler(pid)) {
        if (policy_ < 0 || sched_getparam(pid_, &param_) != 0)
            die("sched_getscheduler(kswapd)");
        start_guard();
        const sched_param idle{};
        if (sched_setscheduler(pid_, SCHED_IDLE, &idle) != 0)
            die("sched_setscheduler(kswapd, SCHED_IDLE)");
    }
    IdleWhileTouching(const IdleWhileTouching &) = delete;
    IdleWhileTouching &operator=(const IdleWhileTouching &) = delete;
    ~IdleWhileTouching() {
        if (!restore())
            perror("sched_setscheduler(kswapd, restore)");
        close(guard_); // the guard restores once more (the same policy) and exits
    }

  private:
    bool restore() const { return sched_setscheduler(pid_, policy_, &param_) == 0; }

    void start_guard() {
        int ends[2];
        if (pipe(ends) != 0)
            die("pipe");
        const pid_t guard = fork();
        if (guard < 0)
            die("fork");
        if (guard == 0) {
            close(ends[1]);
            // Off the hog's output, which the scenario reads to its end.
            const int null = open("/dev/null", O_RDWR);
            dup2(null, STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
            char byte;
            ssize_t n;
            do
                n = read(ends[0], &byte, 1);
            while (n > 0 || (n < 0 && errno == EINTR));
            restore();
            _exit(0);
        }
        close(ends[0]);
        guard_ = ends[1];
    }

    pid_t pid_;
    int policy_;
    sched_param param_{};
    int guard_ = -1;
};

// "kswapdN pid=P cpus=LIST utime+stime=T ticks" for the scenario's log: where it may run and
// how much it ran, so a run without direct stalls shows whether kswapd did the work.
void log_kswapd(pid_t pid, int node, const char *when) {
    const std::string dir = "/proc/" + std::to_string(pid);
    std::string cpus;
    std::ifstream status(dir + "/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("Cpus_allowed_list:", 0) == 0)
            cpus = line.substr(line.find_first_not_of(" \t", 18));
    // utime and stime are fields 14 and 15; the comm field before them has no spaces here.
    std::ifstream stat(dir + "/stat");
    std::string field;
    long ticks = 0;
    for (int i = 1; i <= 15 && stat >> field; ++i)
        if (i >= 14)
            ticks += std::atol(field.c_str());
    fprintf(stderr, "reclaim_hog: %s kswapd%d pid=%d cpus=%s utime+stime=%ld ticks\n", when, node,
            pid, cpus.c_str(), ticks);
}

} // namespace

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
    if (setpriority(PRIO_PROCESS, 0, -20) != 0)
        die("setpriority");
    const pid_t kswapd = find_kswapd(node);
    if (kswapd == 0) {
        fprintf(stderr, "reclaim_hog: no kswapd%d thread in /proc\n", node);
        return 1;
    }
    size_t bytes = static_cast<size_t>(mb) << 20;
    auto *p = static_cast<char *>(
        mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED)
        die("mmap");
    log_kswapd(kswapd, node, "before");
    {
        IdleWhileTouching kswapd_idle(kswapd);
        for (size_t off = 0; off < bytes; off += 4096)
            p[off] = 1;
    }
    log_kswapd(kswapd, node, "after");
    if (fd >= 0)
        close(fd);
    printf("pid=%d iterations=%ld\n", getpid(), mb);
    fflush(stdout);
    while (linger)
        pause();
    return 0;
}
