// Time, signals and the main loop that every tool runs: print per interval or at the end,
// stop on Ctrl-C, SIGTERM, -d or the interval count.
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

#include "options.h"

namespace memlat {

// "HH:MM:SS" in local time.
std::string wall_clock_time();

// Writes one JSON object as one line on stdout. Strings that are not valid UTF-8 (task names
// and file names are bytes; the kernel cuts a task name at 15 bytes, sometimes inside a
// character) are written with each invalid byte replaced by U+FFFD, and an object member NAME
// holding such a string gets a sibling NAME_hex with its exact bytes in lowercase hex, so
// nothing is lost and every JSON parser accepts the line.
void print_json_line(const nlohmann::json &object);
// The text print_json_line() writes, without the newline: for a line written in parts.
std::string json_text(const nlohmann::json &object);

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or values past U+10FFFF).
bool is_valid_utf8(std::string_view text);
// `text` with every byte that is not part of a well-formed UTF-8 sequence replaced by U+FFFD.
std::string replace_invalid_utf8(std::string_view text);
// The bytes of `text` in lowercase hex, two digits each.
std::string hex_bytes(std::string_view text);

// Flushes stdout. A write error other than a closed pipe throws RuntimeError naming it; a
// closed pipe (the reader went away, e.g. `| head`) throws OutputClosed, which ends the tool
// quietly.
void flush_output();
struct OutputClosed : std::runtime_error {
    OutputClosed() : std::runtime_error("the reader of the output went away") {}
};

// SIGINT and SIGTERM end the tool cleanly: they set a flag and interrupt the wait.
void install_stop_signals();
bool stop_requested();

// Tells the user (stderr) that tracing runs; when MEMLAT_READY is set in the environment, also
// prints the line "memlat: ready" on stderr, after every probe is attached, so scripts and
// tests start their workload only then.
void announce_tracing(std::string_view what);

// Runs until a stop signal, the -d duration, or COUNT intervals. `wait(timeout)` blocks for at
// most `timeout` (e.g. polling a ring buffer); `on_interval()` prints one interval and is
// called every INTERVAL seconds when an interval was given. Returns true when it ended because
// COUNT intervals were printed (nothing is left to print), false otherwise.
bool run_until_stopped(const CommonOptions &options,
                       const std::function<void(std::chrono::milliseconds)> &wait,
                       const std::function<void()> &on_interval);

// A wait that just sleeps (interrupted by the stop signals).
void sleep_for(std::chrono::milliseconds timeout);

// run_until_stopped() as every tool uses it: waits on `events` when the tool prints events
// (printing each batch as it arrives), else sleeps; drains the ring buffer at the end.
bool trace_until_stopped(const CommonOptions &options, EventReader *events,
                         const std::function<void()> &on_interval);

// Tells on stderr how many program runs the kernel skipped because another BPF program was
// running on the same CPU (bpf_prog_info.recursion_misses): those `what` were not counted.
void report_skipped_runs(std::string_view tool, bpf_object *obj, std::string_view what);
// The JSON field of that count, the same in every tool: in the exit summary (the run's total)
// or, for the tools without one (tlbflush, numamove), in each interval's object (its share).
constexpr const char *skipped_runs_field = "recursion_misses";

} // namespace memlat
