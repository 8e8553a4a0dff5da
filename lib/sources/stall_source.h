// memstall's counting loaded for another front-end (`memlat top`): the stall time of every task
// per thread and cause, in the kernel since load, read as memstall's own Snapshot.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sources/stalls.h"

namespace memlat {
struct CommonOptions;
}

namespace memlat::memstall {

class StallSource {
  public:
    virtual ~StallSource() = default;
    // The kernel's table now. The entries of threads that have exited then go: their stalls
    // are in this snapshot, and rows() counts nothing for an entry the next one lacks.
    virtual Snapshot take_snapshot() = 0;
    // The causes this host cannot measure as themselves, and why (memstall -j's
    // unmeasured_causes): their 0 is no answer.
    virtual const std::map<uint32_t, std::string> &unmeasured() const = 0;
    // Whether a task's cgroup id is of the memory controller's v1 hierarchy (else cgroup v2).
    virtual bool memcg_on_v1() const = 0;
    // Stalls not counted since load: a table was full.
    virtual uint64_t table_full() const = 0;
    // The kernel memory of its BPF maps (memlock), which the process's RSS does not show.
    virtual double map_memory_bytes() const = 0;
    // The stacks that stalled process `pid` the longest since load, `per_cause` of each
    // cause, symbolized; nullopt when loaded without stacks.
    virtual std::optional<std::vector<StallStack>> stacks_of(uint32_t pid,
                                                             size_t per_cause) const = 0;
};

// memstall with no filter, loaded and attached as `memstall` would be with `common`'s -v,
// --btf and the environment's MEMLAT_DISABLE_*, and with `stacks` as memstall -s (its stack
// tables, and a stack walk per stall). A RuntimeError (or a failed privilege check) where it
// cannot run; stderr says once what this host cannot measure.
std::unique_ptr<StallSource> load_stall_source(const CommonOptions &common, bool stacks);

} // namespace memlat::memstall
