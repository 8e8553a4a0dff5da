// Cgroups as the BPF side identifies them: a cgroup's id is its kernfs node id, the same on
// cgroup v1 and v2, and its level is its depth below the hierarchy's root.
#pragma once

#include <cstdint>
#include <string>

namespace memlat {

struct CgroupTarget {
    uint64_t id = 0;
    int level = 0;
    bool v1 = false; // in a cgroup v1 hierarchy (then always the memory controller's)
};

// Resolves a cgroup directory for -G. Throws UsageError when the path is not a cgroup, or is
// in a v1 hierarchy other than the memory controller's.
CgroupTarget resolve_cgroup(const std::string &path);

// Whether the memory controller is mounted as a cgroup v1 hierarchy (then a task's memory
// cgroup lives there, not in its cgroup v2 cgroup).
bool memory_controller_on_v1();

} // namespace memlat
