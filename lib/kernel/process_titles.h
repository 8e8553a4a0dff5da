// The titles processes give themselves: /proc/PID/cmdline, which programs such as PostgreSQL
// and nginx rewrite ("postgres: checkpointer", "nginx: worker process"), as top -c and htop
// show it. Reading it takes the process's mmap_lock (the kernel reads the process's memory),
// so a monitor reads it only for the rows it shows, at most once per process every few
// seconds: it must not become the lock convoy it looks for.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace memlat {

// The process's arguments joined by spaces, unprintable bytes as '?', cut to `max_bytes`; ""
// for a kernel thread, a zombie, or a process that is gone.
std::string read_process_title(uint32_t pid, size_t max_bytes = 256);

// When process `pid` started (/proc/PID/stat's starttime, in clock ticks since boot), 0 when it
// is gone: with the pid, what tells a process from a later one given the same pid.
uint64_t process_start_time(uint32_t pid);

// read_process_title() kept per process for `refresh`, forgotten after `forget` unasked; at
// most max_entries processes.
class ProcessTitles {
  public:
    explicit ProcessTitles(std::chrono::seconds refresh = std::chrono::seconds(5),
                           std::chrono::seconds forget = std::chrono::seconds(60))
        : refresh_(refresh), forget_(forget) {}
    const std::string &of(uint32_t pid);
    size_t size() const { return cache_.size(); }
    // Reads of /proc/PID/cmdline so far.
    uint64_t reads() const { return reads_; }
    static constexpr size_t max_entries = 4096;

  private:
    struct Entry {
        std::string title;
        uint64_t start_time = 0; // /proc/PID/stat's: a pid used again is another process
        std::chrono::steady_clock::time_point read_at, asked_at;
    };
    std::chrono::seconds refresh_, forget_;
    std::map<uint32_t, Entry> cache_;
    uint64_t reads_ = 0;
    std::chrono::steady_clock::time_point swept_;
};

} // namespace memlat
