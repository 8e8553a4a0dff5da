#include "output.h"

#include <csignal>
#include <ctime>
#include <fmt/format.h>
#include <poll.h>

namespace memlat {

namespace {
volatile sig_atomic_t stop_flag = 0;
void on_stop_signal(int) {
    stop_flag = 1;
}
} // namespace

std::string wall_clock_time() {
    time_t now = time(nullptr);
    tm local{};
    localtime_r(&now, &local);
    char buf[16];
    strftime(buf, sizeof(buf), "%H:%M:%S", &local);
    return buf;
}

void print_json_line(const nlohmann::json &object) {
    fmt::print("{}\n", object.dump());
}

void install_stop_signals() {
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0; // no SA_RESTART: the blocking wait must return at once
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
}

bool stop_requested() {
    return stop_flag != 0;
}

void announce_tracing(std::string_view what) {
    fmt::print(stderr, "{} Hit Ctrl-C to end.\n", what);
    if (getenv("MEMLAT_READY") != nullptr)
        fmt::print(stderr, "memlat: ready\n");
    fflush(stderr);
}

void sleep_for(std::chrono::milliseconds timeout) {
    poll(nullptr, 0, static_cast<int>(timeout.count()));
}

bool run_until_stopped(const CommonOptions &options,
                       const std::function<void(std::chrono::milliseconds)> &wait,
                       const std::function<void()> &on_interval) {
    using clock = std::chrono::steady_clock;
    using std::chrono::duration_cast;
    using std::chrono::milliseconds;
    const auto start = clock::now();
    const auto end = options.duration > 0
                         ? start + duration_cast<clock::duration>(
                                       std::chrono::duration<double>(options.duration))
                         : clock::time_point::max();
    const auto period =
        duration_cast<clock::duration>(std::chrono::duration<double>(options.interval));
    auto next = options.interval > 0 ? start + period : clock::time_point::max();
    uint64_t printed = 0;
    // Waits are capped so that a missed wakeup can never hold output back for long.
    constexpr milliseconds max_wait(100);
    while (!stop_requested()) {
        auto now = clock::now();
        if (now >= next) {
            on_interval();
            fflush(stdout);
            next += period;
            if (options.count > 0 && ++printed >= options.count)
                return true;
        }
        if (now >= end)
            return false;
        auto until = std::min(next, end);
        auto left = duration_cast<milliseconds>(until - now) + milliseconds(1);
        wait(std::min(left, max_wait));
    }
    return false;
}

bool trace_until_stopped(const CommonOptions &options, EventReader *events,
                         const std::function<void()> &on_interval) {
    auto wait = [events](std::chrono::milliseconds timeout) {
        if (events == nullptr) {
            sleep_for(timeout);
            return;
        }
        events->poll(timeout);
        fflush(stdout);
    };
    bool done = run_until_stopped(options, wait, on_interval);
    if (events != nullptr)
        events->drain();
    return done;
}

void report_skipped_runs(std::string_view tool, bpf_object *obj, std::string_view what) {
    if (uint64_t misses = recursion_misses(obj); misses != 0)
        fmt::print(stderr,
                   "{}: the kernel skipped {} program runs because another BPF program was "
                   "running on the same CPU; those {} are not counted.\n",
                   tool, misses, what);
}

} // namespace memlat
