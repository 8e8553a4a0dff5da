#include "cli/run_loop.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <system_error>
#include <unistd.h>

#include "base/errors.h"
#include "cli/output.h"

namespace memlat {

namespace {
volatile sig_atomic_t stop_flag = 0;
void on_stop_signal(int) {
    stop_flag = 1;
}
} // namespace

namespace {

bool fd_is_open(int fd) {
    return fcntl(fd, F_GETFD) != -1 || errno != EBADF;
}

bool stdout_closed = false;

// A tool started with a standard descriptor closed would hand that number to the next file it
// opens (a BPF map, a tracefs file) and then write its output or messages into it. All three
// are pointed at /dev/null instead. A closed stdout is an error for a tool that prints
// (require_stdout), not for the Prometheus exporter, which writes nothing there (a service
// manager may well start it with stdout closed).
void check_standard_descriptors() {
    stdout_closed = !fd_is_open(STDOUT_FILENO);
    for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO})
        if (!fd_is_open(fd)) {
            int null = open("/dev/null", fd == STDIN_FILENO ? O_RDONLY : O_WRONLY);
            if (null >= 0 && null != fd) {
                dup2(null, fd);
                close(null);
            }
        }
}

} // namespace

void require_stdout() {
    if (stdout_closed)
        throw RuntimeError(
            fmt::format("cannot write the output: stdout is closed ({})", strerror(EBADF)));
}

int run_tool(std::string_view tool, const std::function<int()> &body) {
    try {
        check_standard_descriptors();
        int status = body();
        // Output still buffered is written now: a failure here is the tool's failure too.
        flush_output();
        return status;
    } catch (const OutputClosed &) {
        return 1;
    } catch (const std::system_error &e) {
        // {fmt} reports a failed write to stdout this way.
        if (e.code().value() == EPIPE)
            return 1;
        fmt::print(stderr, "{}: cannot write the output: {}\n", tool, e.code().message());
        return 1;
    } catch (const UsageError &e) {
        fmt::print(stderr, "{}: {}\nRun '{} -h' for the options.\n", tool, e.what(), tool);
        return 2;
    } catch (const RuntimeError &e) {
        fmt::print(stderr, "{}: {}\n", tool, e.what());
        return 1;
    } catch (const std::exception &e) {
        fmt::print(stderr, "{}: internal error: {}\n", tool, e.what());
        return 1;
    }
}

void install_stop_signals() {
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    // SA_RESTART, so that a write blocked on a full pipe (a slow reader) resumes after Ctrl-C
    // instead of failing with EINTR and losing the line and the summary. The waits still
    // return at once: poll() and epoll_wait() are never restarted, whatever SA_RESTART says.
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
}

bool stop_requested() {
    return stop_flag != 0;
}

void request_stop() {
    stop_flag = 1;
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
    auto period_of = [](double seconds) {
        return duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
    };
    // The interval may change while this runs (memlat top's d key): the next one then ends
    // its new length after the last, or now if that is past.
    double interval = options.interval;
    auto period = period_of(interval);
    auto last = start;
    auto next = interval > 0 ? start + period : clock::time_point::max();
    uint64_t printed = 0;
    // Waits are capped so that a missed wakeup can never hold output back for long.
    constexpr milliseconds max_wait(100);
    while (!stop_requested()) {
        auto now = clock::now();
        if (options.interval != interval && options.interval > 0) {
            interval = options.interval;
            period = period_of(interval);
            next = std::max(last + period, now);
        }
        if (now >= next) {
            on_interval();
            flush_output();
            last = next;
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
        flush_output();
    };
    bool done = run_until_stopped(options, wait, on_interval);
    if (events != nullptr)
        events->drain();
    return done;
}

} // namespace memlat
