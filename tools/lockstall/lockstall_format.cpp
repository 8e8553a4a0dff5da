#include "lockstall_format.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <fmt/format.h>
#include <utility>

#include "loading/symbols.h"

namespace memlat::lockstall {

namespace {

// Functions that say what a lock holder or waiter was doing, by rank: a /proc reader or a
// kernel thread first (their stacks also hold get_user_pages or read()), then a fault (inside
// any system call that touched user memory), then get_user_pages, then the system call.
struct KnownFunction {
    std::string_view function;
    std::string_view operation;
    int rank;
};

constexpr std::array<KnownFunction, 40> known_functions{{
    {"show_smaps_rollup", "/proc smaps_rollup", 0},
    {"smaps_rollup_open", "/proc smaps_rollup", 0},
    {"show_smap", "/proc smaps", 0},
    {"show_numa_map", "/proc numa_maps", 0},
    {"show_map", "/proc maps", 0},
    {"m_start", "/proc maps", 0},
    {"m_next", "/proc maps", 0},
    {"do_procmap_query", "/proc maps", 0},
    {"pagemap_read", "/proc pagemap", 0},
    {"clear_refs_write", "/proc clear_refs", 0},
    {"get_mm_cmdline", "/proc cmdline", 0},
    {"proc_pid_cmdline_read", "/proc cmdline", 0},
    {"environ_read", "/proc environ", 0},
    {"mem_rw", "/proc mem", 0},
    {"proc_pid_auxv", "/proc auxv", 0},
    {"khugepaged", "khugepaged", 0},
    {"collapse_huge_page", "khugepaged", 0},
    {"khugepaged_scan_mm_slot", "khugepaged", 0},
    {"dup_mmap", "fork", 0},
    {"exit_mmap", "exit", 0},
    {"process_vm_rw_core", "process_vm_rw", 0},
    {"lock_mm_and_find_vma", "fault", 1},
    {"do_user_addr_fault", "fault", 1},
    {"do_page_fault", "fault", 1},
    {"__do_page_fault", "fault", 1},
    {"__get_user_pages", "gup", 2},
    {"__get_user_pages_locked", "gup", 2},
    {"get_user_pages_remote", "gup", 2},
    {"get_user_pages_unlocked", "gup", 2},
    {"__gup_longterm_locked", "gup", 2},
    {"__access_remote_vm", "gup", 2},
    {"get_arg_page", "exec", 0},
    // The system calls' own functions, for kernels whose stacks have no __x64_sys_NAME frame
    // (6.18 calls them from do_syscall_64 through x64_sys_call, inlined).
    {"vm_mmap_pgoff", "mmap", 3},
    {"__vm_munmap", "munmap", 3},
    {"do_mprotect_pkey", "mprotect", 3},
    {"do_madvise", "madvise", 3},
    {"do_brk_flags", "brk", 3},
    {"do_mremap", "mremap", 3},
    {"do_mlock", "mlock", 3},
    {"__mm_populate", "populate", 3},
}};

// The system call a frame's function is the entry of: "mmap" of __x64_sys_mmap,
// __arm64_sys_mmap, __do_sys_mmap, __se_sys_mmap; "" for others.
std::string_view syscall_of(std::string_view function) {
    for (std::string_view prefix : {"__x64_sys_", "__arm64_sys_", "__do_sys_", "__se_sys_",
                                    "__ia32_sys_", "__ia32_compat_sys_"})
        if (function.starts_with(prefix))
            return function.substr(prefix.size());
    return {};
}

// Monitoring programs known to read other processes' /proc files (smaps, smaps_rollup,
// cmdline, maps) or memory, by their thread names (the kernel keeps 15 characters), and the
// name people know them by. Matched on whole names only: a program of the same name is named
// too, which the line's PID lets the reader check.
struct KnownMonitor {
    std::string_view comm;
    std::string_view name;
};

constexpr std::array<KnownMonitor, 24> known_monitors{{
    {"node_exporter", "node_exporter"},
    {"process-exporte", "process-exporter"},
    {"prometheus-proc", "process-exporter"}, // Debian's prometheus-process-exporter
    {"prometheus-node", "node_exporter"},    // Debian's prometheus-node-exporter
    {"cadvisor", "cAdvisor"},
    {"kubelet", "kubelet"},
    {"telegraf", "Telegraf"},
    {"process-agent", "Datadog Agent"},
    {"system-probe", "Datadog Agent"},
    {"datadog-agent", "Datadog Agent"},
    {"htop", "htop"},
    {"atop", "atop"},
    {"top", "top"},
    {"ps", "ps"},
    {"pidstat", "pidstat"},
    {"smem", "smem"},
    {"pmap", "pmap"},
    {"collectd", "collectd"},
    {"netdata", "Netdata"},
    {"apps.plugin", "Netdata"},
    {"otelcol", "OpenTelemetry Collector"},
    {"otelcol-contrib", "OpenTelemetry Collector"},
    {"alloy", "Grafana Alloy"},
    {"zabbix_agentd", "Zabbix agent"},
}};

} // namespace

std::string comm_text(const char (&comm)[LOCKSTALL_COMM_LEN]) {
    return std::string(comm, strnlen(comm, LOCKSTALL_COMM_LEN));
}

std::string operation_of(const std::vector<std::string> &frames) {
    int best_rank = 4;
    std::string best;
    for (const std::string &frame : frames) {
        const std::string function = described_function(frame);
        if (function.empty())
            continue;
        for (const KnownFunction &known : known_functions)
            if (known.function == function && known.rank < best_rank) {
                best_rank = known.rank;
                best = known.operation;
            }
        if (best_rank > 3)
            if (std::string_view call = syscall_of(function); !call.empty()) {
                best_rank = 3;
                best = call;
            }
    }
    return best.empty() ? "?" : best;
}

std::string_view monitor_of(std::string_view comm) {
    for (const KnownMonitor &known : known_monitors)
        if (known.comm == comm)
            return known.name;
    return {};
}

std::string holder_stalls(const lockstall_hold &h) {
    std::string text;
    if (h.reclaim_ns != 0)
        text = fmt::format("reclaim {:.3f} ms", h.reclaim_ns / 1e6);
    if (h.compact_ns != 0)
        text += fmt::format("{}compaction {:.3f} ms", text.empty() ? "" : ", ", h.compact_ns / 1e6);
    return text;
}

const char *mode_name(bool write) {
    return write ? "write" : "read";
}

std::vector<lockstall_hold> holders_of(const lockstall_wait &e) {
    std::vector<lockstall_hold> holds;
    const size_t n = std::min<size_t>(e.nr_holders, LOCKSTALL_MAX_HOLDERS);
    for (size_t i = 0; i < n; ++i) {
        const lockstall_hold &h = e.holders[i];
        if (h.tid != 0 && h.released_ns >= h.acquired_ns && h.acquired_ns != 0)
            holds.push_back(h);
    }
    std::sort(holds.begin(), holds.end(),
              [](const auto &a, const auto &b) { return a.acquired_ns < b.acquired_ns; });
    return holds;
}

std::string header(const LineFormat &f) {
    return fmt::format("{}{:<7} {:<7} {:<16} {:<18} {:<5} {:>10}", f.timestamp ? "TIME(s)    " : "",
                       "PID", "TID", "COMM", "OP", "MODE", "WAIT(ms)");
}

std::string wait_line(const lockstall_wait &e, double time_s, std::string_view op,
                      const LineFormat &f) {
    std::string line = f.timestamp ? fmt::format("{:<10.6f} ", time_s) : "";
    line += fmt::format("{:<7} {:<7} {:<16} {:<18} {:<5} {:>10.3f}", e.pid, e.tid,
                        comm_text(e.comm), op, mode_name(e.write), e.wait_ns / 1e6);
    if (!e.success)
        line += "  (gave up: fatal signal)";
    if (e.mm_pid != 0 && e.mm_pid != e.pid)
        line += fmt::format("  (address space of {})", e.mm_pid);
    return line;
}

std::string holder_line(const lockstall_hold &h, bool root, std::string_view op) {
    const std::string comm = comm_text(h.comm);
    std::string line = fmt::format("  {} held by {:<7} {:<7} {:<16} {:<18} {:<5} {:>10.3f}",
                                   root ? '*' : ' ', h.pid, h.tid, comm, op, mode_name(h.write),
                                   (h.released_ns - h.acquired_ns) / 1e6);
    if (const std::string stalls = holder_stalls(h); !stalls.empty())
        line += fmt::format("  (in {})", stalls);
    if (const std::string_view monitor = monitor_of(comm); !monitor.empty())
        line += fmt::format("  [monitor: {}]", monitor);
    return line;
}

nlohmann::json wait_json(const lockstall_wait &e, double time_s, std::string_view op,
                         const std::vector<lockstall_hold> &holders,
                         const std::vector<std::string> &ops) {
    nlohmann::json list = nlohmann::json::array();
    for (size_t i = 0; i < holders.size(); ++i) {
        const lockstall_hold &h = holders[i];
        const uint64_t hold = h.released_ns - h.acquired_ns;
        const std::string comm = comm_text(h.comm);
        const std::string_view monitor = monitor_of(comm);
        list.push_back({{"pid", h.pid},
                        {"tid", h.tid},
                        {"comm", comm},
                        {"mode", mode_name(h.write)},
                        {"op", i < ops.size() ? ops[i] : "?"},
                        {"hold_ns", hold},
                        {"hold_ms", hold / 1e6},
                        {"reclaim_ns", h.reclaim_ns},
                        {"compaction_ns", h.compact_ns},
                        {"monitor", monitor.empty() ? nlohmann::json(nullptr)
                                                    : nlohmann::json(std::string(monitor))},
                        {"acquired_mono_ns", h.acquired_ns},
                        {"released_mono_ns", h.released_ns},
                        {"root", i == 0}});
    }
    return {{"time_s", time_s},
            {"pid", e.pid},
            {"tid", e.tid},
            {"comm", comm_text(e.comm)},
            {"op", op},
            {"mode", mode_name(e.write)},
            {"wait_ns", e.wait_ns},
            {"wait_ms", e.wait_ns / 1e6},
            {"start_mono_ns", e.ts_ns - e.wait_ns},
            {"acquired", e.success != 0},
            {"mm_pid", e.mm_pid},
            {"holders", list},
            {"holders_missing", e.holders_missing != 0}};
}

} // namespace memlat::lockstall
