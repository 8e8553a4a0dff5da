// lock_convoy: an mmap_lock convoy made on purpose, for lockstall's tests and bench/.
//
// A process maps --map-mb MiB of anonymous memory in small pages and touches it all, so that
// a walk of its page tables is long. A child process, named convoy_reader (the "monitor"),
// reads /proc/PARENT/smaps_rollup in a loop: each read holds the parent's mmap_lock for reading
// for the whole walk. Meanwhile --writers threads map and unmap a page in a loop (mmap_lock for
// writing: they queue behind the reader) and --mprotecters threads flip the protection of a
// page of their own (for writing too: they queue behind the queued writer). With --no-reader
// the child is not started: the same work without its cause. --pause-us sleeps between the
// writers' iterations: fewer lock operations (the VM guests' ftrace oracle keeps them all).
//
// --populate-mb N adds a thread, convoy_populate, whose holds stall on memory: it reads
// --cache-file through (page cache) and maps N MiB with MAP_POPULATE, which faults them in
// holding the lock for reading, then unmaps them, in a loop. In a memory cgroup whose limit
// the file and the mapping exceed together, the faults reclaim the file's pages: reclaim
// inside the holds the writers wait behind. --cgroup DIR: the process joins that cgroup first.
//
// Prints "pid=P reader=R" once the memory is touched (R 0 without a reader), runs --seconds,
// then "maps=M mprotects=K populates=N" and exits; with --linger it waits for SIGTERM first.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "workload.h"

namespace {

std::atomic<bool> stop{false};

// The child: reads the parent's smaps_rollup until the parent goes (its pipe's end closes).
[[noreturn]] void read_rollups(pid_t parent, int done_fd) {
    prctl(PR_SET_NAME, "convoy_reader");
    const std::string path = "/proc/" + std::to_string(parent) + "/smaps_rollup";
    std::vector<char> buffer(64 * 1024);
    fcntl(done_fd, F_SETFL, O_NONBLOCK);
    for (;;) {
        char byte;
        if (read(done_fd, &byte, 1) == 0)
            _exit(0);
        const int fd = open(path.c_str(), O_RDONLY);
        if (fd < 0)
            _exit(0);
        while (read(fd, buffer.data(), buffer.size()) > 0) {
        }
        close(fd);
    }
}

} // namespace

int main(int argc, char **argv) {
    size_t map_mb = 256;
    int writers = 1, mprotecters = 2;
    double seconds = 2;
    long pause_us = 0;
    bool no_reader = false, linger = false;
    size_t populate_mb = 0;
    std::string cache_file, cgroup;
    workload::parse_options("lock_convoy", argc, argv,
                            {{"--map-mb", map_mb},
                             {"--populate-mb", populate_mb},
                             {"--cache-file", cache_file},
                             {"--cgroup", cgroup},
                             {"--writers", writers},
                             {"--mprotecters", mprotecters},
                             {"--seconds", seconds},
                             {"--pause-us", pause_us},
                             {"--no-reader", no_reader},
                             {"--linger", linger}});
    if (!cgroup.empty()) {
        // The whole process, its reader too: before anything is charged.
        const std::string procs = cgroup + "/cgroup.procs";
        FILE *f = fopen(procs.c_str(), "w");
        if (f == nullptr || fprintf(f, "%d\n", getpid()) < 0 || fclose(f) != 0)
            workload::die(procs.c_str());
    }
    // The reader is started first, before the memory is mapped: a fork after would copy the
    // page tables of all of it.
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0)
        workload::die("pipe");
    pid_t reader = 0;
    const pid_t self = getpid();
    int go[2];
    if (pipe(go) != 0)
        workload::die("pipe");
    if (!no_reader) {
        reader = fork();
        if (reader < 0)
            workload::die("fork");
        if (reader == 0) {
            close(pipe_fds[1]);
            close(go[1]);
            char byte;
            if (read(go[0], &byte, 1) != 1) // the memory is touched
                _exit(0);
            read_rollups(self, pipe_fds[0]);
        }
    }
    close(pipe_fds[0]);
    close(go[0]);
    const size_t bytes = map_mb << 20;
    auto *memory = static_cast<char *>(
        mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (memory == MAP_FAILED)
        workload::die("mmap");
    // Small pages: a huge page is one entry of the walk, and the walk is the hold.
    madvise(memory, bytes, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < bytes; i += 4096)
        memory[i] = 1;
    printf("pid=%d reader=%d\n", self, reader);
    fflush(stdout);
    if (reader != 0 && write(go[1], "g", 1) != 1)
        workload::die("write");

    std::atomic<long> maps{0}, mprotects{0}, populates{0};
    std::vector<std::thread> threads;
    if (populate_mb > 0) {
        const int cache_fd = open(cache_file.c_str(), O_RDONLY);
        if (cache_fd < 0)
            workload::die("--cache-file (--populate-mb reads it)");
        // Its pages cached already belong to the cgroup that read them first: dropped (this
        // file's only), they are read again into the workload's.
        fdatasync(cache_fd);
        posix_fadvise(cache_fd, 0, 0, POSIX_FADV_DONTNEED);
        threads.emplace_back([&, cache_fd] {
            prctl(PR_SET_NAME, "convoy_populate");
            std::vector<char> buffer(1 << 20);
            const size_t populate_bytes = populate_mb << 20;
            while (!stop.load(std::memory_order_relaxed)) {
                for (off_t at = 0;; at += static_cast<off_t>(buffer.size()))
                    if (pread(cache_fd, buffer.data(), buffer.size(), at) <= 0)
                        break;
                void *p = mmap(nullptr, populate_bytes, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
                if (p == MAP_FAILED)
                    workload::die("mmap MAP_POPULATE");
                munmap(p, populate_bytes);
                populates.fetch_add(1, std::memory_order_relaxed);
            }
            close(cache_fd);
        });
    }
    for (int i = 0; i < writers; ++i)
        threads.emplace_back([&] {
            prctl(PR_SET_NAME, "convoy_mapper");
            while (!stop.load(std::memory_order_relaxed)) {
                void *p =
                    mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (p == MAP_FAILED)
                    workload::die("mmap");
                munmap(p, 4096);
                maps.fetch_add(1, std::memory_order_relaxed);
                if (pause_us > 0)
                    usleep(pause_us);
            }
        });
    for (int i = 0; i < mprotecters; ++i)
        threads.emplace_back([&] {
            prctl(PR_SET_NAME, "convoy_mprotect");
            void *p =
                mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED)
                workload::die("mmap");
            while (!stop.load(std::memory_order_relaxed)) {
                // Half of it, so that the mapping is split and merged (a write of the tree).
                mprotect(p, 4096, PROT_READ);
                mprotect(p, 4096, PROT_READ | PROT_WRITE);
                mprotects.fetch_add(2, std::memory_order_relaxed);
                if (pause_us > 0)
                    usleep(pause_us);
            }
        });
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop = true;
    for (auto &t : threads)
        t.join();
    close(pipe_fds[1]); // the reader's end of work
    if (reader != 0) {
        int status = 0;
        waitpid(reader, &status, 0);
    }
    printf("maps=%ld mprotects=%ld populates=%ld\n", maps.load(), mprotects.load(),
           populates.load());
    fflush(stdout);
    if (linger) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigprocmask(SIG_BLOCK, &set, nullptr);
        int sig;
        sigwait(&set, &sig);
    }
    return 0;
}
