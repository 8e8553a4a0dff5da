// The page-cache counts cachestat takes in the kernel (tools/cachestat), as cachestat and
// memlat top read and show them: accesses, misses, hits and dirties over a window, their hit
// ratio and JSON, and cachestat's counting loaded for another front-end (memlat top),
// machine-wide and per memory cgroup since load. Named cachestat:: as the tool that counts.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

namespace memlat {
struct CommonOptions;
}

namespace memlat::cachestat {

// Pages counted over some window. `accesses` is meaningless when access counting is
// unavailable on the running kernel; the formatting then prints HITS and HITRATIO as "-".
struct Counts {
    uint64_t accesses = 0; // pages looked up by reads and faults
    uint64_t misses = 0;   // pages added to the page cache
    uint64_t dirties = 0;  // pages that went from clean to dirty
    uint64_t hits = 0;     // accessed pages no miss of the same thread in the file accounts for

    Counts &operator+=(const Counts &o);
    // The change since `before`; a counter that went backwards (it cannot) gives 0.
    Counts since(const Counts &before) const;
    uint64_t activity() const { return accesses + misses + dirties; }
    // Whether anything was counted: hits too, which a thread's exit can settle after its last
    // access (an mmap fault's, owed until then), in an interval with nothing else of it.
    bool counted_any() const { return activity() != 0 || hits != 0; }
    bool operator==(const Counts &) const = default;
};

// HITRATIO in percent = HITS / ACCESSES * 100, at most 100 (an mmap fault's hit is known only
// at the thread's next event, which may fall in the next interval); none when nothing was
// accessed.
std::optional<double> hit_ratio(const Counts &c);
// {"accesses", "hits", "misses", "dirties", "hit_ratio_pct"}: null for what is not known
// (accesses without their hooks).
nlohmann::json json_counts(const Counts &c, bool accesses_known);

// The counters since load: machine-wide, and per memory cgroup id (the memory controller's
// hierarchy on cgroup v1) of the task that caused them.
struct CgroupSnapshot {
    Counts total;
    std::map<uint64_t, Counts> cgroups;
    uint64_t table_full = 0; // events not counted per cgroup: the table was full
};

class CacheSource {
  public:
    virtual ~CacheSource() = default;
    virtual CgroupSnapshot take_snapshot() = 0;
    // Whether accesses (and so hits) are counted: a kernel without the filemap access
    // tracepoints (6.12) counts them only with fentry or kprobes.
    virtual bool accesses_known() const = 0;
    // A cgroup that is gone: its entry goes, to keep room for the cgroups that live.
    virtual void forget(uint64_t cgroup_id) = 0;
    // The kernel memory of its BPF maps (memlock).
    virtual double map_memory_bytes() const = 0;
};

// cachestat with no filter and a table per memory cgroup (`max_entries` of them), loaded and
// attached as `cachestat` would be with `common`'s -v, --btf and the environment's
// MEMLAT_DISABLE_*. A RuntimeError where it cannot run.
std::unique_ptr<CacheSource> load_cache_source(const CommonOptions &common); // cachestat.cpp

} // namespace memlat::cachestat
