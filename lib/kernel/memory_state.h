// What the kernel says of memory in its files, for `memlat top`'s header and rows: the host's
// /proc/meminfo, /proc/vmstat and PSI (/proc/pressure/memory), and a memory cgroup's usage,
// limits, events and PSI on cgroup v1 and v2. Every file read is one the kernel fills without
// walking page tables or taking mm locks (no smaps, no clear_refs), so a refresh a second
// costs the watched nothing. The parsers take the text, so that the unit tests give them what
// each kernel prints; the readers read the files.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace memlat {

// One line of a PSI file ("some avg10=0.12 avg60=0.05 avg300=0.01 total=12345"): the share
// of wall time (%) over the last 10, 60 and 300 s, and the stall time since boot.
struct Pressure {
    double avg10 = 0, avg60 = 0, avg300 = 0;
    uint64_t total_us = 0;
};

// A PSI file: "some" (at least one task stalled) and "full" (all non-idle tasks stalled; a
// cgroup v2 file and the host's from 5.2).
struct PressureFile {
    std::optional<Pressure> some, full;
};

// Lines it does not know are skipped; a file without a "some" line gives nothing.
std::optional<PressureFile> parse_pressure(std::string_view text);

// "Name:   1234 kB" lines of /proc/meminfo (or "Node N Name: ..." of a node's meminfo): kB values
// in bytes, the others (HugePages_Total) as they are.
std::map<std::string, uint64_t> parse_meminfo(std::string_view text);

// "name value" lines: /proc/vmstat, memory.stat, memory.events, memory.oom_control.
std::map<std::string, uint64_t> parse_key_values(std::string_view text);

// The sum over the CPUs of the /proc/interrupts row `name` ("TLB": the TLB-shootdown IPIs
// the CPUs handled since boot); nullopt where there is no such row (TLB: not x86).
std::optional<uint64_t> parse_interrupt_row(std::string_view text, std::string_view name);

// The host's memory as its files say it, at one moment.
struct HostMemory {
    std::map<std::string, uint64_t> meminfo; // bytes (parse_meminfo)
    std::map<std::string, uint64_t> vmstat;  // counters since boot, pages or events
    std::optional<PressureFile> pressure;    // nullopt: no PSI (CONFIG_PSI off, psi=0)
    std::optional<uint64_t> tlb_shootdowns;  // /proc/interrupts' TLB row, every CPU
};

HostMemory read_host_memory();

// A memory cgroup's own files. A limit the cgroup does not have ("max" on v2, v1's "no limit"
// of about 2^63) is nullopt.
struct CgroupMemory {
    std::optional<uint64_t> usage_bytes; // memory.current, memory.usage_in_bytes
    std::optional<uint64_t> max_bytes;   // memory.max, memory.limit_in_bytes
    std::optional<uint64_t> high_bytes;  // memory.high (v2 only)
    // Times a limit was met, since the cgroup was made, by what the kernel calls them:
    // v2's memory.events ("low", "high", "max", "oom", "oom_kill", "oom_group_kill"); on v1
    // "max" is memory.failcnt (charges that hit the limit) and "oom_kill" memory.oom_control's.
    std::map<std::string, uint64_t> events;
    std::optional<PressureFile> pressure; // memory.pressure (v2 with PSI)
};

// The limit a v1 or v2 file gives: "max" and v1's PAGE_COUNTER_MAX pages (2^63 rounded down to
// a page) are no limit.
std::optional<uint64_t> parse_limit(std::string_view text);

// Reads the cgroup directory `dir`, of the memory controller's v1 hierarchy when `v1`, else of
// cgroup v2. A file it cannot read (the cgroup went, the kernel has no such file) leaves its
// field empty.
CgroupMemory read_cgroup_memory(const std::string &dir, bool v1);

// The OOM domain's memory in pages, as the kernel's OOM killer counts totalpages: MemTotal of
// the NUMA nodes in the mask `nodes` (a node-constrained OOM), or of the host when `nodes` is
// 0, and SwapTotal.
uint64_t oom_domain_memory_pages(uint64_t nodes);

// /proc/loadavg's line, without its newline ("" where it cannot be read).
std::string read_loadavg();

// The nodes with memory (/sys/devices/system/node/has_memory: "0-1", "0,2"), of the first
// 64; node 0 alone where the file is missing or unreadable (a kernel without NUMA).
uint64_t memory_node_mask();

} // namespace memlat
