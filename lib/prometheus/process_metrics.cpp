#include "prometheus/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "base/files.h"

namespace memlat::prometheus {

namespace {

// The number at the front of `text` (after spaces), or nullopt.
std::optional<double> leading_number(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
        text.remove_prefix(1);
    unsigned long long value = 0;
    const auto r = std::from_chars(text.data(), text.data() + text.size(), value);
    if (r.ec != std::errc{})
        return std::nullopt;
    return static_cast<double>(value);
}

// The value of the line "KEY VALUE" of a /proc file, or nullopt.
std::optional<double> keyed_value(std::string_view text, std::string_view key) {
    std::string_view line;
    while (next_line(text, line))
        if (line.starts_with(key))
            return leading_number(line.substr(key.size()));
    return std::nullopt;
}

// Open descriptors: the entries of /proc/self/fd but the one reading them.
std::optional<double> open_fds() {
    DIR *dir = opendir("/proc/self/fd");
    if (dir == nullptr)
        return std::nullopt;
    double count = 0;
    while (const dirent *e = readdir(dir))
        if (e->d_name[0] != '.' && std::atoi(e->d_name) != dirfd(dir))
            ++count;
    closedir(dir);
    return count;
}

// A soft resource limit as client libraries export it: unlimited is the largest 64-bit value.
std::optional<double> limit_value(int resource) {
    rlimit limit{};
    if (getrlimit(resource, &limit) != 0)
        return std::nullopt;
    return static_cast<double>(limit.rlim_cur);
}

} // namespace

std::optional<ProcessUsage> parse_process_usage(std::string_view pid_stat,
                                                std::string_view pid_status, std::string_view stat,
                                                long ticks_per_second) {
    // "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses, so the fields are
    // counted from the last ')'. After it, field 3 of proc(5) (state) is token 0.
    const size_t close = pid_stat.rfind(')');
    if (close == std::string_view::npos || ticks_per_second <= 0)
        return std::nullopt;
    std::vector<std::string_view> tokens;
    std::string_view rest = pid_stat.substr(close + 1);
    while (!rest.empty()) {
        const size_t start = rest.find_first_not_of(" \n");
        if (start == std::string_view::npos)
            break;
        rest.remove_prefix(start);
        const size_t end = rest.find_first_of(" \n");
        tokens.push_back(rest.substr(0, end));
        rest.remove_prefix(end == std::string_view::npos ? rest.size() : end);
    }
    auto field = [&tokens](size_t proc5_number) -> std::optional<double> {
        const size_t i = proc5_number - 3;
        return i < tokens.size() ? leading_number(tokens[i]) : std::nullopt;
    };
    const auto utime = field(14), stime = field(15), start = field(22);
    // Memory from status, not stat: stat's rss is a quick read of the kernel's per-CPU RSS
    // counters, which lags (on 6.18, the exporter's was 100-600 KB below both VmRSS and the
    // Rss of smaps_rollup, which agree).
    const auto rss_kb = keyed_value(pid_status, "VmRSS:");
    const auto size_kb = keyed_value(pid_status, "VmSize:");
    const auto boot = keyed_value(stat, "btime");
    if (!utime || !stime || !start || !rss_kb || !size_kb || !boot)
        return std::nullopt;
    const double ticks = static_cast<double>(ticks_per_second);
    return ProcessUsage{(*utime + *stime) / ticks, *rss_kb * 1024, *size_kb * 1024,
                        *boot + *start / ticks};
}

std::optional<ProcessUsage> own_process_usage() {
    const auto pid_stat = read_text_file("/proc/self/stat");
    const auto pid_status = read_text_file("/proc/self/status");
    const auto stat = read_text_file("/proc/stat");
    if (!pid_stat || !pid_status || !stat)
        return std::nullopt;
    return parse_process_usage(*pid_stat, *pid_status, *stat, sysconf(_SC_CLK_TCK));
}

std::optional<double> map_memory_bytes(const bpf_map *map) {
    const int fd = bpf_map__fd(map);
    if (fd < 0)
        return std::nullopt; // not created: a map of a program that was not loaded
    const auto info = read_text_file(fmt::format("/proc/self/fdinfo/{}", fd));
    const auto bytes = info ? keyed_value(*info, "memlock:") : std::nullopt;
    // Some kernels (6.1 of the test matrix) estimate memlock from the key and value sizes,
    // which a ring buffer has none of: 0. Its data area, at least, it holds.
    if (bytes && *bytes == 0 && bpf_map__type(map) == BPF_MAP_TYPE_RINGBUF)
        return static_cast<double>(bpf_map__max_entries(map));
    return bytes;
}

double object_map_memory_bytes(const bpf_object *obj) {
    double total = 0;
    const bpf_map *map = nullptr;
    bpf_object__for_each_map(map, obj) {
        total += map_memory_bytes(map).value_or(0);
    }
    return total;
}

void process_metrics(Exposition &out) {
    if (const auto usage = own_process_usage()) {
        out.family("process_cpu_seconds", Type::Counter,
                   "CPU time this process has used, user and system", "seconds");
        out.sample({}, usage->cpu_seconds);
        out.family("process_resident_memory_bytes", Type::Gauge,
                   "Memory of this process in RAM (RSS; its BPF maps are not in it)", "bytes");
        out.sample({}, usage->resident_bytes);
        out.family("process_virtual_memory_bytes", Type::Gauge,
                   "Size of this process's address space", "bytes");
        out.sample({}, usage->virtual_bytes);
        out.family("process_start_time_seconds", Type::Gauge,
                   "When this process started, in seconds since the Unix epoch", "seconds");
        out.sample({}, usage->start_time_seconds);
    }
    if (const auto max = limit_value(RLIMIT_AS)) {
        out.family("process_virtual_memory_max_bytes", Type::Gauge,
                   "Largest address space this process may have (RLIMIT_AS)", "bytes");
        out.sample({}, *max);
    }
    if (const auto fds = open_fds()) {
        out.family("process_open_fds", Type::Gauge, "File descriptors this process holds");
        out.sample({}, *fds);
    }
    if (const auto max = limit_value(RLIMIT_NOFILE)) {
        out.family("process_max_fds", Type::Gauge,
                   "File descriptors this process may hold (RLIMIT_NOFILE)");
        out.sample({}, *max);
    }
}

void map_memory_metrics(Exposition &out, const std::vector<const bpf_object *> &objects) {
    out.family("memlat_bpf_map_memory_bytes", Type::Gauge,
               "Kernel memory of the tool's BPF maps, which its RSS does not show (memlock in "
               "the map's fdinfo)",
               "bytes");
    for (const bpf_object *obj : objects) {
        const bpf_map *map = nullptr;
        bpf_object__for_each_map(map, obj) {
            if (const auto bytes = map_memory_bytes(map))
                out.sample(out.with_tool({{"map", bpf_map__name(map)}}), *bytes);
        }
    }
}

} // namespace memlat::prometheus
