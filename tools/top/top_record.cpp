#include "top/top_record.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errors.h"
#include "base/files.h"

namespace memlat::top {

namespace {

using nlohmann::json;

// nlohmann's message without its "[json.exception.type_error.302] " prefix.
std::string reason(const json::exception &e) {
    std::string_view what = e.what();
    if (auto end = what.find("] "); what.starts_with("[json.exception") && end != what.npos)
        what.remove_prefix(end + 2);
    return std::string(what);
}

std::optional<uint32_t> cause_of(const std::string &name) {
    for (uint32_t cause = 0; cause < MEMSTALL_CAUSES; ++cause)
        if (name == memstall::cause_name(cause))
            return cause;
    return std::nullopt;
}

// The readers of a field, each one function (not a get<T>() inlined at every field: that
// cost the binary 15 KB).
[[gnu::noinline]] const json &field(const json &j, const char *name) {
    return j.at(name);
}

[[gnu::noinline]] uint64_t number(const json &j) {
    return j.get<uint64_t>();
}

uint64_t number(const json &j, const char *name) {
    return number(field(j, name));
}

[[gnu::noinline]] double real(const json &j, const char *name) {
    return field(j, name).get<double>();
}

[[gnu::noinline]] std::string text(const json &j, const char *name) {
    return field(j, name).get<std::string>();
}

[[gnu::noinline]] std::map<std::string, uint64_t> counters(const json &j, const char *name) {
    std::map<std::string, uint64_t> out;
    for (const auto &[key, value] : field(j, name).items())
        out[key] = number(value);
    return out;
}

std::optional<uint64_t> optional_number(const json &j, const char *name) {
    const json &v = field(j, name);
    if (v.is_null())
        return std::nullopt;
    return number(v);
}

// {"memcg": {"stalls": 3, "ns": 1200}, ...}: causes this build does not know are skipped (a
// record of a later memlat).
CauseTimes causes_of(const json &j) {
    CauseTimes out{};
    for (const auto &[name, times] : j.items())
        if (auto cause = cause_of(name)) {
            out[*cause].stalls = number(times, "stalls");
            out[*cause].ns = number(times, "ns");
            // Records before reclaimed pages were counted have none.
            if (times.contains("reclaimed_pages"))
                out[*cause].reclaimed_pages = number(times, "reclaimed_pages");
        }
    return out;
}

// {"accesses", "hits", "misses", "dirties", ...} (cachestat::json_counts()), or null: none.
// Records before top counted the page cache have no member, which reads as none.
std::optional<PageCache> page_cache_of(const json &j) {
    if (!j.contains("page_cache") || j["page_cache"].is_null())
        return std::nullopt;
    const json &c = j["page_cache"];
    PageCache cache;
    cache.accesses_known = !field(c, "accesses").is_null();
    if (cache.accesses_known) {
        cache.counts.accesses = number(c, "accesses");
        cache.counts.hits = number(c, "hits");
    }
    cache.counts.misses = number(c, "misses");
    cache.counts.dirties = number(c, "dirties");
    if (c.contains("table_full"))
        cache.table_full = number(c, "table_full");
    return cache;
}

FlushPath flush_path_of(const std::string &name) {
    for (FlushPath path : {FlushPath::Ipi, FlushPath::Hypervisor, FlushPath::Mixed})
        if (name == path_name(path))
            return path;
    return FlushPath::Unknown;
}

CgroupInterval row_of(const json &j) {
    CgroupInterval row;
    row.id = number(j, "cgroup_id");
    row.path = text(j, "cgroup");
    if (!field(j, "name").is_null())
        row.name = text(j, "name");
    // Records made before names were looked up have no "workload".
    if (auto workload = j.find("workload"); workload != j.end() && workload->is_object())
        row.workload = *workload;
    row.stalls = causes_of(field(j, "causes"));
    row.memory.usage_bytes = optional_number(j, "usage_bytes");
    row.memory.max_bytes = optional_number(j, "max_bytes");
    row.memory.high_bytes = optional_number(j, "high_bytes");
    row.events_since_start = counters(j, "events_since_start");
    row.psi_some_us = optional_number(j, "psi_some_us");
    row.page_cache = page_cache_of(j);
    row.files_read = true;
    return row;
}

memstall::Snapshot threads_of(const json &j) {
    memstall::Snapshot out;
    for (const json &t : j) {
        const auto cause = cause_of(text(t, "cause"));
        if (!cause)
            continue;
        memstall_value v{};
        v.stalls = number(t, "stalls");
        v.total_ns = number(t, "ns");
        v.max_ns = number(t, "max_ns");
        if (t.contains("reclaimed_pages"))
            v.reclaimed_pages = number(t, "reclaimed_pages");
        v.cgroup_id = number(t, "cgroup_id");
        v.pid = static_cast<uint32_t>(number(t, "pid"));
        const std::string comm = text(t, "comm");
        std::memcpy(v.comm, comm.data(), std::min(comm.size(), sizeof(v.comm) - 1));
        out[{static_cast<uint32_t>(number(t, "tid")), *cause}] = v;
    }
    return out;
}

} // namespace

json threads_json(const memstall::Snapshot &now, const memstall::Snapshot &before) {
    json out = json::array();
    for (const auto &[key, v] : now) {
        const auto [tid, cause] = key;
        if (cause >= MEMSTALL_CAUSES)
            continue;
        uint64_t stalls = v.stalls, ns = v.total_ns, pages = v.reclaimed_pages;
        if (auto was = before.find(key); was != before.end()) {
            stalls -= std::min<uint64_t>(stalls, was->second.stalls);
            ns -= std::min<uint64_t>(ns, was->second.total_ns);
            pages -= std::min<uint64_t>(pages, was->second.reclaimed_pages);
        }
        if (stalls == 0 && ns == 0)
            continue;
        json thread = {{"tid", tid},
                       {"pid", v.pid},
                       {"comm", std::string(v.comm, strnlen(v.comm, sizeof(v.comm)))},
                       {"cgroup_id", v.cgroup_id},
                       {"cause", memstall::cause_name(cause)},
                       {"stalls", stalls},
                       {"ns", ns},
                       {"max_ns", v.max_ns}};
        if (memstall::frees_pages(cause))
            thread["reclaimed_pages"] = pages;
        out.push_back(std::move(thread));
    }
    return out;
}

RecordedInterval interval_from_json(const json &line) {
    RecordedInterval out;
    try {
        out.time = text(line, "time");
        out.timestamp = line.value("timestamp", json());
        out.epoch_ms = line.value("epoch_ms", json());
        HostInterval &host = out.host;
        host.interval_s = real(line, "interval_s");
        const json &h = field(line, "host");
        host.now.meminfo = counters(h, "memory_bytes");
        host.vmstat_delta = counters(h, "vmstat_delta");
        host.psi_some_us = optional_number(h, "psi_some_us");
        host.psi_full_us = optional_number(h, "psi_full_us");
        host.stalls = causes_of(field(h, "causes"));
        host.cgroups_stalled = number(h, "cgroups_stalled");
        // Records before TLB shootdowns were counted have neither.
        if (h.contains("tlb_shootdowns"))
            host.tlb_shootdowns = optional_number(h, "tlb_shootdowns");
        if (h.contains("remote_flush_path"))
            host.remote_flushes = flush_path_of(text(h, "remote_flush_path"));
        host.page_cache = page_cache_of(h);
        if (const json &self = field(line, "self"); !self.is_null())
            host.self = SelfCost{real(self, "cpu_share"), real(self, "rss_bytes"),
                                 real(self, "bpf_map_bytes")};
        for (const json &row : field(line, "cgroups"))
            out.rows.push_back(row_of(row));
        for (const auto &[name, why] : field(line, "unmeasured_causes").items())
            if (auto cause = cause_of(name))
                out.unmeasured[*cause] = why.get<std::string>();
        if (line.contains("table_full"))
            out.table_full = number(line, "table_full");
        if (line.contains("threads"))
            out.threads = threads_of(field(line, "threads"));
    } catch (const json::exception &e) {
        // nlohmann's messages name the field ("key 'host' not found") or the type expected.
        throw RuntimeError(fmt::format("not an interval of memlat top: {}", reason(e)));
    }
    return out;
}

namespace {

// The longest line a record may hold: an interval of -o with every row and thread of a busy
// host is a few MB; a file without a newline in this many bytes (/dev/zero, a binary) is no
// record, and is not read whole into memory.
constexpr size_t max_line_bytes = 64 << 20;

// The text of the record at `path`: a regular file or a pipe (a record decompressed on the
// fly), read until its end or its first line longer than max_line_bytes.
std::string read_record(const std::string &path) {
    OwnedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (fd.get() < 0 || fstat(fd.get(), &st) != 0)
        throw UsageError(fmt::format("--replay {}: cannot read it: {}", path, strerror(errno)));
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode))
        throw UsageError(
            fmt::format("--replay {}: {}, not a record (a file that memlat top -o or -j "
                        "wrote)",
                        path, S_ISDIR(st.st_mode) ? "a directory" : "a device"));
    std::string text;
    size_t line_start = 0;
    char buf[65536];
    for (;;) {
        const ssize_t n = read(fd.get(), buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            throw UsageError(fmt::format("--replay {}: cannot read it: {}", path, strerror(errno)));
        if (n == 0)
            return text;
        text.append(buf, static_cast<size_t>(n));
        if (const auto nl = text.rfind('\n'); nl != std::string::npos && nl >= line_start)
            line_start = nl + 1;
        if (text.size() - line_start > max_line_bytes)
            throw UsageError(fmt::format("--replay {}: line {} is longer than {} MiB: not a record "
                                         "(a file that memlat top -o or -j wrote)",
                                         path, std::count(text.begin(), text.end(), '\n') + 1,
                                         max_line_bytes >> 20));
    }
}

} // namespace

