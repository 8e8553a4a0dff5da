#include "kernel/memory_state.h"

#include <unistd.h>

#include <cctype>
#include <charconv>
#include <fmt/format.h>
#include <system_error>
#include <vector>

#include "base/files.h"
#include "base/parsing.h"

namespace memlat {

namespace {

// Splits `line` at runs of spaces and tabs.
std::vector<std::string_view> words(std::string_view line) {
    std::vector<std::string_view> out;
    size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t'))
            ++i;
        size_t start = i;
        while (i < line.size() && line[i] != ' ' && line[i] != '\t')
            ++i;
        if (i > start)
            out.push_back(line.substr(start, i - start));
    }
    return out;
}

// The words of each line of `text`, a line after another: what every parser of a /proc or
// cgroup file here reads.
std::vector<std::vector<std::string_view>> word_lines(std::string_view text) {
    std::vector<std::vector<std::string_view>> out;
    std::string_view line;
    while (next_line(text, line))
        out.push_back(words(line));
    return out;
}

template <typename Number>
std::optional<Number> number(std::string_view text) {
    Number value{};
    const char *end = text.data() + text.size();
    auto r = std::from_chars(text.data(), end, value);
    if (text.empty() || r.ec != std::errc{} || r.ptr != end)
        return std::nullopt;
    return value;
}

// "avg10=0.12 avg60=0.05 avg300=0.01 total=12345" after the line's first word.
std::optional<Pressure> pressure_line(const std::vector<std::string_view> &w) {
    Pressure p;
    bool total = false;
    for (size_t i = 1; i < w.size(); ++i) {
        auto eq = w[i].find('=');
        if (eq == std::string_view::npos)
            return std::nullopt;
        auto key = w[i].substr(0, eq), value = w[i].substr(eq + 1);
        if (key == "total") {
            auto v = number<uint64_t>(value);
            if (!v)
                return std::nullopt;
            p.total_us = *v;
            total = true;
        } else {
            auto v = number<double>(value);
            if (!v)
                return std::nullopt;
            if (key == "avg10")
                p.avg10 = *v;
            else if (key == "avg60")
                p.avg60 = *v;
            else if (key == "avg300")
                p.avg300 = *v;
        }
    }
    if (!total)
        return std::nullopt;
    return p;
}

// v1's "no limit": PAGE_COUNTER_MAX pages, LONG_MAX rounded down to a page (9223372036854771712
// with 4 KiB pages, less with larger ones). Any limit from 2^62 up is none in practice.
constexpr uint64_t no_limit_from = uint64_t{1} << 62;

std::optional<std::string> file_in(const std::string &dir, const char *name) {
    return read_text_file(dir + "/" + name);
}

} // namespace

std::optional<PressureFile> parse_pressure(std::string_view text) {
    PressureFile out;
    for (auto &w : word_lines(text)) {
        if (w.empty())
            continue;
        if (w[0] == "some")
            out.some = pressure_line(w);
        else if (w[0] == "full")
            out.full = pressure_line(w);
    }
    if (!out.some)
        return std::nullopt;
    return out;
}

std::map<std::string, uint64_t> parse_meminfo(std::string_view text) {
    std::map<std::string, uint64_t> out;
    for (auto &w : word_lines(text)) {
        // A node's meminfo (/sys/devices/system/node/nodeN/meminfo) names its node first:
        // "Node 0 MemTotal:  255460 kB".
        if (w.size() >= 4 && w[0] == "Node")
            w.erase(w.begin(), w.begin() + 2);
        if (w.size() < 2 || w[0].empty() || w[0].back() != ':')
            continue;
        auto v = number<uint64_t>(w[1]);
        if (!v)
            continue;
        const bool kb = w.size() >= 3 && w[2] == "kB";
        out[std::string(w[0].substr(0, w[0].size() - 1))] = kb ? *v * 1024 : *v;
    }
    return out;
}

std::map<std::string, uint64_t> parse_key_values(std::string_view text) {
    std::map<std::string, uint64_t> out;
    for (auto &w : word_lines(text)) {
        if (w.size() != 2)
            continue;
        if (auto v = number<uint64_t>(w[1]))
            out[std::string(w[0])] = *v;
    }
    return out;
}

