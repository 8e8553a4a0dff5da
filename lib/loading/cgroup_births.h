// The cgroups of the memory hierarchy made and removed while a tool runs, watched as the kernel
// makes them (tracepoints cgroup:cgroup_mkdir and cgroup:cgroup_rmdir), with the names their
// runtime's records give (kernel/workloads.h) read at once, while those records exist. A tool
// that walks the hierarchy at each interval misses a container that came and went between two
// walks: its rows had only the cgroup's id. With this, they have its path and names.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "base/verbosity.h"
#include "kernel/workloads.h"

struct bpf_object;

namespace memlat {

class CgroupBirths {
  public:
    struct Born {
        std::string path;  // in the hierarchy
        Workload workload; // as found at its birth, or looked for again shortly after
        bool removed = false;
    };

    // Watches the hierarchy the tools name tasks' cgroups in (`v1_memory`: the memory
    // controller's v1 hierarchy, else cgroup v2) from a thread of its own, which reads the
    // names of each new cgroup under `root` (host_root()). Null, said with -v, where the
    // kernel refuses: the tool then names only the cgroups its walks find.
    static std::unique_ptr<CgroupBirths> start(bool v1_memory, const Verbosity &v,
                                               std::string root = host_root());
    virtual ~CgroupBirths() = default;

    // What is known of the cgroup made while this ran, if it was.
    virtual std::optional<Born> find(uint64_t cgroup_id) const = 0;
    // Adds to `paths` (id -> path in the hierarchy, a walk's) each cgroup made while this ran
    // that is not there: removed since, or made after the walk.
    virtual void add_to(std::map<uint64_t, std::string> &paths) const = 0;
    // Gives `names` what was found for each cgroup made while this ran (WorkloadNames::
    // learn()): a container's records may be gone before a tool names its row.
    virtual void teach(WorkloadNames &names) const = 0;
    // A tool printed an interval: the cgroups removed before the one before are forgotten (a
    // stall's row comes at the latest in the interval after its cgroup went).
    virtual void interval_ended() = 0;
    // Births and removals the kernel could not hand over (its ring buffer full).
    virtual uint64_t lost() const = 0;
    // Cgroups kept.
    virtual size_t size() const = 0;
    // Its BPF object, whose maps' memory a tool counts as its own.
    virtual const bpf_object *object() const = 0;
    // At most this many cgroups are kept: past it the oldest removed ones go first.
    static constexpr size_t max_entries = 4096;
};

} // namespace memlat
