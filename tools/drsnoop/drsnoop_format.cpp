#include "drsnoop_format.h"

#include <array>
#include <cstring>
#include <fmt/format.h>

namespace memlat::drsnoop {

namespace {

std::string comm_of(const drsnoop_event &e) {
    return std::string(e.comm, strnlen(e.comm, sizeof(e.comm)));
}

int64_t free_kb(const drsnoop_event &e, const LineFormat &f) {
    return e.free_pages < 0 ? -1 : e.free_pages * f.page_kb;
}

} // namespace

const char *kind_name(uint32_t kind) {
    static const std::array<const char *, DRSNOOP_KINDS> names{"direct", "memcg", "softlimit",
                                                               "node"};
    return kind < DRSNOOP_KINDS ? names[kind] : "unknown";
}

// BCC's columns in BCC's order: TIME(s) UID COMM PID LAT(ms) PAGES, and with -e FREE(KB) where
// BCC's drsnoop -v and libbpf-tools' drsnoop -e print it; memlat's own after them: KIND ORDER,
// with -e the other id, CGROUP and GFP. A script that reads BCC's fields by position reads the
// same fields here.
std::string header(const LineFormat &f) {
    std::string h;
    if (f.timestamp)
        h += fmt::format("{:<14}", "TIME(s)");
    if (f.uid)
        h += fmt::format("{:<7}", "UID");
    h += fmt::format("{:<16} {:<7} {:>9} {:>8}", "COMM", f.by_thread ? "TID" : "PID", "LAT(ms)",
                     "PAGES");
    if (f.extended)
        h += fmt::format(" {:>10}", "FREE(KB)");
    h += fmt::format(" {:<9} {:>5}", "KIND", "ORDER");
    if (f.extended)
        h += fmt::format(" {:<7} {:>10} {}", f.by_thread ? "PID" : "TID", "CGROUP", "GFP");
    return h;
}

std::string line(const drsnoop_event &e, double time_s, const LineFormat &f, const GfpNames &gfp) {
    std::string out;
    if (f.timestamp)
        out += fmt::format("{:<14.6f}", time_s);
    if (f.uid)
        out += fmt::format("{:<7}", e.uid);
    out += fmt::format("{:<16} {:<7} {:>9.3f} {:>8}", comm_of(e), f.by_thread ? e.tid : e.pid,
                       e.lat_ns / 1e6, e.nr_reclaimed);
    if (f.extended) {
        int64_t kb = free_kb(e, f);
        out += fmt::format(" {:>10}", kb < 0 ? std::string("-") : std::to_string(kb));
    }
    out += fmt::format(" {:<9} {:>5}", kind_name(e.kind), e.order);
    if (f.extended)
        out += fmt::format(" {:<7} {:>10} {}", f.by_thread ? e.pid : e.tid, e.cgroup_id,
                           gfp.decode(e.gfp));
    return out;
}

nlohmann::json json_event(const drsnoop_event &e, double time_s, const LineFormat &f,
                          const GfpNames &gfp) {
    nlohmann::json j = {{"time_s", time_s},
                        {"comm", comm_of(e)},
                        {"pid", e.pid},
                        {"tid", e.tid},
                        {"uid", e.uid},
                        {"kind", kind_name(e.kind)},
                        {"order", e.order},
                        {"gfp", gfp.decode(e.gfp)},
                        {"gfp_raw", e.gfp},
                        {"lat_ms", e.lat_ns / 1e6},
                        {"lat_ns", e.lat_ns},
                        {"pages", e.nr_reclaimed},
                        {"cgroup_id", e.cgroup_id}};
    if (e.nid >= 0)
        j["nid"] = e.nid;
    if (f.extended) {
        int64_t kb = free_kb(e, f);
        j["free_kb"] = kb < 0 ? nlohmann::json(nullptr) : nlohmann::json(kb);
    }
    return j;
}

} // namespace memlat::drsnoop
