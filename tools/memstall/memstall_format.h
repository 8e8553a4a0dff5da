// memstall's interval table and JSON, apart from the tool so the unit tests can check them.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "memstall.h"

namespace memlat::memstall {

// "direct", "memcg", "compact", "dirty", "swapin", "high", "thrash", "other".
const char *cause_name(uint32_t cause);

// What the kernel's table holds: per thread and cause since load.
using Snapshot = std::map<std::pair<uint32_t, uint32_t>, memstall_value>; // (tid, cause)

struct CauseTime {
    uint64_t stalls = 0;
    uint64_t ns = 0;
    uint64_t max_ns = 0; // the largest single stall since load (not per interval)
};

// One row of the table: a process (pid, comm) or a memory cgroup (cgroup_id, its path).
struct Row {
    uint64_t id = 0;  // pid, or cgroup id with -C
    std::string name; // comm, or the cgroup's path
    std::array<CauseTime, MEMSTALL_CAUSES> causes{};
    uint64_t total_ns() const;
};

enum class Grouping { Process, Cgroup };

// The stalls between two snapshots, summed per process or cgroup, largest total first.
// Entries `before` has and `now` has not were removed between them: they add nothing.
std::vector<Row> rows(const Snapshot &now, const Snapshot &before, Grouping grouping,
                      const std::map<uint64_t, std::string> &cgroup_paths);

// The table, top style: STALL% is the stall time as a share of the interval's wall time (a
// process with several stalled threads can pass 100%), then per cause in ms.
std::string header(Grouping grouping);
std::string line(const Row &row, double interval_s, Grouping grouping);
nlohmann::json json_row(const Row &row, double interval_s, Grouping grouping);

} // namespace memlat::memstall
