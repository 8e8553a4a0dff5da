// What every tool writes on stdout: JSON lines (valid UTF-8 whatever the kernel's bytes), the
// wall-clock time, and flushing that tells a closed pipe from a failed write.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

#include "base/files.h"

namespace memlat {

// "HH:MM:SS" in local time.
std::string wall_clock_time();

// When a JSON line was written, as every line carries it (docs/output.md, "Fields every line
// has"): "timestamp", ISO 8601 in UTC to the millisecond ("2026-12-06T07:40:01.123Z"), and
// "epoch_ms", the same instant in milliseconds since 1970-01-01 UTC.
struct WallStamp {
    std::string timestamp;
    int64_t epoch_ms;
};
WallStamp wall_stamp();
// Adds wall_stamp()'s members to `object`: for an object written in two places at once.
void add_wall_stamp(nlohmann::json &object);

// What a JSON line is, in its "type" member (docs/output.md, "Fields every line has"): one of
// the three every tool uses, or the kind of event of a tool whose events have several
// (oomwhy's "kill" and "reaper").
struct LineType {
    std::string_view name;
};
inline constexpr LineType event_line{"event"};
inline constexpr LineType interval_line{"interval"};
inline constexpr LineType summary_line{"summary"};

// json_text(object) with "type" and the members of wall_stamp() added, each unless `object` is
// not an object or has it already (a replayed record keeps the time it was written with).
std::string stamped_json_text(LineType type, const nlohmann::json &object);

// Writes one JSON object as one line on stdout, typed and stamped (stamped_json_text()). Strings
// that are not valid UTF-8 (task names and file names are bytes; the kernel cuts a task name at 15
// bytes, sometimes inside a character) are written with each invalid byte replaced by U+FFFD, and
// an object member NAME holding such a string gets a sibling NAME_hex with its exact bytes in
// lowercase hex, so nothing is lost and every JSON parser accepts the line.
void print_json_line(LineType type, const nlohmann::json &object);
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

// A file a tool writes at its end (a profile), opened when the options are checked: a path it
// cannot write to is a usage error before anything is loaded, not a lost run.
class OutputFile {
  public:
    OutputFile() = default;
    // Creates or truncates `path` (or leaves what it holds, `truncate` false, until
    // truncate()); a UsageError naming `option`, the path and the reason when it cannot.
    OutputFile(const std::string &path, std::string_view option, bool truncate = true);
    // Empties the file: a RuntimeError when it cannot.
    void truncate();
    bool is_open() const { return fd_.get() >= 0; }
    const std::string &path() const { return path_; }
    // Writes `content` whole, the file left open for more (a record written as it goes); a
    // RuntimeError when it cannot (a full disk).
    void write(std::string_view content);
    // Writes `content` whole and closes the file; a RuntimeError when it cannot.
    void write_and_close(std::string_view content);

  private:
    std::string path_;
    OwnedFd fd_;
};

// The JSON field of the count of program runs the kernel skipped (report_skipped_runs), the
// same in every tool: in the exit summary (the run's total) or, for the tools without one
// (tlbflush, numamove), in each interval's object (its share).
constexpr const char *skipped_runs_field = "recursion_misses";

} // namespace memlat
