// oomwhy's reports (tools/oomwhy/oomwhy_format.h): the limit that fired, the constraint and
// the report's forms, from records made by hand.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>

#include "memstall_entry.h"
#include "oomwhy/oomwhy_format.h"

using namespace memlat;
using namespace memlat::oomwhy;

namespace {

constexpr uint64_t no_limit = 0x7ffffffffffffULL; // PAGE_COUNTER_MAX with 4 KiB pages

oomwhy_level level(uint64_t id, uint64_t usage, uint64_t max, uint64_t memsw_usage = 0,
                   uint64_t memsw_max = 0) {
    oomwhy_level l{};
    l.cgroup_id = id;
    l.usage = usage;
    l.max = max;
    l.high = no_limit;
    l.memsw_usage = memsw_usage;
    l.memsw_max = memsw_max;
    l.oom_lock = OOMWHY_NO_OOM_LOCK; // cgroup v2 on 6.12+: the usage tells
    return l;
}

// A memory cgroup OOM: the trigger reclaimed its cgroup 16 times, then the kill.
oomwhy_kill memcg_kill() {
    oomwhy_kill k{};
    k.type = OOMWHY_KILL;
    k.known = OOMWHY_KNOWN_TASK | OOMWHY_KNOWN_MEMORY | OOMWHY_KNOWN_COMM;
    k.ts_ns = 10'000'000'000;
    k.victim_pid = k.victim_tgid = 200;
    std::strcpy(k.victim_comm, "victim");
    k.victim_cgroup_id = 11;
    k.anon_rss = 10240;
    k.total_vm = 11000;
    k.file_rss = 650;
    k.pgtables_kb = 132;
    k.oom_score_adj = 1000;
    k.trigger_pid = k.trigger_tgid = 300;
    std::strcpy(k.trigger_comm, "allocator");
    k.trigger_cgroup_id = 11;
    k.reclaim.rounds = k.reclaim.memcg_rounds = 16;
    k.reclaim.kind = OOMWHY_RECLAIM_MEMCG;
    k.reclaim.first_ns = k.ts_ns - 2'000'000;
    k.reclaim.total_ns = 1'500'000;
    k.reclaim.gfp = 0;
    k.cgroup_v1 = 1;
    k.levels = 2;
    k.level[0] = level(11, 16380, no_limit, 16380, no_limit); // the child: no limit
    k.level[1] = level(10, 16384, 16384, 16384, no_limit);    // the parent: at its limit
    return k;
}

Report report_of(const oomwhy_kill &k) {
    return Report{.kill = k,
                  .after = {},
                  .cgroup_path = [](uint64_t id) -> std::string {
                      return id == 10 ? "/shop" : id == 11 ? "/shop/checkout" : "";
                  },
                  .time = "12:00:00",
                  .loadavg = "0.10 0.20 0.30 1/100 300",
                  .page_kb = 4,
                  .global_pages = 1'000'000};
}

} // namespace

TEST(OomwhyFormat, TheInnermostLevelAtItsLimitFired) {
    oomwhy_kill k = memcg_kill();
    EXPECT_EQ(1, limit_that_fired(k).level);
    EXPECT_FALSE(limit_that_fired(k).memsw);
    // Within 8 pages of the limit: a charge of up to 8 pages did not fit.
    k.level[1].usage = 16384 - 7;
    EXPECT_EQ(1, limit_that_fired(k).level);
    EXPECT_EQ(LimitHit::FoundBy::Usage, limit_that_fired(k).found_by);
    // 8 pages of room: any charge that may OOM fits, so no level is certain; the one nearest
    // to its limit is named, as an inference.
    k.level[1].usage = 16384 - 8;
    EXPECT_EQ(1, limit_that_fired(k).level);
    EXPECT_EQ(LimitHit::FoundBy::Nearest, limit_that_fired(k).found_by);
    // Both at their limits: the inner one is charged first.
    k.level[0].max = 16380;
    EXPECT_EQ(0, limit_that_fired(k).level);
}

TEST(OomwhyFormat, TheKernelsOomLockNamesTheLevel) {
    oomwhy_kill k = memcg_kill();
    k.level[0].oom_lock = k.level[1].oom_lock = 0;
    k.level[1].usage = 16000; // far from its limit at the kill: the lock still tells
    k.level[1].oom_lock = 1;  // the OOM memcg's subtree is locked: both levels here
    k.level[0].oom_lock = 1;
    EXPECT_EQ(1, limit_that_fired(k).level);
    EXPECT_EQ(LimitHit::FoundBy::OomLock, limit_that_fired(k).found_by);
    EXPECT_FALSE(limit_that_fired(k).memsw);
    k.level[1].memsw_max = 16000; // memory+swap at its limit there: that counter fired
    EXPECT_TRUE(limit_that_fired(k).memsw);
    k.level[1].oom_lock = 0; // only the child locked: the child's OOM
    EXPECT_EQ(0, limit_that_fired(k).level);
}

