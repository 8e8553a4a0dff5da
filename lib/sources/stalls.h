// memstall's interval table and JSON, apart from the tool so the unit tests can check them.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernel/workloads.h"
#include "memlat/memstall.h"

namespace memlat::memstall {

// "direct", "memcg", "compact", "dirty", "swapin", "high", "thrash", "other".
const char *cause_name(uint32_t cause);
// The cause's column in the tables: "DIRECT", "MEMCG", ... "OTHER".
const char *cause_column(uint32_t cause);

// Stall time as a share of an interval, in % (0 for an empty interval).
double share_percent(uint64_t ns, double interval_s);

// What the kernel's table holds: per thread and cause since load.
using Snapshot = std::map<std::pair<uint32_t, uint32_t>, memstall_value>; // (tid, cause)

struct CauseTime {
    uint64_t stalls = 0;
    uint64_t ns = 0;
    uint64_t max_ns = 0;          // the largest single stall since load (not per interval)
    uint64_t reclaimed_pages = 0; // what the stalls freed (the reclaim causes only)
};
using CauseTimes = std::array<CauseTime, MEMSTALL_CAUSES>;

// Whether the cause's stalls free pages (direct and memory-cgroup reclaim): their JSON carries
// "reclaimed_pages".
bool frees_pages(uint32_t cause);
// The pages the reclaim causes freed.
uint64_t reclaimed_pages(const CauseTimes &causes);
// {cause: {"stalls", "ns"[, "reclaimed_pages"]}} for the causes with a stall; with `max`,
// "max_ns" too.
nlohmann::json causes_json(const CauseTimes &causes, bool max = false);

// One row of the table: a process (pid, comm) or a memory cgroup (cgroup_id, its path).
struct Row {
    uint64_t id = 0;  // pid, tid, or cgroup id with -C
    std::string name; // comm, or the cgroup's path
    // -C: what runs in the cgroup (kernel/workloads.h): its display() shown in place of the
    // path when it names a container or a pod, and JSON's "workload".
    Workload workload;
    // Per process: its title (kernel/process_titles.h), the COMMAND column and JSON's "title",
    // "" when not read or none.
    std::string title;
    CauseTimes causes{};
    uint64_t total_ns() const;
};

// Per process (pid, comm), per thread (tid, the thread's comm: memlat top's view of one
// process) or per memory cgroup (cgroup id, its path).
enum class Grouping { Process, Thread, Cgroup };

// The stalls between two snapshots, summed per process or cgroup, largest total first.
// Entries `before` has and `now` has not were removed between them: they add nothing.
std::vector<Row> rows(const Snapshot &now, const Snapshot &before, Grouping grouping,
                      const std::map<uint64_t, std::string> &cgroup_paths);

// The rows shown of an interval and what -r left out, so that the rows plus the left-out
// sum to the totals: a JSON consumer that sums what it gets learns what it did not get.
struct ShownRows {
    std::vector<Row> rows; // the first `max_rows`, largest total first
    Row left_out;          // the causes of the rows cut, summed (id 0, no name)
    size_t rows_left_out = 0;
    Row totals; // every row's causes, summed: rows + left_out
};
ShownRows cut_rows(std::vector<Row> rows, size_t max_rows);
// JSON: {"total": {"stall_ns", "causes": causes_json()}, "left_out_total": {"rows",
// "stall_ns", "causes"}}: objects, as "total" and "left_out_total" are in every tool.
void json_totals(const ShownRows &shown, nlohmann::json &out);
// Text: "N more processes (X ms of stalls) not shown: -r N" when -r cut rows, else "".
std::string left_out_line(const ShownRows &shown, Grouping grouping);

// The table, top style: STALL% is the stall time as a share of the interval's wall time (a
// process with several stalled threads can pass 100%), then per cause in ms.
std::string header(Grouping grouping);
std::string line(const Row &row, double interval_s, Grouping grouping);
nlohmann::json json_row(const Row &row, double interval_s, Grouping grouping);

// -s: the stacks that stalled the longest. A row of the BPF side's table of stacks...
using StackRow = std::pair<memstall_stack_key, memstall_stack_value>;
// ...and the ones shown: per cause, in cause order, the `per_cause` rows with the most stalled
// time, longest first (equal times keep the table's order).
std::vector<StackRow> most_stalled_stacks(std::vector<StackRow> rows, size_t per_cause);

// The process name of a stack's entry.
std::string stack_comm(const memstall_stack_value &v);

// One shown stack with its frames symbolized (StackSymbolizer in the tool).
struct StallStack {
    StackRow row;
    std::vector<std::string> kernel, user;
};
// As text: a heading, then per stack its cause, stalls, time and task, its kernel frames,
// "--", and its user frames.
std::string stacks_text(const std::vector<StallStack> &stacks);
// As one JSON object {"stacks": [...]} (-j).
nlohmann::json stacks_json(const std::vector<StallStack> &stacks);

} // namespace memlat::memstall