Recording::Recording(const std::string &path) : path_(path) {
    text_ = read_record(path);
    size_t at = 0, number = 0;
    while (at < text_.size()) {
        size_t end = text_.find('\n', at);
        if (end == std::string::npos)
            end = text_.size();
        ++number; // empty lines are not intervals but count
        if (end > at)
            lines_.push_back({at, end - at, number});
        at = end + 1;
    }
    // A file whose first line is not JSON is no record (and not one cut short).
    if (!lines_.empty() && (lines_.size() > 1 || text_.ends_with('\n')) &&
        json::parse(std::string_view(text_).substr(lines_[0].offset, lines_[0].length), nullptr,
                    false)
            .is_discarded())
        throw UsageError(fmt::format("--replay {}: not a record (a file that memlat top -o or -j "
                                     "wrote): line {} is not JSON",
                                     path, lines_[0].number));
    // A record cut short (its writer killed, a full disk) ends in part of a line: the
    // intervals before it are whole, and replayed.
    if (!lines_.empty() && !text_.ends_with('\n') &&
        json::parse(std::string_view(text_).substr(lines_.back().offset), nullptr, false)
            .is_discarded()) {
        cut_short_ = lines_.back().number;
        lines_.pop_back();
    }
    if (lines_.empty())
        throw UsageError(fmt::format("--replay {}: holds no interval ({})", path,
                                     cut_short_ ? "only part of one" : "an empty file"));
}

RecordedInterval Recording::at(size_t index) const {
    const Line &l = lines_.at(index);
    const size_t line_number = l.number;
    try {
        const json line = json::parse(std::string_view(text_).substr(l.offset, l.length));
        return interval_from_json(line);
    } catch (const json::exception &e) {
        throw RuntimeError(fmt::format("{} line {}: not JSON: {}", path_, line_number, reason(e)));
    } catch (const RuntimeError &e) {
        throw RuntimeError(fmt::format("{} line {}: {}", path_, line_number, e.what()));
    }
}

} // namespace memlat::top
