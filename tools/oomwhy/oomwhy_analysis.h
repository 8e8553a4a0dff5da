// oomwhy's analysis of a kill, apart from its rendering (oomwhy_format.h) and the tool so the
// unit tests can check it: the constraint, the limit that fired, and the lead-up's stalls.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "oomwhy.h"
#include "sources/stalls.h"

namespace memlat::oomwhy {

// What the kernel limited the allocation by, as its own report's `constraint=` says it.
// The values are the BPF side's counters' (enum oomwhy_constraint).
enum class Constraint {
    Unknown = OOMWHY_CONSTRAINT_UNKNOWN,
    Global = OOMWHY_CONSTRAINT_GLOBAL,
    Memcg = OOMWHY_CONSTRAINT_MEMCG,
    Cpuset = OOMWHY_CONSTRAINT_CPUSET,
    MemoryPolicy = OOMWHY_CONSTRAINT_MEMPOLICY,
};
// "memcg", "global", "cpuset", "mempolicy", "unknown".
const char *constraint_name(Constraint c);
// The kernel's name: CONSTRAINT_MEMCG, CONSTRAINT_NONE, CONSTRAINT_CPUSET,
// CONSTRAINT_MEMORY_POLICY; "" for Unknown.
const char *kernel_constraint_name(Constraint c);
// "0", "0,2-3": a mask of NUMA nodes as the kernel lists them.
std::string node_list(uint64_t nodes);

// The trigger ran the OOM killer right after its last reclaim round: a memory cgroup's
// (try_charge_memcg reclaims the cgroup over its limit, then calls mem_cgroup_oom) or the
// page allocator's (direct reclaim, then __alloc_pages_may_oom): global, or limited to some
// nodes by the trigger's memory policy or cpuset (k.node_constraint). A kill with no reclaim
// before it in the trigger (sysrq-f, a kernel thread) is Unknown.
Constraint constraint_of(const oomwhy_kill &k);

// The limit that fired. Where the kernel takes its memcg OOM lock (5.10 to 6.11, and cgroup
// v1 since), it holds it on the OOM memcg and every cgroup below it while the OOM killer runs:
// the outermost locked level of the trigger's cgroups is the one (FoundBy::OomLock).
// Elsewhere the usage tells: try_charge_memcg charges the memory+swap counter (cgroup v1) and
// then the memory counter of each level from the task's cgroup up, and fails at the first
// level where usage + pages > max. The OOM killer runs only for charges of at most 8 pages
// (order <= PAGE_ALLOC_COSTLY_ORDER) after reclaim left less than that, so the level that
// fired is the innermost with less than OOMWHY_CHARGE_PAGES (8) below its limit, memory+swap first
// (FoundBy::Usage). Memory freed in between (per-CPU charge stocks drained, RCU-freed kernel
// objects) can leave every level further from its limit at the kill: then the level nearest
// to its limit (FoundBy::Nearest), an inference the report says.
struct LimitHit {
    // The values of enum oomwhy_found_by (oomwhy_limit_that_fired() decides, oomwhy.h).
    enum class FoundBy { None, OomLock, Usage, Nearest };
    int level = -1;     // index into k.level; -1: none (no level has a limit)
    bool memsw = false; // cgroup v1's memory.memsw.limit_in_bytes, else the memory limit
    FoundBy found_by = FoundBy::None;
};
const char *found_by_name(LimitHit::FoundBy how); // "oom_lock", "usage", "nearest", "none"
LimitHit limit_that_fired(const oomwhy_kill &k);

// A limit as cgroups show it: PAGE_COUNTER_MAX (and more) is no limit.
bool is_limit(uint64_t pages);

// What the tool learned after the kill: the victim's exit and the reaper's steps.
struct Aftermath {
    std::optional<uint64_t> exit_ns;        // the victim thread passed sched_process_exit
    std::optional<uint64_t> reaper_wake_ns; // oom:wake_reaper
    std::optional<uint64_t> reap_start_ns, reap_finish_ns;
    bool reap_skipped = false;
};

// The lead-up's stall history: what memstall counted, a second at a time.
using CauseNs = std::array<uint64_t, MEMSTALL_CAUSES>;
struct StalledThread {
    uint32_t tid = 0, pid = 0;
    uint64_t cgroup_id = 0;
    std::string comm;
    CauseNs ns{};
    uint64_t total() const;
};
struct StallSecond {
    uint64_t end_ns = 0; // CLOCK_MONOTONIC, as the records' ts_ns
    std::vector<StalledThread> threads;
};
// The threads that stalled between two of memstall's snapshots, and how long by cause.
std::vector<StalledThread> stalled_between(const memstall::Snapshot &now,
                                           const memstall::Snapshot &before);

// The history cut to the OOM domain (the cgroup that fired and those below it, or the host):
// each second's stall time by cause, oldest first, and the most stalled threads.
struct LeadUpStalls {
    std::string domain; // the cgroup's path; "" for the host
    struct Second {
        double before_kill_s = 0; // how long before the kill the second ended
        CauseNs ns{};
    };
    std::vector<Second> seconds;
    std::vector<StalledThread> most_stalled; // at most `top`, the largest total first
    CauseNs total{};
    // The history ends when oomwhy read memstall's table after the kill's record came: this
    // long after the kill (milliseconds), whose stalls (the trigger reclaiming on while the
    // victim exits) are in its last second.
    uint64_t read_after_kill_ns = 0;
};
LeadUpStalls lead_up_stalls(const std::deque<StallSecond> &history, uint64_t kill_ns,
                            const std::string &domain,
                            const std::function<bool(uint64_t cgroup_id)> &in_domain,
                            size_t top = 5);

} // namespace memlat::oomwhy
