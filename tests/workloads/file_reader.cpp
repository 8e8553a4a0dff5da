// Reads a file, for the reclaim and page-cache tests: optionally first moves itself into a
// cgroup (so that the page cache it faults in is charged there), then reads the whole file
// PASSES times with read(2) or through mmap. With --wait it first finishes starting up (the
// dynamic loader's own page-cache reads of the libraries, its buffer faulted in), prints
// "ready" and waits for a line on stdin: a tool given its PID then sees only the file's reads.
// With --linger it stays alive after its report until killed, so that what the kernel keeps
// per task (delay accounting, read over taskstats) can still be read. With --hold it also
// keeps the file open: a tool that finds paths in /proc/PID/fd still finds it after the
// reads, however fast they were. With --stdin-rounds it stays the same thread for many rounds
// of reads (bench/'s steady state: per-thread state of a tool made once, reused): it prints
// "ready", then reads the file PASSES times for every line on stdin and prints "round bytes=B"
// after each, until EOF. --offset-mb and --length-mb read a region of the file instead of all
// of it; PATH may be a block device (the VM tests' disk, whose page cache is a file's). With
// --idle-threads N (a file larger than the cgroup's limit, read through --cgroup) it first
// fills the cgroup, then starts N threads one after another, each reading the file's next
// pages until the cgroup has refused one of its charges (so that each has stalled in reclaim)
// and then sleeping until the process exits, and does the PASSES in a new thread: more threads
// alive that have stalled than a tool's per-thread map holds, then a thread it has not seen.
// With --second-reader-passes N a second thread reads the file N times beside the main
// thread's PASSES (its own buffer, the same region): two threads of one process that stall
// differently, for the tools' -t against -p.
//
//   file_reader --file PATH [--cgroup DIR] [--passes N] [--mmap] [--wait] [--linger|--hold]
//               [--stdin-rounds] [--offset-mb N] [--length-mb N] [--idle-threads N]
//               [--second-reader-passes N]
// Prints "pid=PID iterations=PASSES bytes=B" when done.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "workload.h"

namespace {

using workload::die;
using workload::Option;

void join_cgroup(const std::string &dir) {
    std::string procs = dir + "/cgroup.procs";
    FILE *f = fopen(procs.c_str(), "w");
    if (f == nullptr || fprintf(f, "%d\n", getpid()) < 0 || fclose(f) != 0)
        die(procs.c_str());
}

// The bytes of the file a pass reads.
struct Region {
    off_t offset = 0;
    size_t length = 0;
};

unsigned long read_pass(int fd, Region region, std::vector<char> &buf) {
    unsigned long total = 0;
    while (total < region.length) {
        size_t want = std::min(buf.size(), region.length - total);
        ssize_t n = pread(fd, buf.data(), want, region.offset + static_cast<off_t>(total));
        if (n < 0)
            die("read");
        if (n == 0)
            break;
        total += static_cast<unsigned long>(n);
    }
    return total;
}

// Not inlined: the stack tests look for this function's name in the stalled user stacks.
[[gnu::noinline]] unsigned long mmap_pass(int fd, Region region) {
    const size_t size = region.length;
    void *p = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, region.offset);
    if (p == MAP_FAILED)
        die("mmap");
    unsigned long sum = 0;
    for (size_t off = 0; off < size; off += 4096)
        sum += static_cast<const volatile unsigned char *>(p)[off];
    munmap(p, size);
    return size + (sum & 0); // touch every page; the sum only keeps the loads alive
}

// The memory charged to the cgroup `dir`: memory.usage_in_bytes on cgroup v1, memory.current
// on v2.
long cgroup_usage(const std::string &dir) {
    FILE *f = fopen((dir + "/memory.usage_in_bytes").c_str(), "r");
    if (f == nullptr)
        f = fopen((dir + "/memory.current").c_str(), "r");
    long bytes = 0;
    if (f == nullptr || fscanf(f, "%ld", &bytes) != 1)
        die("the cgroup's memory usage");
    fclose(f);
    return bytes;
}

