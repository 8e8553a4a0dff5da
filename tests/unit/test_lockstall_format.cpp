// lockstall's views (tools/lockstall/lockstall_format.h): what a waiter or holder did, from
// kernel stacks as the tool symbolizes them (frames recorded on 6.18), and which holds a record
// shows, from records made by hand.
#include <gtest/gtest.h>

#include <cstring>

#include "lockstall/lockstall_format.h"

using namespace memlat::lockstall;

namespace {

lockstall_hold hold(uint32_t tid, uint64_t acquired, uint64_t released, const char *comm) {
    lockstall_hold h{};
    h.pid = tid;
    h.tid = tid;
    h.acquired_ns = acquired;
    h.released_ns = released;
    std::strncpy(h.comm, comm, sizeof(h.comm) - 1);
    return h;
}

} // namespace

TEST(LockstallOperation, ProcReaderBeforeItsReadSystemCall) {
    EXPECT_EQ("/proc smaps_rollup",
              operation_of({"__mmap_lock_do_trace_released+0x4b", "show_smaps_rollup+0x321",
                            "seq_read_iter+0x12f", "seq_read+0x128", "vfs_read+0xbb",
                            "ksys_read+0x6f", "__x64_sys_read+0x19", "do_syscall_64+0x71"}));
}

TEST(LockstallOperation, SystemCallWithoutItsEntryFrame) {
    // 6.18: do_syscall_64 calls x64_sys_call, whose switch inlines __x64_sys_mmap.
    EXPECT_EQ("mmap",
              operation_of({"__mmap_lock_do_trace_acquire_returned+0x50", "vm_mmap_pgoff+0x1c2",
                            "do_syscall_64+0x71", "entry_SYSCALL_64_after_hwframe+0x76"}));
}

TEST(LockstallOperation, SystemCallByItsEntryFrame) {
    EXPECT_EQ("mincore", operation_of({"__mmap_lock_do_trace_acquire_returned+0x50",
                                       "__x64_sys_mincore+0x80", "do_syscall_64+0x71"}));
    EXPECT_EQ("process_vm_readv", operation_of({"__arm64_sys_process_vm_readv+0x30"}));
}

TEST(LockstallOperation, FaultInsideASystemCall) {
    // A read() into memory not yet faulted in: the fault took the lock.
    EXPECT_EQ("fault",
              operation_of({"lock_mm_and_find_vma+0x3c", "do_user_addr_fault+0x1e1",
                            "exc_page_fault+0x6d", "asm_exc_page_fault+0x26", "_copy_to_user+0x20",
                            "ksys_read+0x6f", "__x64_sys_read+0x19"}));
}

TEST(LockstallOperation, RemoteReaderOfCmdlineIsTheProcFile) {
    EXPECT_EQ("/proc cmdline",
              operation_of({"__access_remote_vm+0x70", "get_mm_cmdline+0x120",
                            "proc_pid_cmdline_read+0x58", "vfs_read+0xbb", "ksys_read+0x6f"}));
}

TEST(LockstallOperation, UnknownWithoutSymbols) {
    EXPECT_EQ("?", operation_of({"0xffffffff81234567", "0xffffffff81234999"}));
    EXPECT_EQ("?", operation_of({}));
}

