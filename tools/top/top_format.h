// memlat top's screen and JSON, apart from its loop so the unit tests can check them: the
// host's memory and stalls over an interval, then one row per memory cgroup that stalled,
// busiest first.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kernel/hypervisor.h"
#include "kernel/memory_state.h"
#include "memlat/memstall.h"
#include "sources/page_cache.h"
#include "sources/stalls.h"

namespace memlat::top {

using memstall::CauseTimes;

// What memlat top itself cost over an interval.
struct SelfCost {
    double cpu_share = 0; // CPU time used over the interval's length (user and system)
    double rss_bytes = 0; // VmRSS now
    double map_bytes = 0; // its BPF maps' kernel memory (memlock), which RSS does not show
};

// Page-cache use over an interval, in pages (cachestat's counts).
struct PageCache {
    cachestat::Counts counts;
    bool accesses_known = true; // else this kernel counts no accesses, and so no hits
    // The host's only: events since start counted machine-wide but in no cgroup's row, the
    // per-cgroup table being full (--max-entries).
    uint64_t table_full = 0;
};

// The host over one interval.
struct HostInterval {
    double interval_s = 0;
    HostMemory now;                                   // meminfo now; vmstat and PSI since boot
    std::map<std::string, uint64_t> vmstat_delta;     // how far each vmstat counter moved
    std::optional<uint64_t> psi_some_us, psi_full_us; // PSI's stall time in the interval
    CauseTimes stalls{};                              // memstall's, every task
    size_t cgroups_stalled = 0;                       // memory cgroups with stall time
    // TLB-shootdown IPIs the CPUs handled in the interval (none: no TLB row, not x86), and
    // how this machine flushes remote TLBs: with the hypervisor's flushes it stays 0.
    std::optional<uint64_t> tlb_shootdowns;
    FlushPath remote_flushes = FlushPath::Unknown;
    std::optional<SelfCost> self; // none: /proc/self could not be read
    // Every task's; none when top counts none (cachestat's programs did not load).
    std::optional<PageCache> page_cache;
};

// One memory cgroup over the interval.
struct CgroupInterval {
    uint64_t id = 0;
    std::string path; // its directory below the hierarchy's mount, "/" for the root
    std::string name; // what runs there (Workload::display()), "" if nothing known
    nlohmann::json workload = nullptr; // the same as -j gives it (workload_json())
    CauseTimes stalls{};
    CgroupMemory memory; // its files now (when files_read)
    bool files_read = false;
    // How far each memory event counter moved since top started (or since the cgroup was
    // first seen, if later): the limits met while watching.
    std::map<std::string, uint64_t> events_since_start;
    std::optional<uint64_t> psi_some_us; // memory.pressure's some total, in the interval
    std::optional<PageCache> page_cache; // its tasks', as the host's
    uint64_t stall_ns() const;
};

// Whether `filter` is part of the row's path or name (an empty filter: every row).
bool row_matches(const CgroupInterval &row, const std::string &filter);

// What the rows are sorted by: the largest first (the path: in order). STALL% ties are broken
// by the path, so that neither it nor CGROUP needs the cgroups' files (read only for the rows
// shown); the others' ties by memstall's stall time, PSI's, usage, then the path.
enum class SortKey { Stall, Usage, Events, Psi, Path };
inline constexpr std::array<SortKey, 5> sort_keys{SortKey::Stall, SortKey::Usage, SortKey::Events,
                                                  SortKey::Psi, SortKey::Path};
// The column's heading ("STALL%", "USAGE", "EVENTS", "PSI%", "CGROUP").
const char *sort_key_name(SortKey key);
void sort_rows(std::vector<CgroupInterval> &rows, SortKey key);

// Whether sorting by `key` needs the cgroups' files (usage, events, PSI).
bool sort_needs_files(SortKey key);

// Busiest first: memstall's stall time, then the path.
inline void sort_busiest(std::vector<CgroupInterval> &rows) {
    sort_rows(rows, SortKey::Stall);
}

// Pages reclaimed for memory cgroups' limits over an interval, from /proc/vmstat's deltas: the
// pgsteal_anon and pgsteal_file counters count every reclaim, pgsteal_kswapd, _direct,
// _khugepaged and _proactive only the global (mm/vmscan.c: !cgroup_reclaim()), so the
// difference is the limit reclaim. None on kernels without pgsteal_anon/file (before 5.8).
std::optional<uint64_t> memcg_reclaim_pages(const std::map<std::string, uint64_t> &vmstat_delta);

// The memory events counted since start, summed (the EVENTS column's sort key).
uint64_t events_total(const CgroupInterval &row);

// Sums the stall time of `rows` (memstall::rows(), one per cgroup) by cause, for the header.
CauseTimes total_stalls(const std::vector<memstall::Row> &rows);

// "1.5G", "812M", "64K", "0": bytes in at most four characters and a unit (powers of 1024).
std::string human_bytes(uint64_t bytes);

// The header, header_lines lines: time and interval; memory; memstall's stall time per cause
// (a cause this host cannot measure, `unmeasured`, shows "-") next to PSI's; the interval's
// reclaim, compaction, migration and refault rates from /proc/vmstat, and the TLB-shootdown
// IPIs from /proc/interrupts; what top itself costs.
inline constexpr size_t header_lines = 6;
std::string header_text(const HostInterval &host, const std::map<uint32_t, std::string> &unmeasured,
                        const std::string &time);

// Which columns a line of some width holds: the CGROUP column's width, and the causes that
// have a column of their own; the others (none when every cause fits) share one, REST, the
// sum of their stall time, so that a narrow terminal folds causes and never cuts EVENTS and
// PSI%.
struct TableLayout {
    size_t path_width = 32;
    std::vector<uint32_t> causes; // in cause order
    bool rest = false;            // a REST column for the causes without one
    bool reclaim = true;          // RECL/s: the pages its reclaim stalls freed, per second
    bool hits = true;             // HIT%: its page-cache hits as a share of its accesses
};
// Columns of a row besides the path, the causes', RECL/s and HIT% (USAGE LIMIT STALL%, EVENTS
// PSI%).
inline constexpr size_t fixed_columns = 21 + 16;
// Each cause's column, REST, RECL/s and HIT%.
inline constexpr size_t cause_column_width = 8;
// Every cause, the path `path_width` wide.
TableLayout full_layout(size_t path_width);
// The layout of a line `width` columns wide with a path at least `min_path` wide: every cause
// RECL/s and HIT% if they fit, the path taking what is left; else REST, then two causes,
// RECL/s, HIT% and as many causes as still fit, those with the most stall time in `weights` first
// (ties: cause order).
TableLayout fit_layout(size_t width, size_t min_path, const CauseTimes &weights);
// The width of a line of `layout`.
size_t line_width(const TableLayout &layout);

// The table: a heading, then a line per row. STALL% is memstall's stall time as a share of
// the interval (a cgroup with several stalled tasks can pass 100%), then per cause in ms;
// RECL/s the pages its tasks' direct and limit reclaim freed, per second; HIT% their page-cache
// hits as a share of their accesses ("-": none, or not counted);
// USAGE and LIMIT ("-": none; memory.high when lower than memory.max, marked "h"); EVENTS the
// limits met since start (max, then high and oom_kill where counted); PSI% the cgroup's own
// some share (v2). The path is cut from the left to the layout's width.
std::string table_heading(const TableLayout &layout);
std::string row_text(const CgroupInterval &row, double interval_s, const TableLayout &layout);

// The status line cut to `columns`, its middle given up so that the keys at its end (from
// "h help") stay on the screen.
std::string fit_status(const std::string &status, size_t columns);

// `text`'s lines folded to `width` columns: a longer line breaks after its last "; " or ", "
// (else space) that fits, and goes on indented by two.
std::string fold_lines(std::string_view text, size_t width);

// -j: one object per interval with the host and the rows (times in ns, sizes in bytes).
nlohmann::json snapshot_json(const HostInterval &host, const std::vector<CgroupInterval> &rows,
                             const std::map<uint32_t, std::string> &unmeasured,
                             const std::string &time);

} // namespace memlat::top