// Memory freed before the kill can leave both counters of the locked level further than a
// charge from their limits (a CI run: both 42 pages short): the one with less room, memory+swap
// on a tie, as it is charged first.
TEST(OomwhyFormat, LockedLevelWithBothCountersShortOfTheirLimits) {
    oomwhy_kill k = memcg_kill();
    k.levels = 1;
    k.level[0] = level(11, 16342, 16384, 16342, 16384);
    k.level[0].oom_lock = 1;
    EXPECT_EQ(0, limit_that_fired(k).level);
    EXPECT_EQ(LimitHit::FoundBy::OomLock, limit_that_fired(k).found_by);
    EXPECT_TRUE(limit_that_fired(k).memsw);
    k.level[0].usage = 16364; // memory has less room: memory's limit
    EXPECT_FALSE(limit_that_fired(k).memsw);
    k.level[0].memsw_max = no_limit; // no memory+swap limit: memory's
    k.level[0].usage = 16342;
    EXPECT_FALSE(limit_that_fired(k).memsw);
}

TEST(OomwhyFormat, MemorySwapIsChargedFirst) {
    oomwhy_kill k = memcg_kill();
    k.level[1].memsw_max = 16384; // memory+swap at the same limit as memory (cgroup v1)
    EXPECT_EQ(1, limit_that_fired(k).level);
    EXPECT_TRUE(limit_that_fired(k).memsw);
    k.cgroup_v1 = 0; // no memory+swap counter on cgroup v2
    EXPECT_FALSE(limit_that_fired(k).memsw);
}

TEST(OomwhyFormat, ConstraintFromTheLastReclaim) {
    oomwhy_kill k = memcg_kill();
    EXPECT_EQ(Constraint::Memcg, constraint_of(k));
    k.reclaim.kind = OOMWHY_RECLAIM_DIRECT;
    EXPECT_EQ(Constraint::Global, constraint_of(k));
    EXPECT_STREQ("CONSTRAINT_NONE", kernel_constraint_name(constraint_of(k)));
    k.reclaim.rounds = 0;
    EXPECT_EQ(Constraint::Unknown, constraint_of(k));
}

TEST(OomwhyFormat, OomkillLineAsBcc) {
    oomwhy_kill k = memcg_kill();
    EXPECT_EQ(R"(12:00:00 Triggered by PID 300 ("allocator"), OOM kill of PID 200 ("victim"), )"
              "16384 pages, loadavg: 0.10 0.20 0.30 1/100 300",
              oomkill_line(report_of(k)));
    k.reclaim.kind = OOMWHY_RECLAIM_DIRECT; // a global OOM: the host's memory and swap
    EXPECT_EQ(1'000'000u, domain_pages(report_of(k)));
}

TEST(OomwhyFormat, ReportText) {
    oomwhy_kill k = memcg_kill();
    Report r = report_of(k);
    r.after.exit_ns = k.ts_ns + 4'000'000;
    const std::string text = report_text(r, GfpNames::builtin());
    EXPECT_NE(std::string::npos,
              text.find("why:     memory cgroup /shop at its memory.limit_in_bytes: usage 65536 "
                        "KiB of 65536 KiB"))
        << text;
    EXPECT_NE(std::string::npos, text.find("anon-rss 40960 KiB")) << text;
    EXPECT_NE(std::string::npos, text.find("/shop: usage 65536 KiB, limit 65536 KiB")) << text;
    EXPECT_NE(std::string::npos, text.find("<- fired")) << text;
    EXPECT_NE(std::string::npos, text.find("16 reclaim rounds (16 memcg, 0 direct) took 1.5 ms of "
                                           "the 2.0 ms before the kill"))
        << text;
    EXPECT_NE(std::string::npos, text.find("the victim exited 4.0 ms after the kill")) << text;
}

TEST(OomwhyFormat, ReportJson) {
    oomwhy_kill k = memcg_kill();
    const auto j = report_json(report_of(k), GfpNames::builtin());
    EXPECT_EQ("memcg", j["constraint"]);
    EXPECT_EQ("/shop", j["oom_memcg"]);
    EXPECT_EQ("memory.limit_in_bytes", j["limit"]);
    EXPECT_EQ("/shop/checkout", j["victim"]["cgroup"]);
    EXPECT_EQ(40960u, j["victim"]["anon_rss_kb"]);
    EXPECT_EQ(2u, j["cgroups"].size());
    EXPECT_TRUE(j["cgroups"][0]["limit_kb"].is_null()); // no limit of its own
    EXPECT_TRUE(j["after_kill"]["victim_exit_ns"].is_null());
    // A kernel whose mark_victim gives only the tracepoint's fields: no cgroup, no swap.
    k.known = OOMWHY_KNOWN_MEMORY | OOMWHY_KNOWN_COMM;
    const auto old = report_json(report_of(k), GfpNames::builtin());
    EXPECT_FALSE(old["victim"].contains("cgroup"));
    EXPECT_FALSE(old["victim"].contains("swap_kb"));
    EXPECT_EQ(40960u, old["victim"]["anon_rss_kb"]);
}