TEST(LockstallHolders, HalfWrittenSlotsLeftOutOldestFirst) {
    lockstall_wait e{};
    e.ts_ns = 10'000;
    e.wait_ns = 5'000;
    e.nr_holders = 4;
    e.holders[0] = hold(7, 8'000, 9'000, "late");
    e.holders[1] = hold(5, 4'000, 6'000, "root");
    e.holders[2] = hold(0, 1, 2, "");            // no thread: a slot being written
    e.holders[3] = hold(9, 9'500, 0, "writing"); // released before acquired: the same
    const auto shown = holders_of(e);
    ASSERT_EQ(2u, shown.size());
    EXPECT_EQ(5u, shown[0].tid);
    EXPECT_EQ(7u, shown[1].tid);
    EXPECT_NE(std::string::npos, holder_line(shown[0], true, "/proc smaps").find("* held by 5"));
    EXPECT_NE(std::string::npos, holder_line(shown[1], false, "mmap").find("  held by 7"));
}

TEST(LockstallHolders, NoMoreThanTheRecordHolds) {
    lockstall_wait e{};
    e.nr_holders = 200; // a corrupt count reads at most the array
    for (uint32_t i = 0; i < LOCKSTALL_MAX_HOLDERS; ++i)
        e.holders[i] = hold(i + 1, 100 + i, 200 + i, "t");
    EXPECT_EQ(static_cast<size_t>(LOCKSTALL_MAX_HOLDERS), holders_of(e).size());
}

TEST(LockstallJson, WaitWithItsHolders) {
    lockstall_wait e{};
    e.ts_ns = 3'000'000;
    e.wait_ns = 2'500'000;
    e.pid = 10;
    e.tid = 11;
    e.mm_pid = 10;
    e.write = 1;
    e.success = 1;
    std::strncpy(e.comm, "worker", sizeof(e.comm) - 1);
    const std::vector<lockstall_hold> holders{hold(20, 100'000, 2'900'000, "monitor")};
    const auto j = wait_json(e, 0.5, "mprotect", holders, {"/proc smaps"});
    EXPECT_EQ("write", j["mode"]);
    EXPECT_EQ(2'500'000u, j["wait_ns"]);
    EXPECT_EQ(500'000u, j["start_mono_ns"]);
    EXPECT_EQ(true, j["acquired"]);
    ASSERT_EQ(1u, j["holders"].size());
    EXPECT_EQ("monitor", j["holders"][0]["comm"]);
    EXPECT_EQ(2'800'000u, j["holders"][0]["hold_ns"]);
    EXPECT_EQ(true, j["holders"][0]["root"]);
    EXPECT_EQ("/proc smaps", j["holders"][0]["op"]);
}

TEST(LockstallMonitors, KnownByTheirCutNames) {
    // Debian's binary is prometheus-process-exporter: the kernel keeps 15 characters.
    EXPECT_EQ("process-exporter", monitor_of("prometheus-proc"));
    EXPECT_EQ("process-exporter", monitor_of("process-exporte"));
    EXPECT_EQ("cAdvisor", monitor_of("cadvisor"));
    EXPECT_EQ("", monitor_of("convoy_reader"));
    EXPECT_EQ("", monitor_of("topaz")); // whole names only
    EXPECT_EQ("", monitor_of(""));
}

TEST(LockstallHolders, OwnStallsAndMonitorOnTheLine) {
    lockstall_hold h = hold(30, 1'000'000, 13'000'000, "telegraf");
    EXPECT_EQ("", holder_stalls(h));
    h.reclaim_ns = 1'200'000;
    EXPECT_EQ("reclaim 1.200 ms", holder_stalls(h));
    h.compact_ns = 300'000;
    EXPECT_EQ("reclaim 1.200 ms, compaction 0.300 ms", holder_stalls(h));
    h.reclaim_ns = 0;
    EXPECT_EQ("compaction 0.300 ms", holder_stalls(h));
    const std::string line = holder_line(h, true, "/proc smaps");
    EXPECT_NE(std::string::npos, line.find("(in compaction 0.300 ms)")) << line;
    EXPECT_NE(std::string::npos, line.find("[monitor: Telegraf]")) << line;
    const auto j = wait_json(lockstall_wait{}, 0, "fault", {h}, {"/proc smaps"});
    EXPECT_EQ("Telegraf", j["holders"][0]["monitor"]);
    EXPECT_EQ(300'000u, j["holders"][0]["compaction_ns"]);
    EXPECT_EQ(0u, j["holders"][0]["reclaim_ns"]);
    const auto plain = wait_json(lockstall_wait{}, 0, "fault", {hold(1, 1, 2, "app")}, {"mmap"});
    EXPECT_TRUE(plain["holders"][0]["monitor"].is_null());
}
