// What memlat costs the host it watches, as Prometheus families: the standard process_*
// families of Prometheus' client libraries (the names dashboards and alerts already know) and
// the kernel memory of each tool's BPF maps, which RSS does not show.
#pragma once

#include <bpf/libbpf.h>

#include <optional>
#include <string_view>
#include <vector>

#include "prometheus/prometheus.h"

namespace memlat::prometheus {

// This process as /proc tells it, in the units the families use.
struct ProcessUsage {
    double cpu_seconds = 0;        // user + system time
    double resident_bytes = 0;     // RSS
    double virtual_bytes = 0;      // address space
    double start_time_seconds = 0; // since the Unix epoch
};

// ProcessUsage from the texts of /proc/PID/stat (CPU and start times), /proc/PID/status
// (VmRSS, VmSize) and /proc/stat (btime: the boot time), with the clock ticks per second
// (sysconf(_SC_CLK_TCK)); nullopt when a text is not what the kernel writes.
std::optional<ProcessUsage> parse_process_usage(std::string_view pid_stat,
                                                std::string_view pid_status, std::string_view stat,
                                                long ticks_per_second);

// process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
// process_virtual_memory_max_bytes, process_start_time_seconds, process_open_fds and
// process_max_fds of this process. A family whose source cannot be read is left out.
void process_metrics(Exposition &out);

// The memory the kernel accounts to a created map (the memlock of its fdinfo; a ring buffer's
// data size where the kernel says 0), or nullopt.
std::optional<double> map_memory_bytes(const bpf_map *map);
// The sum over `obj`'s created maps.
double object_map_memory_bytes(const bpf_object *obj);

// This process's usage now (parse_process_usage() of /proc/self), or nullopt.
std::optional<ProcessUsage> own_process_usage();

// memlat_bpf_map_memory_bytes{map}: map_memory_bytes() of each map of `objects` (a tool's
// own, and those it holds beside it), one family, labelled by tool when one is set.
void map_memory_metrics(Exposition &out, const std::vector<const bpf_object *> &objects);

} // namespace memlat::prometheus
