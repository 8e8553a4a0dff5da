#include "tlbflush_format.h"

#include <cstring>
#include <fmt/format.h>

namespace memlat::tlbflush {

namespace {

// The kernel writes ~0 for a flush of the whole address space.
constexpr uint64_t full_flush = ~0ull;

std::string comm_of(const tlbflush_event &e) {
    return std::string(e.comm, strnlen(e.comm, sizeof(e.comm)));
}

} // namespace

std::string event_header(bool timestamp) {
    return fmt::format("{}{:<12} {:<4} {:<8} {:<16} {:<22} {:>8}\n",
                       timestamp ? fmt::format("{:<9}", "TIME") : "", "TIME(s)", "CPU", "PID",
                       "COMM", "REASON", "PAGES");
}

std::string event_line(const tlbflush_event &e, double time_s, std::string_view reason,
                       std::string_view wall_time) {
    const std::string pages = e.pages == full_flush ? "full" : std::to_string(e.pages);
    return fmt::format("{}{:<12.6f} {:<4} {:<8} {:<16} {:<22} {:>8}\n",
                       wall_time.empty() ? "" : fmt::format("{:<9}", wall_time), time_s, e.cpu,
                       e.pid, comm_of(e), reason, pages);
}

nlohmann::json event_json(const tlbflush_event &e, double time_s, std::string_view reason,
                          std::string_view wall_time) {
    nlohmann::json line = {
        {"time_s", time_s},
        {"cpu", e.cpu},
        {"pid", e.pid},
        {"tid", e.tid},
        {"comm", comm_of(e)},
        {"reason", reason},
        {"pages", e.pages == full_flush ? nlohmann::json(nullptr) : nlohmann::json(e.pages)},
        {"full", e.pages == full_flush}};
    if (!wall_time.empty())
        line["wall_time"] = wall_time;
    return line;
}

} // namespace memlat::tlbflush
