// cachestat's arithmetic and output lines, apart from the tool so the unit tests can check them.
// The counts themselves (Counts, the hit ratio, their JSON) are sources/page_cache.h's: memlat
// top shows them too.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cachestat.h"
#include "sources/page_cache.h"

namespace memlat::cachestat {

// The counts of one entry of the BPF side's tables.
Counts counts_of(const cachestat_counts &c);
// Pages of a folio of `order`.
uint64_t order_pages(unsigned order);

// Buffers and Cached of /proc/meminfo, in MiB (as BCC's BUFFERS_MB and CACHED_MB).
struct Meminfo {
    std::optional<double> buffers_mb, cached_mb;
};
Meminfo parse_meminfo(std::string_view text);

// "254:0" for the kernel's dev_t (major << 20 | minor).
std::string dev_name(uint32_t kernel_dev);
unsigned dev_major(uint32_t kernel_dev);
unsigned dev_minor(uint32_t kernel_dev);

// ---- the default view: one line per interval
struct LineFormat {
    bool timestamp = false;     // a TIME column (HH:MM:SS)
    bool accesses_known = true; // false: HITS and HITRATIO are unavailable
};
std::string header(const LineFormat &f);
std::string line(const Counts &c, const Meminfo &m, const LineFormat &f, std::string_view time);
// The summary's first line at the end of a run of `seconds`: "Total over 12.0 s: HITS ...",
// "-" for what is not known (accesses without their hooks).
std::string total_line(const Counts &c, double seconds, bool accesses_known);

// ---- the per-process and per-file views: a table per interval, busiest first
struct ProcRow {
    uint32_t pid = 0;
    uint32_t uid = 0;
    std::string comm;
    Counts c;
};
struct FileRow {
    uint32_t dev = 0; // the kernel's dev_t; 0 when the hook does not tell
    uint64_t ino = 0;
    std::optional<std::string> path;
    Counts c;
};
// Sorted by activity (ACCESSES + MISSES + DIRTIES), then by PID or (dev, ino).
void sort_rows(std::vector<ProcRow> &rows);
void sort_rows(std::vector<FileRow> &rows);

std::string table_title(std::string_view time, const Meminfo &m);
std::string proc_header();
std::string proc_line(const ProcRow &r, bool accesses_known);
nlohmann::json proc_json(const ProcRow &r, bool accesses_known);
std::string file_header();
std::string file_line(const FileRow &r, bool accesses_known);
nlohmann::json file_json(const FileRow &r, bool accesses_known);

} // namespace memlat::cachestat
