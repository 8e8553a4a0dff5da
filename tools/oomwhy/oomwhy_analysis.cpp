#include "oomwhy_analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace memlat::oomwhy {

uint64_t StalledThread::total() const {
    uint64_t sum = 0;
    for (uint64_t v : ns)
        sum += v;
    return sum;
}

std::vector<StalledThread> stalled_between(const memstall::Snapshot &now,
                                           const memstall::Snapshot &before) {
    std::map<uint32_t, StalledThread> threads;
    for (const auto &[key, value] : now) {
        const auto &[tid, cause] = key;
        if (cause >= MEMSTALL_CAUSES)
            continue;
        auto old = before.find(key);
        // A thread's entry only grows; one missing before is new since.
        const uint64_t was = old == before.end() ? 0 : old->second.total_ns;
        if (value.total_ns <= was)
            continue;
        StalledThread &t = threads[tid];
        t.tid = tid;
        t.pid = value.pid;
        t.cgroup_id = value.cgroup_id;
        t.comm = std::string(value.comm, strnlen(value.comm, sizeof(value.comm)));
        t.ns[cause] += value.total_ns - was;
    }
    std::vector<StalledThread> out;
    for (auto &[tid, t] : threads)
        out.push_back(std::move(t));
    return out;
}

LeadUpStalls lead_up_stalls(const std::deque<StallSecond> &history, uint64_t kill_ns,
                            const std::string &domain,
                            const std::function<bool(uint64_t cgroup_id)> &in_domain, size_t top) {
    LeadUpStalls out;
    out.domain = domain;
    std::map<uint32_t, StalledThread> by_thread;
    for (const StallSecond &second : history) {
        LeadUpStalls::Second s;
        s.before_kill_s =
            kill_ns > second.end_ns ? static_cast<double>(kill_ns - second.end_ns) / 1e9 : 0;
        for (const StalledThread &t : second.threads) {
            if (!in_domain(t.cgroup_id))
                continue;
            StalledThread &sum = by_thread[t.tid];
            if (sum.tid == 0)
                sum = StalledThread{t.tid, t.pid, t.cgroup_id, t.comm, {}};
            for (size_t c = 0; c < t.ns.size(); ++c) {
                s.ns[c] += t.ns[c];
                sum.ns[c] += t.ns[c];
                out.total[c] += t.ns[c];
            }
        }
        out.seconds.push_back(s);
    }
    if (!history.empty() && history.back().end_ns > kill_ns)
        out.read_after_kill_ns = history.back().end_ns - kill_ns;
    for (auto &[tid, t] : by_thread)
        out.most_stalled.push_back(std::move(t));
    std::stable_sort(out.most_stalled.begin(), out.most_stalled.end(),
                     [](const auto &a, const auto &b) { return a.total() > b.total(); });
    if (out.most_stalled.size() > top)
        out.most_stalled.resize(top);
    return out;
}

const char *constraint_name(Constraint c) {
    switch (c) {
    case Constraint::Memcg:
        return "memcg";
    case Constraint::Global:
        return "global";
    case Constraint::Cpuset:
        return "cpuset";
    case Constraint::MemoryPolicy:
        return "mempolicy";
    default:
        return "unknown";
    }
}

const char *kernel_constraint_name(Constraint c) {
    switch (c) {
    case Constraint::Memcg:
        return "CONSTRAINT_MEMCG";
    case Constraint::Global:
        return "CONSTRAINT_NONE";
    case Constraint::Cpuset:
        return "CONSTRAINT_CPUSET";
    case Constraint::MemoryPolicy:
        return "CONSTRAINT_MEMORY_POLICY";
    default:
        return "";
    }
}

std::string node_list(uint64_t nodes) {
    std::string out;
    for (int n = 0; n < 64;) {
        if (!(nodes >> n & 1)) {
            ++n;
            continue;
        }
        int last = n;
        while (last + 1 < 64 && (nodes >> (last + 1) & 1))
            ++last;
        out += fmt::format("{}{}", out.empty() ? "" : ",",
                           last == n ? fmt::format("{}", n) : fmt::format("{}-{}", n, last));
        n = last + 1;
    }
    return out.empty() ? "none" : out;
}

Constraint constraint_of(const oomwhy_kill &k) {
    if (k.reclaim.rounds == 0)
        return Constraint::Unknown;
    switch (k.reclaim.kind) {
    case OOMWHY_RECLAIM_MEMCG:
        return Constraint::Memcg;
    case OOMWHY_RECLAIM_DIRECT:
        if (k.node_constraint == OOMWHY_NODES_MEMPOLICY)
            return Constraint::MemoryPolicy;
        if (k.node_constraint == OOMWHY_NODES_CPUSET)
            return Constraint::Cpuset;
        return Constraint::Global;
    default:
        return Constraint::Unknown;
    }
}

bool is_limit(uint64_t pages) {
    return pages < OOMWHY_NO_LIMIT;
}

const char *found_by_name(LimitHit::FoundBy how) {
    switch (how) {
    case LimitHit::FoundBy::OomLock:
        return "oom_lock";
    case LimitHit::FoundBy::Usage:
        return "usage";
    case LimitHit::FoundBy::Nearest:
        return "nearest";
    default:
        return "none";
    }
}

LimitHit limit_that_fired(const oomwhy_kill &k) {
    const oomwhy_limit_hit hit = oomwhy_limit_that_fired(&k);
    return {hit.level, hit.memsw != 0, static_cast<LimitHit::FoundBy>(hit.found_by)};
}

} // namespace memlat::oomwhy
