#include "cachestat_format.h"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>

#include "base/files.h"

namespace memlat::cachestat {

namespace {

std::string ratio_text(const Counts &c, bool accesses_known) {
    auto r = hit_ratio(c);
    if (!accesses_known || !r)
        return "-";
    return fmt::format("{:.2f}%", *r);
}

std::string hits_text(const Counts &c, bool accesses_known) {
    return accesses_known ? std::to_string(c.hits) : "-";
}

std::string mb_text(const std::optional<double> &mb) {
    return mb ? fmt::format("{:.0f}", *mb) : "-";
}

} // namespace

Counts counts_of(const cachestat_counts &c) {
    return {c.c[CACHESTAT_ACCESSES], c.c[CACHESTAT_MISSES], c.c[CACHESTAT_DIRTIES],
            c.c[CACHESTAT_HITS]};
}

uint64_t order_pages(unsigned order) {
    return cachestat_order_pages(order);
}

Meminfo parse_meminfo(std::string_view text) {
    Meminfo m;
    std::string_view line;
    while (next_line(text, line)) {
        auto colon = line.find(':');
        if (colon == std::string_view::npos)
            continue;
        auto name = line.substr(0, colon);
        std::optional<double> *target = name == "Buffers"  ? &m.buffers_mb
                                        : name == "Cached" ? &m.cached_mb
                                                           : nullptr;
        if (target == nullptr)
            continue;
        auto value = line.substr(colon + 1);
        auto start = value.find_first_not_of(' ');
        if (start == std::string_view::npos)
            continue;
        value.remove_prefix(start);
        uint64_t kb = 0;
        auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), kb);
        if (ec == std::errc{} && end != value.data())
            *target = static_cast<double>(kb) / 1024.0;
    }
    return m;
}

unsigned dev_major(uint32_t kernel_dev) {
    return kernel_dev >> 20;
}

unsigned dev_minor(uint32_t kernel_dev) {
    return kernel_dev & ((1u << 20) - 1);
}

std::string dev_name(uint32_t kernel_dev) {
    return fmt::format("{}:{}", dev_major(kernel_dev), dev_minor(kernel_dev));
}

// ---- default view (the columns and widths of BCC's cachestat)

std::string header(const LineFormat &f) {
    std::string h = f.timestamp ? fmt::format("{:<8} ", "TIME") : "";
    return h + fmt::format("{:>8} {:>8} {:>8} {:>8} {:>12} {:>10}", "HITS", "MISSES", "DIRTIES",
                           "HITRATIO", "BUFFERS_MB", "CACHED_MB");
}

std::string line(const Counts &c, const Meminfo &m, const LineFormat &f, std::string_view time) {
    std::string out = f.timestamp ? fmt::format("{:<8} ", time) : "";
    return out + fmt::format("{:>8} {:>8} {:>8} {:>8} {:>12} {:>10}",
                             hits_text(c, f.accesses_known), c.misses, c.dirties,
                             ratio_text(c, f.accesses_known), mb_text(m.buffers_mb),
                             mb_text(m.cached_mb));
}

std::string total_line(const Counts &c, double seconds, bool accesses_known) {
    const auto ratio = hit_ratio(c);
    return fmt::format(
        "Total over {:.1f} s: HITS {} MISSES {} DIRTIES {} HITRATIO {} (ACCESSES {})", seconds,
        accesses_known ? std::to_string(c.hits) : "-", c.misses, c.dirties,
        accesses_known && ratio ? fmt::format("{:.2f}%", *ratio) : "-",
        accesses_known ? std::to_string(c.accesses) : "-");
}

// ---- per-process and per-file views

void sort_rows(std::vector<ProcRow> &rows) {
    std::sort(rows.begin(), rows.end(), [](const ProcRow &a, const ProcRow &b) {
        if (a.c.activity() != b.c.activity())
            return a.c.activity() > b.c.activity();
        return a.pid < b.pid;
    });
}

void sort_rows(std::vector<FileRow> &rows) {
    std::sort(rows.begin(), rows.end(), [](const FileRow &a, const FileRow &b) {
        if (a.c.activity() != b.c.activity())
            return a.c.activity() > b.c.activity();
        return a.dev != b.dev ? a.dev < b.dev : a.ino < b.ino;
    });
}

std::string table_title(std::string_view time, const Meminfo &m) {
    return fmt::format("{} Buffers MB: {} / Cached MB: {}", time, mb_text(m.buffers_mb),
                       mb_text(m.cached_mb));
}

std::string proc_header() {
    return fmt::format("{:>7} {:>6} {:<16} {:>9} {:>9} {:>9} {:>9}", "PID", "UID", "COMM", "HITS",
                       "MISSES", "DIRTIES", "READ_HIT%");
}

std::string proc_line(const ProcRow &r, bool accesses_known) {
    return fmt::format("{:>7} {:>6} {:<16} {:>9} {:>9} {:>9} {:>9}", r.pid, r.uid, r.comm,
                       hits_text(r.c, accesses_known), r.c.misses, r.c.dirties,
                       ratio_text(r.c, accesses_known));
}

nlohmann::json proc_json(const ProcRow &r, bool accesses_known) {
    nlohmann::json j = json_counts(r.c, accesses_known);
    j["pid"] = r.pid;
    j["uid"] = r.uid;
    j["comm"] = r.comm;
    return j;
}

std::string file_header() {
    return fmt::format("{:>9} {:>12} {:>9} {:>9} {:>9} {:>9} {}", "DEV", "INO", "HITS", "MISSES",
                       "DIRTIES", "HITRATIO", "PATH");
}

std::string file_line(const FileRow &r, bool accesses_known) {
    return fmt::format("{:>9} {:>12} {:>9} {:>9} {:>9} {:>9} {}", dev_name(r.dev), r.ino,
                       hits_text(r.c, accesses_known), r.c.misses, r.c.dirties,
                       ratio_text(r.c, accesses_known), r.path.value_or("-"));
}

nlohmann::json file_json(const FileRow &r, bool accesses_known) {
    nlohmann::json j = json_counts(r.c, accesses_known);
    j["dev"] = dev_name(r.dev);
    j["ino"] = r.ino;
    j["path"] = r.path ? nlohmann::json(*r.path) : nlohmann::json(nullptr);
    return j;
}

} // namespace memlat::cachestat
