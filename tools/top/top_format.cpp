#include "top/top_format.h"

#include <algorithm>
#include <fmt/format.h>

#include "base/files.h"

namespace memlat::top {

namespace {

using memstall::share_percent;

uint64_t value_or_zero(const std::map<std::string, uint64_t> &m, const std::string &key) {
    auto it = m.find(key);
    return it != m.end() ? it->second : 0;
}

// The sum of the counters whose names start with `prefix` (allocstall_dma32, _normal, ...).
uint64_t sum_prefixed(const std::map<std::string, uint64_t> &m, const std::string &prefix) {
    uint64_t sum = 0;
    for (auto it = m.lower_bound(prefix); it != m.end() && it->first.starts_with(prefix); ++it)
        sum += it->second;
    return sum;
}

// A count per second of the interval, as an integer when it is one.
std::string rate(uint64_t count, double interval_s) {
    const double r = interval_s > 0 ? static_cast<double>(count) / interval_s : 0;
    return r >= 10 || r == 0 ? fmt::format("{:.0f}", r) : fmt::format("{:.1f}", r);
}

// HIT%: "-" without accesses counted in the interval.
std::string hit_percent(const std::optional<PageCache> &cache) {
    if (!cache || !cache->accesses_known)
        return "-";
    const auto ratio = cachestat::hit_ratio(cache->counts);
    return ratio ? fmt::format("{:.1f}", *ratio) : "-";
}

std::string cut_left(const std::string &text, size_t width) {
    if (text.size() <= width)
        return text;
    if (width <= 1)
        return text.substr(text.size() - width);
    return "<" + text.substr(text.size() - (width - 1));
}

std::string limit_text(const CgroupMemory &m) {
    if (m.high_bytes && (!m.max_bytes || *m.high_bytes < *m.max_bytes))
        return human_bytes(*m.high_bytes) + "h";
    return m.max_bytes ? human_bytes(*m.max_bytes) : "-";
}

std::string events_text(const std::map<std::string, uint64_t> &events) {
    std::string out = fmt::format("{}", value_or_zero(events, "max"));
    if (events.contains("high"))
        out += fmt::format("/{}", events.at("high"));
    if (auto kills = value_or_zero(events, "oom_kill"); kills > 0)
        out += fmt::format(" K{}", kills);
    return out;
}

} // namespace

uint64_t CgroupInterval::stall_ns() const {
    uint64_t sum = 0;
    for (const auto &c : stalls)
        sum += c.ns;
    return sum;
}

bool row_matches(const CgroupInterval &row, const std::string &filter) {
    return filter.empty() || row.path.find(filter) != std::string::npos ||
           row.name.find(filter) != std::string::npos;
}

const char *sort_key_name(SortKey key) {
    switch (key) {
    case SortKey::Stall:
        return "STALL%";
    case SortKey::Usage:
        return "USAGE";
    case SortKey::Events:
        return "EVENTS";
    case SortKey::Psi:
        return "PSI%";
    case SortKey::Path:
        return "CGROUP";
    }
    return "?";
}

bool sort_needs_files(SortKey key) {
    return key != SortKey::Stall && key != SortKey::Path;
}

uint64_t events_total(const CgroupInterval &row) {
    uint64_t sum = 0;
    for (const auto &[name, count] : row.events_since_start)
        sum += count;
    return sum;
}

void sort_rows(std::vector<CgroupInterval> &rows, SortKey key) {
    auto first_key = [key](const CgroupInterval &r) -> uint64_t {
        switch (key) {
        case SortKey::Usage:
            return r.memory.usage_bytes.value_or(0);
        case SortKey::Events:
            return events_total(r);
        case SortKey::Psi:
            return r.psi_some_us.value_or(0);
        case SortKey::Stall:
        case SortKey::Path:
            break;
        }
        return r.stall_ns();
    };
    std::sort(rows.begin(), rows.end(), [&](const CgroupInterval &a, const CgroupInterval &b) {
        if (key == SortKey::Path)
            return a.path < b.path;
        if (key == SortKey::Stall)
            return a.stall_ns() != b.stall_ns() ? a.stall_ns() > b.stall_ns() : a.path < b.path;
        if (first_key(a) != first_key(b))
            return first_key(a) > first_key(b);
        if (a.stall_ns() != b.stall_ns())
            return a.stall_ns() > b.stall_ns();
        if (a.psi_some_us.value_or(0) != b.psi_some_us.value_or(0))
            return a.psi_some_us.value_or(0) > b.psi_some_us.value_or(0);
        if (a.memory.usage_bytes.value_or(0) != b.memory.usage_bytes.value_or(0))
            return a.memory.usage_bytes.value_or(0) > b.memory.usage_bytes.value_or(0);
        return a.path < b.path;
    });
}

CauseTimes total_stalls(const std::vector<memstall::Row> &rows) {
    CauseTimes sum{};
    for (const auto &row : rows)
        for (size_t cause = 0; cause < sum.size(); ++cause) {
            sum[cause].stalls += row.causes[cause].stalls;
            sum[cause].ns += row.causes[cause].ns;
            sum[cause].max_ns = std::max(sum[cause].max_ns, row.causes[cause].max_ns);
        }
    return sum;
}

std::string human_bytes(uint64_t bytes) {
    static constexpr std::array<char, 6> units{'K', 'M', 'G', 'T', 'P', 'E'};
    if (bytes < 1024)
        return fmt::format("{}", bytes);
    double v = static_cast<double>(bytes);
    size_t unit = 0;
    v /= 1024;
    while (v >= 1024 && unit + 1 < units.size()) {
        v /= 1024;
        ++unit;
    }
    // "9.5G" below 10 of a unit, "812M" from 10 (rounding may reach the next unit's 1024).
    return v < 10 ? fmt::format("{:.1f}{}", v, units[unit])
                  : fmt::format("{:.0f}{}", v, units[unit]);
}

std::optional<uint64_t> memcg_reclaim_pages(const std::map<std::string, uint64_t> &vmstat_delta) {
    if (!vmstat_delta.contains("pgsteal_file") || !vmstat_delta.contains("pgsteal_anon"))
        return std::nullopt;
    const uint64_t all =
        value_or_zero(vmstat_delta, "pgsteal_anon") + value_or_zero(vmstat_delta, "pgsteal_file");
    uint64_t global = 0;
    for (const char *who :
         {"pgsteal_kswapd", "pgsteal_direct", "pgsteal_khugepaged", "pgsteal_proactive"})
        global += value_or_zero(vmstat_delta, who);
    return all > global ? all - global : 0;
}

std::string header_text(const HostInterval &host, const std::map<uint32_t, std::string> &unmeasured,
                        const std::string &time) {
    const auto &mi = host.now.meminfo;
    const auto &vm = host.vmstat_delta;
    const double s = host.interval_s;
    std::string out =
        fmt::format("memlat top - {}  interval {:.1f} s  {} memory cgroup{} stalled\n", time, s,
                    host.cgroups_stalled, host.cgroups_stalled == 1 ? "" : "s");
    out += fmt::format(
        "Mem: {} total, {} available, {} free, {} cache, {} dirty, {} writeback",
        human_bytes(value_or_zero(mi, "MemTotal")), human_bytes(value_or_zero(mi, "MemAvailable")),
        human_bytes(value_or_zero(mi, "MemFree")), human_bytes(value_or_zero(mi, "Cached")),
        human_bytes(value_or_zero(mi, "Dirty")), human_bytes(value_or_zero(mi, "Writeback")));
    const uint64_t swap_total = value_or_zero(mi, "SwapTotal");
    if (swap_total > 0)
        out += fmt::format("; swap {} of {} used",
                           human_bytes(swap_total - value_or_zero(mi, "SwapFree")),
                           human_bytes(swap_total));
    if (const auto &cache = host.page_cache; cache && cache->accesses_known)
        out += fmt::format("; page cache {} pages/s, hit {}%", rate(cache->counts.accesses, s),
                           hit_percent(cache));
    else if (cache)
        out += fmt::format("; page cache {} misses/s (accesses not counted here)",
                           rate(cache->counts.misses, s));
    out += "\n";
    if (host.psi_some_us)
        out += fmt::format("PSI memory: some {:.1f}%, full {:.1f}% of the interval\n",
                           share_percent(*host.psi_some_us * 1000, s),
                           share_percent(host.psi_full_us.value_or(0) * 1000, s));
    else
        out += "PSI memory: not available (kernel without PSI, or booted with psi=0)\n";
    out += "Stalled (ms):";
    for (uint32_t cause = 0; cause < MEMSTALL_CAUSES; ++cause) {
        if (unmeasured.contains(cause))
            out += fmt::format(" {} -", memstall::cause_name(cause));
        else
            out +=
                fmt::format(" {} {:.1f}", memstall::cause_name(cause), host.stalls[cause].ns / 1e6);
    }
    out += "\n";
    // Pages: reclaimed directly by allocating tasks and by kswapd; stalls: direct reclaim
    // entries (allocstall_*) and direct compactions; refaults of evicted file and anon pages.
    const auto memcg = memcg_reclaim_pages(vm);
    out += fmt::format(
        "Per second: reclaim {} direct ({} stalls) {} kswapd {} memcg-limit pages; compaction {} "
        "stalls; migrated {} pages; refaults {}",
        rate(value_or_zero(vm, "pgsteal_direct"), s), rate(sum_prefixed(vm, "allocstall_"), s),
        rate(value_or_zero(vm, "pgsteal_kswapd"), s), memcg ? rate(*memcg, s) : "-",
        rate(value_or_zero(vm, "compact_stall"), s),
        rate(value_or_zero(vm, "pgmigrate_success"), s),
        rate(value_or_zero(vm, "workingset_refault_file") +
                 value_or_zero(vm, "workingset_refault_anon") +
                 value_or_zero(vm, "workingset_refault"),
             s));
    // A guest whose hypervisor flushes the other vCPUs' TLBs has no shootdown IPI to count
    // (memlat tlbflush counts the requests); arm64 has none at all (broadcast TLBI).
    if (host.remote_flushes == FlushPath::Hypervisor)
        out += "; TLB shootdowns - (the hypervisor flushes)";
    else if (host.tlb_shootdowns)
        out += fmt::format("; TLB shootdowns {}", rate(*host.tlb_shootdowns, s));
    out += "\n";
    if (host.self)
        out += fmt::format("memlat top itself: {:.2f}% of a CPU, {} RSS, {} of BPF maps\n",
                           100 * host.self->cpu_share,
                           human_bytes(static_cast<uint64_t>(host.self->rss_bytes)),
                           human_bytes(static_cast<uint64_t>(host.self->map_bytes)));
    else
        out += "memlat top itself: not read (/proc/self)\n";
    return out;
}

TableLayout full_layout(size_t path_width) {
    TableLayout layout{path_width, {}, false, true, true};
    for (uint32_t cause = 0; cause < MEMSTALL_CAUSES; ++cause)
        layout.causes.push_back(cause);
    return layout;
}

size_t line_width(const TableLayout &layout) {
    const size_t columns = layout.causes.size() + (layout.rest ? 1 : 0) + (layout.reclaim ? 1 : 0) +
                           (layout.hits ? 1 : 0);
    return layout.path_width + fixed_columns + cause_column_width * columns;
}

TableLayout fit_layout(size_t width, size_t min_path, const CauseTimes &weights) {
    const TableLayout full = full_layout(min_path);
    if (width >= line_width(full))
        return full_layout(width - (line_width(full) - min_path));
    std::array<uint32_t, MEMSTALL_CAUSES> order{};
    for (uint32_t cause = 0; cause < MEMSTALL_CAUSES; ++cause)
        order[cause] = cause;
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return weights[a].ns > weights[b].ns; });
    // Beside REST: two causes first, then RECL/s and HIT%, then more causes, as many as fit.
    const size_t room = width > min_path + fixed_columns + cause_column_width
                            ? width - min_path - fixed_columns - cause_column_width
                            : 0;
    size_t slots = room / cause_column_width;
    size_t kept = std::min<size_t>(slots, 2);
    slots -= kept;
    const bool reclaim = slots > 0;
    slots -= reclaim ? 1 : 0;
    const bool hits = slots > 0;
    slots -= hits ? 1 : 0;
    kept = std::min<size_t>(kept + slots, MEMSTALL_CAUSES - 1);
    TableLayout layout{0, std::vector<uint32_t>(order.begin(), order.begin() + kept), true, reclaim,
                       hits};
    std::sort(layout.causes.begin(), layout.causes.end());
    const size_t used = line_width(layout);
    layout.path_width = width > used + min_path ? width - used : min_path;
    return layout;
}