// --idle-threads: this thread fills the cgroup, then `count` threads one after another each
// read the file's next 64 KiB chunks (no readahead: each chunk is charged to the thread that
// reads it) until the cgroup's usage fell during one of their reads: only reclaim in the
// reading thread lowers it (the process's other threads wait), so each has stalled in reclaim.
// They then sleep; they are never joined, the process's exit ends them.
void start_idle_threads(const std::string &path, const std::string &cgroup, long count,
                        off_t file_size) {
    int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0)
        die(path.c_str());
    if (posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM) != 0)
        die("posix_fadvise");
    constexpr off_t chunk = 64 << 10;
    off_t next = 0;
    std::vector<char> buf(chunk);
    auto read_until_stalled = [&] {
        for (;;) {
            if (next + chunk > file_size) {
                fprintf(stderr, "file_reader: --idle-threads %ld: the file is too small\n", count);
                std::exit(2);
            }
            const long before = cgroup_usage(cgroup);
            if (pread(fd, buf.data(), chunk, next) != chunk)
                die("pread");
            next += chunk;
            if (cgroup_usage(cgroup) < before)
                return;
        }
    };
    while (next < (48 << 20)) // past the limits of the tests' cgroups (32 MiB)
        read_until_stalled();
    for (long i = 0; i < count; ++i) {
        // Shared: the thread may still be inside set_value() when wait() returns.
        auto stalled = std::make_shared<std::promise<void>>();
        auto done = stalled->get_future();
        std::thread([&read_until_stalled, stalled] {
            read_until_stalled();
            stalled->set_value();
            for (;;)
                pause();
        }).detach();
        done.wait(); // one at a time: each refusal is the reading thread's own
    }
}

} // namespace

int main(int argc, char **argv) {
    std::string file, cgroup;
    long passes = 1, offset_mb = 0, length_mb = -1, idle_threads = 0, second_passes = 0;
    bool use_mmap = false, wait = false, linger = false, hold = false, stdin_rounds = false;
    workload::parse_options(
        "file_reader", argc, argv,
        {Option("--file", file), Option("--cgroup", cgroup), Option("--passes", passes),
         Option("--mmap", use_mmap), Option("--wait", wait), Option("--linger", linger),
         Option("--hold", hold), Option("--stdin-rounds", stdin_rounds),
         Option("--offset-mb", offset_mb), Option("--length-mb", length_mb),
         Option("--idle-threads", idle_threads), Option("--second-reader-passes", second_passes)});
    linger = linger || hold; // --hold lingers too, with the file open
    if (file.empty()) {
        fprintf(stderr, "file_reader: --file is required\n");
        return 2;
    }
    if (!cgroup.empty())
        join_cgroup(cgroup);
    std::vector<char> buf(1 << 20, 0); // allocated and faulted in before any wait
    if (wait) {
        printf("ready\n");
        fflush(stdout);
        char line[16];
        if (fgets(line, sizeof(line), stdin) == nullptr)
            return 1;
    }
    int fd = open(file.c_str(), O_RDONLY);
    if (fd < 0)
        die(file.c_str());
    // The end of the file, or of a block device (whose st_size is 0).
    const off_t end = lseek(fd, 0, SEEK_END);
    if (end < 0)
        die("lseek");
    Region region{static_cast<off_t>(offset_mb) << 20, 0};
    if (offset_mb < 0 || region.offset > end) {
        fprintf(stderr, "file_reader: --offset-mb %ld is past the end of %s\n", offset_mb,
                file.c_str());
        return 2;
    }
    region.length = length_mb < 0 ? static_cast<size_t>(end - region.offset)
                                  : std::min(static_cast<size_t>(length_mb) << 20,
                                             static_cast<size_t>(end - region.offset));
    auto read_passes = [&] {
        unsigned long bytes = 0;
        for (long pass = 0; pass < passes; ++pass)
            bytes += use_mmap ? mmap_pass(fd, region) : read_pass(fd, region, buf);
        return bytes;
    };
    if (stdin_rounds) {
        printf("ready\n");
        fflush(stdout);
        char line[16];
        while (fgets(line, sizeof(line), stdin) != nullptr) {
            printf("round bytes=%lu\n", read_passes());
            fflush(stdout);
        }
        return 0;
    }
    unsigned long bytes = 0;
    if (idle_threads > 0) {
        if (cgroup.empty()) {
            fprintf(stderr, "file_reader: --idle-threads needs --cgroup\n");
            return 2;
        }
        start_idle_threads(file, cgroup, idle_threads, end);
        std::thread([&] { bytes = read_passes(); }).join();
    } else if (second_passes > 0) {
        unsigned long second_bytes = 0;
        std::thread second([&] {
            std::vector<char> own(buf.size(), 0);
            for (long pass = 0; pass < second_passes; ++pass)
                second_bytes += use_mmap ? mmap_pass(fd, region) : read_pass(fd, region, own);
        });
        bytes = read_passes();
        second.join();
        bytes += second_bytes;
    } else {
        bytes = read_passes();
    }
    if (!hold)
        close(fd);
    printf("pid=%d iterations=%ld bytes=%lu\n", getpid(), passes, bytes);
    fflush(stdout);
    while (linger)
        pause();
    return 0;
}
