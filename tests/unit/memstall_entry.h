// An entry of memstall's per-thread table (struct memstall_value) made by hand, for the tests
// of the views that read that table: memstall's own and oomwhy's.
#pragma once

#include <cstdint>
#include <cstring>

#include "memlat/memstall.h"

// `stalls` stalls of `ns` in all (the longest of them `ns` too), of a thread of process `pid`.
inline memstall_value memstall_entry(uint32_t pid, const char *comm, uint64_t cgroup,
                                     uint64_t stalls, uint64_t ns) {
    memstall_value v{
        .stalls = stalls, .total_ns = ns, .max_ns = ns, .cgroup_id = cgroup, .pid = pid};
    std::strncpy(v.comm, comm, sizeof(v.comm) - 1);
    return v;
}