std::string table_heading(const TableLayout &layout) {
    std::string h = fmt::format("{:<{}} {:>6} {:>6} {:>6}", "CGROUP", layout.path_width, "USAGE",
                                "LIMIT", "STALL%");
    for (uint32_t cause : layout.causes)
        h += fmt::format(" {:>7}", memstall::cause_column(cause));
    if (layout.rest)
        h += fmt::format(" {:>7}", "REST");
    if (layout.reclaim)
        h += fmt::format(" {:>7}", "RECL/s");
    if (layout.hits)
        h += fmt::format(" {:>7}", "HIT%");
    h += fmt::format(" {:>9} {:>5}", "EVENTS", "PSI%");
    return h;
}

std::string row_text(const CgroupInterval &row, double interval_s, const TableLayout &layout) {
    const auto &m = row.memory;
    std::string l =
        fmt::format("{:<{}} {:>6} {:>6} {:>6.1f}", cut_left(row.path, layout.path_width),
                    layout.path_width, m.usage_bytes ? human_bytes(*m.usage_bytes) : "-",
                    limit_text(m), share_percent(row.stall_ns(), interval_s));
    uint64_t rest_ns = row.stall_ns();
    for (uint32_t cause : layout.causes) {
        l += fmt::format(" {:>7.1f}", row.stalls[cause].ns / 1e6);
        rest_ns -= row.stalls[cause].ns;
    }
    if (layout.rest)
        l += fmt::format(" {:>7.1f}", rest_ns / 1e6);
    if (layout.reclaim)
        l += fmt::format(" {:>7}", rate(memstall::reclaimed_pages(row.stalls), interval_s));
    if (layout.hits)
        l += fmt::format(" {:>7}", hit_percent(row.page_cache));
    l += fmt::format(" {:>9}", events_text(row.events_since_start));
    l += row.psi_some_us
             ? fmt::format(" {:>5.1f}", share_percent(*row.psi_some_us * 1000, interval_s))
             : fmt::format(" {:>5}", "-");
    return l;
}

