// The life of a tool's main(): run_tool() turns what the body throws into messages and exit
// statuses; SIGINT and SIGTERM stop it cleanly; the loop prints per interval or at the end and
// stops on a signal, -d or the interval count.
#pragma once

#include <chrono>
#include <functional>
#include <string_view>

#include "cli/options.h"
#include "loading/events.h"

namespace memlat {

// Runs a tool's body and turns what it throws into the message and exit status users expect:
// UsageError -> 2 (with a hint to -h), RuntimeError -> 1.
int run_tool(std::string_view tool, const std::function<int()> &body);

// The main() of an entry whose run is `run(argc, argv)`, named `Name` in its messages:
// run_tool() around it (an entry's `main` in cli/multicall.h).
template <const char *Name, int (*run)(int, char **)>
int entry_main(int argc, char **argv) {
    return run_tool(Name, [&] { return run(argc, argv); });
}

// A RuntimeError when the tool was started with stdout closed: for every mode that prints
// (check_prometheus_options calls it when --prometheus is not given).
void require_stdout();

// SIGINT and SIGTERM end the tool cleanly: they set a flag and interrupt the wait.
void install_stop_signals();
bool stop_requested();
// Ends the loop as a stop signal would (memlat top's q key).
void request_stop();

// Tells the user (stderr) that tracing runs; when MEMLAT_READY is set in the environment, also
// prints the line "memlat: ready" on stderr, after every probe is attached, so scripts and
// tests start their workload only then.
void announce_tracing(std::string_view what);

// Runs until a stop signal, the -d duration, or COUNT intervals. `wait(timeout)` blocks for at
// most `timeout` (e.g. polling a ring buffer); `on_interval()` prints one interval and is
// called every INTERVAL seconds when an interval was given. Returns true when it ended because
// COUNT intervals were printed (nothing is left to print), false otherwise. The interval may
// change while it runs (`options.interval`, which memlat top's d key sets): the next interval
// then ends the new length after the last.
bool run_until_stopped(const CommonOptions &options,
                       const std::function<void(std::chrono::milliseconds)> &wait,
                       const std::function<void()> &on_interval);

// A wait that just sleeps (interrupted by the stop signals).
void sleep_for(std::chrono::milliseconds timeout);

// run_until_stopped() as every tool uses it: waits on `events` when the tool prints events
// (printing each batch as it arrives), else sleeps; drains the ring buffer at the end.
bool trace_until_stopped(const CommonOptions &options, EventReader *events,
                         const std::function<void()> &on_interval);

} // namespace memlat
