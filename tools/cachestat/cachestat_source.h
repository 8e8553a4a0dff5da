// cachestat's counting loaded for another front-end (`memlat top`): page-cache accesses,
// misses, hits and dirties machine-wide and per memory cgroup, counted in the kernel since load.
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "cachestat_format.h"

namespace memlat {
struct CommonOptions;
}

namespace memlat::cachestat {

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
std::unique_ptr<CacheSource> load_cache_source(const CommonOptions &common);

} // namespace memlat::cachestat