std::string fit_status(const std::string &status, size_t columns) {
    if (status.size() <= columns)
        return status;
    const size_t keys = status.rfind("h help");
    constexpr std::string_view cut = "...  ";
    if (keys == std::string::npos || status.size() - keys + cut.size() >= columns)
        return status.substr(0, columns);
    const size_t tail = status.size() - keys;
    return status.substr(0, columns - tail - cut.size()) + std::string(cut) + status.substr(keys);
}

std::string fold_lines(std::string_view text, size_t width) {
    std::string out;
    std::string_view rest = text;
    for (std::string_view line; next_line(rest, line);) {
        std::string_view indent;
        while (line.size() + indent.size() > width && width > 8) {
            const size_t room = width - indent.size();
            size_t cut = std::string_view::npos;
            for (std::string_view sep : {"; ", ", ", " "}) {
                const size_t at = line.substr(0, room).rfind(sep);
                if (at != std::string_view::npos && at > 0) {
                    cut = at + sep.size() - 1; // the separator's mark stays, its space goes
                    break;
                }
            }
            if (cut == std::string_view::npos)
                cut = room;
            out += std::string(indent) + std::string(line.substr(0, cut)) + "\n";
            line.remove_prefix(std::min(line.size(), cut + (cut < room ? 1 : 0)));
            indent = "  ";
        }
        out += std::string(indent) + std::string(line) + "\n";
    }
    return out;
}

