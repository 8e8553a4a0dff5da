// lockstall's views: what a thread was doing with an mmap_lock (from its kernel stack), and
// the wait lines and JSON objects. Apart from the tool so that the unit tests reach them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "lockstall.h"

namespace memlat::lockstall {

// What a thread did with the lock, from the functions of its kernel stack (innermost first,
// "name+0xoff" as symbols.h describes frames): a /proc file it read ("/proc smaps_rollup"), a
// page fault ("fault"), get_user_pages ("gup"), khugepaged, fork, exit, else the system call it
// was in ("mmap", "mprotect", ...); "?" when no frame says (no kernel symbols: addresses only).
std::string operation_of(const std::vector<std::string> &frames);

// The monitoring program a thread name is known to be (process-exporter of "prometheus-proc",
// Debian's name cut to 15 characters), "" for others.
std::string_view monitor_of(std::string_view comm);

// A hold's own memory stalls: "reclaim 1.200 ms, compaction 0.300 ms", "" without.
std::string holder_stalls(const lockstall_hold &h);

// A thread name as the kernel records it (NUL-terminated unless all 16 bytes are used).
std::string comm_text(const char (&comm)[LOCKSTALL_COMM_LEN]);

// "read" or "write".
const char *mode_name(bool write);

// The holds of a record to show: those of a thread (a half-written slot of the ring has none,
// or ends before it began), oldest first: the first (the root) is where the convoy began, the
// hold the others queued behind.
std::vector<lockstall_hold> holders_of(const lockstall_wait &e);

struct LineFormat {
    bool timestamp = false; // a TIME(s) column
};

std::string header(const LineFormat &f);
// A wait's line; `op` is operation_of() its stack.
std::string wait_line(const lockstall_wait &e, double time_s, std::string_view op,
                      const LineFormat &f);
// A holder's line under its wait; `root`: the first of holders_of(), the hold the others
// queued behind.
std::string holder_line(const lockstall_hold &h, bool root, std::string_view op);

// The JSON object of a wait (without the fields every line has); `ops` are the holders' in
// holders_of()'s order.
nlohmann::json wait_json(const lockstall_wait &e, double time_s, std::string_view op,
                         const std::vector<lockstall_hold> &holders,
                         const std::vector<std::string> &ops);

} // namespace memlat::lockstall
