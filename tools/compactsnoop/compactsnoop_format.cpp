#include "compactsnoop_format.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <vector>

#include "cli/output.h"

namespace memlat::compactsnoop {

namespace {

std::string comm_of(const compactsnoop_event &e) {
    return std::string(e.comm, strnlen(e.comm, sizeof(e.comm)));
}

std::string name_or_number(const std::map<int64_t, std::string> &names, int64_t value) {
    auto it = names.find(value);
    return it != names.end() ? it->second : std::to_string(value);
}

// The event's counts are __u64 (unsigned long long), the arithmetic's uint64_t.
std::vector<uint64_t> free_lists(const compactsnoop_event &e) {
    uint32_t n = e.nr_orders < COMPACTSNOOP_MAX_ORDERS ? e.nr_orders : COMPACTSNOOP_MAX_ORDERS;
    return std::vector<uint64_t>(e.nr_free, e.nr_free + n);
}

bool have_zone_state(const compactsnoop_event &e) {
    return (e.flags & COMPACTSNOOP_HAVE_ZONE_STATE) != 0;
}

} // namespace

ContigInfo contig_info(std::span<const uint64_t> nr_free, unsigned suitable_order) {
    ContigInfo info;
    for (unsigned order = 0; order < nr_free.size(); ++order) {
        uint64_t blocks = nr_free[order];
        info.free_blocks_total += blocks;
        info.free_pages += blocks << order;
        if (order >= suitable_order)
            info.free_blocks_suitable += blocks << (order - suitable_order);
    }
    return info;
}

int fragmentation_index(unsigned order, const ContigInfo &info) {
    if (info.free_blocks_total == 0)
        return 0;
    if (info.free_blocks_suitable != 0)
        return -1000;
    const uint64_t requested = uint64_t{1} << order;
    // Integer division at both steps, as the kernel's div_u64().
    return 1000 -
           static_cast<int>((1000 + info.free_pages * 1000 / requested) / info.free_blocks_total);
}

std::optional<int> fragmentation_index(std::span<const uint64_t> nr_free, int order) {
    if (order < 0 || static_cast<size_t>(order) >= nr_free.size())
        return std::nullopt;
    return fragmentation_index(order, contig_info(nr_free, order));
}

std::string fragindex_text(int index) {
    // The kernel prints index / 1000 and index % 1000; -1000 is the only negative value.
    return fmt::format("{}{}.{:03}", index < 0 ? "-" : "", std::abs(index) / 1000,
                       std::abs(index) % 1000);
}

const char *kind_name(uint32_t kind) {
    static const std::array<const char *, COMPACTSNOOP_KINDS> names{"direct", "kcompactd",
                                                                    "proactive", "manual"};
    return kind < COMPACTSNOOP_KINDS ? names[kind] : "unknown";
}

std::string zone_name(const compactsnoop_event &e, const Names &n) {
    return e.zone < 0 ? "-" : name_or_number(n.zones, e.zone);
}

std::string status_name(int32_t status, const Names &n) {
    return name_or_number(n.statuses, status);
}

std::string mode_name(const compactsnoop_event &e, const Names &n) {
    if (e.mode >= 0)
        return name_or_number(n.modes, e.mode);
    return e.sync ? "sync" : "async";
}

// BCC's columns in BCC's order (TIME(s) COMM PID NODE ZONE ORDER MODE, with -e FRAGIDX MIN LOW
// HIGH FREE, then LAT(ms) STATUS), memlat's own after them: KIND, with -e MIGRATED FAILED. A
// script that reads BCC's fields by position reads the same fields here.
std::string header(const LineFormat &f) {
    std::string h;
    if (f.timestamp)
        h += fmt::format("{:<14}", "TIME(s)");
    h += fmt::format("{:<16} {:<7} {:>4} {:<8} {:>5} {:<10}", "COMM", "PID", "NODE", "ZONE",
                     "ORDER", "MODE");
    if (f.extended)
        h += fmt::format(" {:>7} {:>8} {:>8} {:>8} {:>8}", "FRAGIDX", "MIN", "LOW", "HIGH", "FREE");
    h += fmt::format(" {:>9} {:<16} ", "LAT(ms)", "STATUS");
    if (f.extended)
        h += fmt::format("{:<9} {:>8} {:>6}", "KIND", "MIGRATED", "FAILED");
    else
        h += "KIND";
    return h;
}

std::string line(const compactsnoop_event &e, double time_s, const LineFormat &f, const Names &n) {
    std::string out;
    if (f.timestamp)
        out += fmt::format("{:<14.6f}", time_s);
    out += fmt::format("{:<16} {:<7} {:>4} {:<8} {:>5} {:<10}", comm_of(e), e.pid,
                       e.nid < 0 ? std::string("-") : std::to_string(e.nid), zone_name(e, n),
                       e.order, mode_name(e, n));
    if (f.extended) {
        auto dash = [](std::optional<uint64_t> v) {
            return v ? std::to_string(*v) : std::string("-");
        };
        bool zs = have_zone_state(e);
        auto index = zs ? fragmentation_index(free_lists(e), e.order) : std::nullopt;
        out += fmt::format(" {:>7} {:>8} {:>8} {:>8} {:>8}",
                           index ? fragindex_text(*index) : std::string("-"),
                           dash(zs ? std::optional<uint64_t>(e.wmark_min) : std::nullopt),
                           dash(zs ? std::optional<uint64_t>(e.wmark_low) : std::nullopt),
                           dash(zs ? std::optional<uint64_t>(e.wmark_high) : std::nullopt),
                           dash(zs ? std::optional<uint64_t>(e.free_pages) : std::nullopt));
    }
    out += fmt::format(" {:>9.3f} {:<16} ", e.lat_ns / 1e6, status_name(e.status, n));
    if (f.extended)
        out += fmt::format("{:<9} {:>8} {:>6}", kind_name(e.kind), e.migrated, e.failed);
    else
        out += kind_name(e.kind);
    return out;
}

nlohmann::json json_event(const compactsnoop_event &e, double time_s, const LineFormat &f,
                          const Names &n, const GfpNames &gfp) {
    using nlohmann::json;
    auto known = [](int32_t v) { return v < 0 ? json(nullptr) : json(v); };
    json j = {{"time_s", time_s},
              {"comm", comm_of(e)},
              {"pid", e.pid},
              {"tid", e.tid},
              {"nid", known(e.nid)},
              {"zone", e.zone < 0 ? json(nullptr) : json(zone_name(e, n))},
              {"zone_idx", known(e.zone)},
              {"order", e.order},
              {"mode", mode_name(e, n)},
              {"sync", e.sync != 0},
              {"kind", kind_name(e.kind)},
              {"lat_ms", e.lat_ns / 1e6},
              {"lat_ns", e.lat_ns},
              {"status", status_name(e.status, n)},
              {"status_raw", e.status},
              {"migrated", e.migrated},
              {"failed", e.failed}};
    if (e.flags & COMPACTSNOOP_HAVE_CC) {
        j["whole_zone"] = e.whole_zone != 0;
        j["gfp"] = gfp.decode(e.gfp);
    }
    if (e.flags & COMPACTSNOOP_HAVE_ENTRY) {
        j["priority"] = name_or_number(n.prios, e.prio);
        if (!(e.flags & COMPACTSNOOP_HAVE_CC))
            j["gfp"] = gfp.decode(e.gfp);
    }
    if (f.extended) {
        bool zs = have_zone_state(e);
        auto index = zs ? fragmentation_index(free_lists(e), e.order) : std::nullopt;
        j["fragindex"] = index ? json(*index / 1000.0) : json(nullptr);
        j["wmark_min"] = zs ? json(e.wmark_min) : json(nullptr);
        j["wmark_low"] = zs ? json(e.wmark_low) : json(nullptr);
        j["wmark_high"] = zs ? json(e.wmark_high) : json(nullptr);
        j["wmark_boost"] = zs ? json(e.wmark_boost) : json(nullptr);
        j["free_pages"] = zs ? json(e.free_pages) : json(nullptr);
        j["nr_free"] = zs ? json(free_lists(e)) : json(nullptr);
    }
    return j;
}

namespace {

struct SummaryRow {
    uint32_t kind;
    int32_t status;
    compactsnoop_summary s;
};

std::vector<SummaryRow> summary_rows(const SummaryCounts &c) {
    std::vector<SummaryRow> rows;
    for (uint32_t kind = 0; kind < COMPACTSNOOP_KINDS; ++kind)
        for (int32_t st = 0; st < COMPACTSNOOP_MAX_STATUS; ++st)
            if (c.summary[kind][st].runs != 0)
                rows.push_back({kind, st, c.summary[kind][st]});
    return rows;
}

// Every status's runs of `kind` together.
compactsnoop_summary kind_total(const std::vector<SummaryRow> &rows, uint32_t kind) {
    compactsnoop_summary all{};
    for (const auto &r : rows) {
        if (r.kind != kind)
            continue;
        all.runs += r.s.runs;
        all.total_ns += r.s.total_ns;
        all.max_ns = std::max(all.max_ns, r.s.max_ns);
        all.migrated += r.s.migrated;
        all.failed += r.s.failed;
    }
    return all;
}

std::string summary_status(int32_t status, const Names &n) {
    return status == COMPACTSNOOP_MAX_STATUS - 1 ? std::string("other") : status_name(status, n);
}

std::string summary_row(const char *kind, const std::string &status,
                        const compactsnoop_summary &s) {
    return fmt::format("{:<10} {:<16} {:>8} {:>12.3f} {:>10.3f} {:>10} {:>8}\n", kind, status,
                       s.runs, s.total_ns / 1e6, s.max_ns / 1e6, s.migrated, s.failed);
}

} // namespace

std::string summary_text(const SummaryCounts &c, const Names &n) {
    const auto rows = summary_rows(c);
    std::string out = "\nCompaction runs by kind and status:\n";
    out += fmt::format("{:<10} {:<16} {:>8} {:>12} {:>10} {:>10} {:>8}\n", "KIND", "STATUS", "RUNS",
                       "TOTAL(ms)", "MAX(ms)", "MIGRATED", "FAILED");
    for (uint32_t kind = 0; kind < COMPACTSNOOP_KINDS; ++kind) {
        int statuses = 0;
        for (const auto &r : rows)
            if (r.kind == kind) {
                out += summary_row(kind_name(kind), summary_status(r.status, n), r.s);
                ++statuses;
            }
        if (statuses > 1)
            out += summary_row(kind_name(kind), "(all)", kind_total(rows, kind));
    }
    if (rows.empty())
        out += "(none)\n";
    if (c.kind_mask & (1u << COMPACTSNOOP_DIRECT))
        out += fmt::format("\nDirect-compaction entries: {} ({} ran compaction in a zone); zones "
                           "skipped as deferred: {}\n",
                           c.direct_entries, c.direct_entries_run, c.deferred[COMPACTSNOOP_DIRECT]);
    if (c.kind_mask & (1u << COMPACTSNOOP_KCOMPACTD))
        out += fmt::format("kcompactd wake-ups: {}; zones skipped as deferred by kcompactd: {}\n",
                           c.kcompactd_wakes, c.deferred[COMPACTSNOOP_KCOMPACTD]);
    if (c.unpaired_ends != 0)
        out += fmt::format("\n{} runs not counted: their begin was not seen (under way when "
                           "tracing began, or the thread's state was evicted while it ran).\n",
                           c.unpaired_ends);
    if (c.lost_events != 0)
        out += fmt::format("\nLost {} events: the {} was full (the summary still counts them).\n",
                           c.lost_events, c.events_name);
    if (c.table_full != 0)
        out += fmt::format("\n{} runs not counted: per-thread state could not be allocated (task "
                           "storage out of memory, or the per-thread hash map full).\n",
                           c.table_full);
    return out;
}

nlohmann::json summary_json(const SummaryCounts &c, const Names &n) {
    auto stats = [](nlohmann::json row, const compactsnoop_summary &s) {
        row.update({{"runs", s.runs},
                    {"total_ns", s.total_ns},
                    {"total_ms", s.total_ns / 1e6},
                    {"max_ns", s.max_ns},
                    {"max_ms", s.max_ns / 1e6},
                    {"migrated", s.migrated},
                    {"failed", s.failed}});
        return row;
    };
    const auto rows = summary_rows(c);
    nlohmann::json list = nlohmann::json::array(), totals = nlohmann::json::array();
    for (const auto &r : rows)
        list.push_back(
            stats({{"kind", kind_name(r.kind)}, {"status", summary_status(r.status, n)}}, r.s));
    // Every kind's runs over its statuses: the summary is complete (a row per kind and status
    // the kernel reported), so nothing is left out of it.
    for (uint32_t kind = 0; kind < COMPACTSNOOP_KINDS; ++kind)
        if (const auto all = kind_total(rows, kind); all.runs != 0)
            totals.push_back(stats({{"kind", kind_name(kind)}}, all));
    nlohmann::json deferred = nlohmann::json::object();
    for (uint32_t kind = 0; kind < COMPACTSNOOP_KINDS; ++kind)
        if (c.deferred[kind] != 0)
            deferred[kind_name(kind)] = c.deferred[kind];
    return {{"summary", list},
            {"totals", totals},
            {skipped_runs_field, c.skipped_runs},
            {"direct_entries", c.direct_entries},
            {"direct_entries_run", c.direct_entries_run},
            {"deferred", deferred},
            {"kcompactd_wakes", c.kcompactd_wakes},
            {"unpaired_ends", c.unpaired_ends},
            {"lost_events", c.lost_events},
            {"table_full", c.table_full}};
}

} // namespace memlat::compactsnoop