nlohmann::json snapshot_json(const HostInterval &host, const std::vector<CgroupInterval> &rows,
                             const std::map<uint32_t, std::string> &unmeasured,
                             const std::string &time) {
    using nlohmann::json;
    auto optional = [](const std::optional<uint64_t> &v) { return v ? json(*v) : json(nullptr); };
    auto page_cache = [](const std::optional<PageCache> &cache) {
        return cache ? cachestat::json_counts(cache->counts, cache->accesses_known) : json(nullptr);
    };
    json host_j = {{"memory_bytes", host.now.meminfo},
                   {"vmstat_delta", host.vmstat_delta},
                   {"memcg_reclaim_pages", optional(memcg_reclaim_pages(host.vmstat_delta))},
                   {"psi_some_us", optional(host.psi_some_us)},
                   {"psi_full_us", optional(host.psi_full_us)},
                   {"causes", memstall::causes_json(host.stalls)},
                   {"cgroups_stalled", host.cgroups_stalled},
                   {"tlb_shootdowns", optional(host.tlb_shootdowns)},
                   {"remote_flush_path", path_name(host.remote_flushes)},
                   {"page_cache", page_cache(host.page_cache)}};
    if (host.page_cache)
        host_j["page_cache"]["table_full"] = host.page_cache->table_full;
    json self = nullptr;
    if (host.self)
        self = {{"cpu_share", host.self->cpu_share},
                // Whole bytes, as every _bytes key (a record's are read back as numbers).
                {"rss_bytes", static_cast<uint64_t>(host.self->rss_bytes)},
                {"bpf_map_bytes", static_cast<uint64_t>(host.self->map_bytes)}};
    json list = json::array();
    for (const auto &r : rows)
        list.push_back({{"cgroup_id", r.id},
                        {"cgroup", r.path},
                        {"name", r.name.empty() ? json(nullptr) : json(r.name)},
                        {"workload", r.workload},
                        {"stall_ns", r.stall_ns()},
                        {"stall_pct", share_percent(r.stall_ns(), host.interval_s)},
                        {"causes", memstall::causes_json(r.stalls)},
                        {"reclaimed_pages", memstall::reclaimed_pages(r.stalls)},
                        {"usage_bytes", optional(r.memory.usage_bytes)},
                        {"max_bytes", optional(r.memory.max_bytes)},
                        {"high_bytes", optional(r.memory.high_bytes)},
                        {"events_since_start", r.events_since_start},
                        {"psi_some_us", optional(r.psi_some_us)},
                        {"page_cache", page_cache(r.page_cache)}});
    json unmeasured_j = json::object();
    for (const auto &[cause, why] : unmeasured)
        unmeasured_j[memstall::cause_name(cause)] = why;
    return {{"time", time},    {"interval_s", host.interval_s},     {"host", host_j},
            {"cgroups", list}, {"unmeasured_causes", unmeasured_j}, {"self", self}};
}

} // namespace memlat::top