std::optional<uint64_t> parse_interrupt_row(std::string_view text, std::string_view name) {
    // Line by line, up to the row: /proc/interrupts of a large host has a column per CPU and
    // a row per interrupt, read at every interval and scrape.
    std::string_view line;
    while (next_line(text, line)) {
        const auto w = words(line);
        if (w.empty() || w[0].size() != name.size() + 1 || !w[0].starts_with(name) ||
            w[0].back() != ':')
            continue;
        // One count per CPU, then the row's description ("TLB shootdowns").
        uint64_t sum = 0;
        for (size_t i = 1; i < w.size(); ++i) {
            const auto count = number<uint64_t>(w[i]);
            if (!count)
                break;
            sum += *count;
        }
        return sum;
    }
    return std::nullopt;
}

HostMemory read_host_memory() {
    HostMemory out;
    if (auto text = read_text_file("/proc/meminfo"))
        out.meminfo = parse_meminfo(*text);
    if (auto text = read_text_file("/proc/vmstat"))
        out.vmstat = parse_key_values(*text);
    // Reading it fails with EOPNOTSUPP when the kernel was booted with psi=0.
    if (auto text = read_text_file("/proc/pressure/memory"))
        out.pressure = parse_pressure(*text);
    if (auto text = read_text_file("/proc/interrupts"))
        out.tlb_shootdowns = parse_interrupt_row(*text, "TLB");
    return out;
}

std::optional<uint64_t> parse_limit(std::string_view text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
        text.remove_suffix(1);
    if (text == "max")
        return std::nullopt;
    auto v = number<uint64_t>(text);
    if (!v || *v >= no_limit_from)
        return std::nullopt;
    return v;
}

CgroupMemory read_cgroup_memory(const std::string &dir, bool v1) {
    CgroupMemory out;
    auto value = [](const std::optional<std::string> &text) -> std::optional<uint64_t> {
        if (!text)
            return std::nullopt;
        std::string_view t = *text;
        while (!t.empty() && t.back() == '\n')
            t.remove_suffix(1);
        return number<uint64_t>(t);
    };
    if (v1) {
        out.usage_bytes = value(file_in(dir, "memory.usage_in_bytes"));
        if (auto text = file_in(dir, "memory.limit_in_bytes"))
            out.max_bytes = parse_limit(*text);
        if (auto failcnt = value(file_in(dir, "memory.failcnt")))
            out.events["max"] = *failcnt;
        if (auto text = file_in(dir, "memory.oom_control")) {
            auto oom = parse_key_values(*text);
            if (auto it = oom.find("oom_kill"); it != oom.end())
                out.events["oom_kill"] = it->second;
        }
        return out;
    }
    out.usage_bytes = value(file_in(dir, "memory.current"));
    if (auto text = file_in(dir, "memory.max"))
        out.max_bytes = parse_limit(*text);
    if (auto text = file_in(dir, "memory.high"))
        out.high_bytes = parse_limit(*text);
    if (auto text = file_in(dir, "memory.events"))
        out.events = parse_key_values(*text);
    if (auto text = file_in(dir, "memory.pressure"))
        out.pressure = parse_pressure(*text);
    return out;
}

uint64_t oom_domain_memory_pages(uint64_t nodes) {
    auto meminfo = [](const std::string &path) {
        return parse_meminfo(read_text_file(path).value_or(""));
    };
    auto host = meminfo("/proc/meminfo");
    uint64_t bytes = host["SwapTotal"];
    if (nodes == 0)
        bytes += host["MemTotal"];
    for (unsigned n = 0; n < 64; ++n)
        if (nodes >> n & 1)
            bytes += meminfo(fmt::format("/sys/devices/system/node/node{}/meminfo", n))["MemTotal"];
    return bytes / static_cast<uint64_t>(getpagesize());
}

std::string read_loadavg() {
    std::string text = read_text_file("/proc/loadavg").value_or("");
    while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
        text.pop_back();
    return text;
}

uint64_t memory_node_mask() {
    std::string text = read_text_file("/sys/devices/system/node/has_memory").value_or("");
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
        text.pop_back();
    uint64_t mask = 0;
    try {
        // The kernel's node lists have the syntax of CPU lists.
        const std::vector<bool> nodes = parse_cpu_list(text, 64);
        for (unsigned n = 0; n < nodes.size(); ++n)
            mask |= uint64_t{nodes[n]} << n;
    } catch (const UsageError &) {
        // Not a list (or a node past the 64th): as if one node.
    }
    return mask != 0 ? mask : 1;
}

} // namespace memlat