TEST(OomwhyFormat, StallsBetweenSnapshots) {
    memstall::Snapshot before{{{7, MEMSTALL_MEMCG_RECLAIM}, memstall_entry(7, "a", 11, 1, 100)}};
    memstall::Snapshot now{{{7, MEMSTALL_MEMCG_RECLAIM}, memstall_entry(7, "a", 11, 1, 350)},
                           {{7, MEMSTALL_DIRTY}, memstall_entry(7, "a", 11, 1, 40)},
                           {{9, MEMSTALL_DIRECT_RECLAIM}, memstall_entry(8, "b", 12, 1, 500)}};
    auto threads = stalled_between(now, before);
    ASSERT_EQ(2u, threads.size());
    EXPECT_EQ(7u, threads[0].tid);
    EXPECT_EQ(250u, threads[0].ns[MEMSTALL_MEMCG_RECLAIM]);
    EXPECT_EQ(40u, threads[0].ns[MEMSTALL_DIRTY]);
    EXPECT_EQ(500u, threads[1].ns[MEMSTALL_DIRECT_RECLAIM]);
    EXPECT_EQ(8u, threads[1].pid);
    // Nothing new: no thread.
    EXPECT_TRUE(stalled_between(now, now).empty());
}

TEST(OomwhyFormat, LeadUpStallsOfTheDomain) {
    std::deque<StallSecond> history(3);
    for (int i = 0; i < 3; ++i)
        history[i].end_ns = 1'000'000'000ull * (i + 1);
    StalledThread in{1, 1, 11, "in", {}}, out{2, 2, 99, "out", {}};
    in.ns[MEMSTALL_MEMCG_RECLAIM] = 5'000'000;
    out.ns[MEMSTALL_DIRECT_RECLAIM] = 9'000'000;
    history[1].threads = {in, out};
    history[2].threads = {in};
    const auto s =
        lead_up_stalls(history, 2'500'000'000, "/shop", [](uint64_t cg) { return cg == 11; });
    ASSERT_EQ(3u, s.seconds.size());
    EXPECT_EQ(0u, s.seconds[0].ns[MEMSTALL_MEMCG_RECLAIM]);
    EXPECT_EQ(5'000'000u, s.seconds[1].ns[MEMSTALL_MEMCG_RECLAIM]);
    EXPECT_EQ(0u, s.seconds[1].ns[MEMSTALL_DIRECT_RECLAIM]); // another cgroup's
    EXPECT_EQ(10'000'000u, s.total[MEMSTALL_MEMCG_RECLAIM]);
    ASSERT_EQ(1u, s.most_stalled.size());
    EXPECT_EQ("in", s.most_stalled[0].comm);
    EXPECT_EQ(500'000'000u, s.read_after_kill_ns); // the last read, after the kill
}

TEST(OomwhyFormat, NodeConstrainedKills) {
    oomwhy_kill k = memcg_kill();
    k.reclaim.kind = OOMWHY_RECLAIM_DIRECT;
    k.node_constraint = OOMWHY_NODES_MEMPOLICY;
    k.allowed_nodes = 0b1101;
    EXPECT_EQ(Constraint::MemoryPolicy, constraint_of(k));
    EXPECT_STREQ("CONSTRAINT_MEMORY_POLICY", kernel_constraint_name(constraint_of(k)));
    EXPECT_EQ("0,2-3", node_list(k.allowed_nodes));
    Report r = report_of(k);
    r.constrained_pages = 65536;
    EXPECT_EQ(65536u, domain_pages(r));
    const auto j = report_json(r, GfpNames::builtin());
    EXPECT_EQ("mempolicy", j["constraint"]);
    EXPECT_EQ("0,2-3", j["allowed_nodes"]);
    EXPECT_TRUE(j["oom_memcg"].is_null());
    k.node_constraint = OOMWHY_NODES_CPUSET;
    EXPECT_EQ(Constraint::Cpuset, constraint_of(k));
    // A memory cgroup's OOM whatever the nodes: the charge failed, not the allocation.
    k.reclaim.kind = OOMWHY_RECLAIM_MEMCG;
    EXPECT_EQ(Constraint::Memcg, constraint_of(k));
}
