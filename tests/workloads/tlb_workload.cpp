// The remote-shootdown workload of the tlbflush tests and benchmark: the main thread, pinned
// to one CPU, maps, touches and unmaps a small buffer over and over, while a second thread of
// the same process, pinned to another CPU, keeps touching its own memory. Every munmap must
// then flush the second CPU's TLB with an IPI, because that CPU runs the same address space.
//
//   tlb_workload [--seconds S | --iterations N] [--main-cpu A] [--worker-cpu B] [--size BYTES]
//                [--linger S] [--worker-sleep-us U]
// With --worker-sleep-us the second thread sleeps U microseconds between touches, so that its
// CPU is often idle (lazily still in this address space): some flushes then reach it in the
// idle loop rather than in an IPI handler. It prints "pid=PID iterations=N" on stdout when done;
// --linger keeps the process alive afterwards so that tools can still read /proc/PID/maps for
// symbolization.
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "workload.h"

namespace {

using workload::Option;
using workload::pin_to;

std::atomic<bool> worker_running{false};
std::atomic<bool> stop_worker{false};
long worker_sleep_us = 0;

void keep_touching(int cpu) {
    pin_to(cpu);
    std::vector<char> memory(1 << 20);
    worker_running = true;
    for (size_t i = 0; !stop_worker.load(std::memory_order_relaxed); i += 4096) {
        memory[i % memory.size()]++;
        if (worker_sleep_us > 0)
            std::this_thread::sleep_for(std::chrono::microseconds(worker_sleep_us));
    }
}

// Kept out of line so that stacks show it between main and munmap.
[[gnu::noinline]] void map_touch_unmap(size_t size) {
    void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        std::exit(1);
    }
    for (size_t off = 0; off < size; off += 4096)
        static_cast<volatile char *>(p)[off] = 1;
    munmap(p, size);
}

} // namespace

int main(int argc, char **argv) {
    double seconds = 0, linger = 0;
    long iterations = 0;
    int main_cpu = 0, worker_cpu = 1;
    size_t size = 64 * 1024;
    workload::parse_options("tlb_workload", argc, argv,
                            {Option("--seconds", seconds), Option("--iterations", iterations),
                             Option("--main-cpu", main_cpu), Option("--worker-cpu", worker_cpu),
                             Option("--size", size), Option("--linger", linger),
                             Option("--worker-sleep-us", worker_sleep_us)});
    if (seconds <= 0 && iterations <= 0)
        seconds = 1;

    pin_to(main_cpu);
    std::thread worker(keep_touching, worker_cpu);
    while (!worker_running)
        std::this_thread::yield();

    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    long done = 0;
    while (iterations > 0 ? done < iterations : std::chrono::steady_clock::now() < end) {
        map_touch_unmap(size);
        ++done;
    }
    stop_worker = true;
    worker.join();
    printf("pid=%d iterations=%ld\n", getpid(), done);
    fflush(stdout);
    if (linger > 0)
        std::this_thread::sleep_for(std::chrono::duration<double>(linger));
    return 0;
}
