#include "prometheus/prometheus.h"

#include <bpf/bpf.h>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <set>
#include <stdexcept>

#include "base/files.h"
#include "cli/output.h"

namespace memlat::prometheus {

namespace {

std::string_view type_name(Type type, Format format) {
    switch (type) {
    case Type::Counter:
        return "counter";
    case Type::Gauge:
        return "gauge";
    case Type::Histogram:
        return "histogram";
    case Type::Info:
        // The text format has no info type: an info metric is a gauge of value 1 there.
        return format == Format::OpenMetrics ? "info" : "gauge";
    }
    return "untyped";
}

// HELP text: backslash and newline escaped in both formats; OpenMetrics escapes the double
// quote too.
std::string escape_help(std::string_view help, Format format) {
    std::string out;
    for (char c : help) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '\n')
            out += "\\n";
        else if (c == '"' && format == Format::OpenMetrics)
            out += "\\\"";
        else
            out += c;
    }
    return out;
}

std::string label_text(const Labels &labels, std::string_view extra_name = {},
                       std::string_view extra_value = {}) {
    std::string out;
    auto add = [&](std::string_view name, std::string_view value) {
        out += out.empty() ? "{" : ",";
        out += name;
        out += "=\"";
        out += value;
        out += '"';
    };
    for (const auto &[name, value] : labels)
        add(name, escape_label_value(value));
    if (!extra_name.empty())
        add(extra_name, extra_value);
    if (!out.empty())
        out += '}';
    return out;
}

} // namespace

Labels cgroup_filter_labels(std::string cgroup, bool per_cgroup) {
    if (cgroup.empty() || per_cgroup)
        return {};
    return {{"cgroup", std::move(cgroup)}};
}

void add_cgroup_labels(Labels &labels, std::string path, const Workload *workload) {
    labels.emplace_back("cgroup", std::move(path));
    if (workload == nullptr)
        return;
    if (!workload->pod.empty()) {
        labels.emplace_back("namespace", workload->k8s_namespace);
        labels.emplace_back("pod", workload->pod);
    }
    if (!workload->container.empty())
        labels.emplace_back("container", workload->container);
}

bool is_workload_label(std::string_view name) {
    return name == "namespace" || name == "pod" || name == "container";
}

Labels labels_of(std::string name, std::string value, const Labels &common) {
    Labels labels{{std::move(name), std::move(value)}};
    labels.insert(labels.end(), common.begin(), common.end());
    return labels;
}

Format negotiate(std::string_view accept) {
    return accept.find("application/openmetrics-text") != std::string_view::npos
               ? Format::OpenMetrics
               : Format::Text;
}

std::string_view content_type(Format format) {
    return format == Format::OpenMetrics
               ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
               : "text/plain; version=0.0.4; charset=utf-8";
}

std::string escape_label_value(std::string_view bytes) {
    const std::string text =
        is_valid_utf8(bytes) ? std::string(bytes) : replace_invalid_utf8(bytes);
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '"')
            out += "\\\"";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

std::string format_value(double value) {
    if (std::isnan(value))
        return "NaN";
    if (std::isinf(value))
        return value > 0 ? "+Inf" : "-Inf";
    // Counts are integers; below 2^53 a double holds them exactly.
    if (value == std::floor(value) && std::fabs(value) < 9007199254740992.0)
        return fmt::format("{:.0f}", value);
    return fmt::format("{}", value);
}

void Exposition::family(std::string name, Type type, std::string help, std::string unit) {
    families_.push_back(Family{std::move(name), std::move(help), std::move(unit), type, {}});
}

bool Exposition::has_family(std::string_view name) const {
    for (const auto &f : families_)
        if (f.name == name)
            return true;
    return false;
}

void Exposition::merge(const Exposition &other) {
    for (const auto &theirs : other.families_) {
        auto ours = std::find_if(families_.begin(), families_.end(),
                                 [&](const Family &f) { return f.name == theirs.name; });
        if (ours == families_.end()) {
            families_.push_back(theirs);
            continue;
        }
        if (ours->type != theirs.type)
            throw std::logic_error("Exposition::merge: two types for " + theirs.name);
        for (const auto &[key, s] : theirs.series) {
            auto [it, inserted] = ours->series.try_emplace(key, s);
            if (inserted)
                continue;
            Series &into = it->second;
            into.value += s.value;
            into.sum += s.sum;
            for (size_t i = 0; i < into.cumulative.size() && i < s.cumulative.size(); ++i)
                into.cumulative[i] += s.cumulative[i];
        }
    }
}

Labels Exposition::with_tool(Labels labels) const {
    if (!tool_.empty())
        labels.insert(labels.begin(), {"tool", tool_});
    return labels;
}

Exposition::Series &Exposition::series_for(const Labels &labels) {
    if (families_.empty())
        throw std::logic_error("Exposition: a sample before any family");
    auto &series = families_.back().series;
    auto [it, inserted] = series.try_emplace(label_text(labels));
    if (inserted)
        it->second.labels = labels;
    return it->second;
}

void Exposition::sample(const Labels &labels, double value) {
    series_for(labels).value += value;
}

void Exposition::histogram(const Labels &labels, std::span<const uint64_t> slots,
                           double unit_seconds, double sum_seconds) {
    Series &s = series_for(labels);
    // Every slot is a bucket, empty or not, so that the set of buckets never changes between
    // scrapes: rate() and histogram_quantile() need the same buckets in every sample.
    if (s.cumulative.empty()) {
        s.cumulative.assign(slots.size(), 0);
        s.bounds.resize(slots.size());
        for (size_t i = 0; i < slots.size(); ++i)
            s.bounds[i] = std::ldexp(unit_seconds, static_cast<int>(i) + 1);
    }
    double running = 0;
    for (size_t i = 0; i < slots.size() && i < s.cumulative.size(); ++i) {
        running += static_cast<double>(slots[i]);
        s.cumulative[i] += running;
    }
    s.sum += sum_seconds;
}

std::string Exposition::render(Format format) const {
    std::string out;
    for (const auto &f : families_) {
        // The text format names a counter's family by its sample name (with _total), and an
        // info metric's by its _info sample; OpenMetrics names both without the suffix.
        std::string suffix = f.type == Type::Counter ? "_total"
                             : f.type == Type::Info  ? "_info"
                                                     : "";
        std::string sample_name = f.name + suffix;
        std::string family_name = format == Format::OpenMetrics ? f.name : sample_name;
        out += fmt::format("# HELP {} {}\n", family_name, escape_help(f.help, format));
        out += fmt::format("# TYPE {} {}\n", family_name, type_name(f.type, format));
        if (format == Format::OpenMetrics && !f.unit.empty())
            out += fmt::format("# UNIT {} {}\n", family_name, f.unit);
        for (const auto &[labels, s] : f.series) {
            if (f.type != Type::Histogram) {
                out += fmt::format("{}{} {}\n", sample_name, labels, format_value(s.value));
                continue;
            }
            for (size_t i = 0; i < s.cumulative.size(); ++i)
                out += fmt::format("{}_bucket{} {}\n", f.name,
                                   label_text(s.labels, "le", format_value(s.bounds[i])),
                                   format_value(s.cumulative[i]));
            const double count = s.cumulative.empty() ? 0 : s.cumulative.back();
            out += fmt::format("{}_bucket{} {}\n", f.name, label_text(s.labels, "le", "+Inf"),
                               format_value(count));
            out += fmt::format("{}_sum{} {}\n", f.name, labels, format_value(s.sum));
            out += fmt::format("{}_count{} {}\n", f.name, labels, format_value(count));
        }
    }
    if (format == Format::OpenMetrics)
        out += "# EOF\n";
    return out;
}

BoundedCounters::BoundedCounters(size_t width, size_t max_series, std::vector<std::string> capped)
    : width_(width), max_series_(max_series), capped_(std::move(capped)) {}

size_t BoundedCounters::own_series() const {
    size_t n = series_.size();
    for (const auto &[labels, values] : series_)
        for (const auto &[name, value] : labels)
            if (value == "other" &&
                std::find(capped_.begin(), capped_.end(), name) != capped_.end()) {
                --n;
                break;
            }
    return n;
}

void BoundedCounters::begin() {
    for (auto &[key, e] : entries_)
        e.seen = false;
}

void BoundedCounters::update(const std::string &entry, const Labels &labels,
                             std::span<const double> values) {
    auto [it, inserted] = entries_.try_emplace(entry);
    Entry &e = it->second;
    e.seen = true;
    if (inserted) {
        e.last.assign(width_, 0);
        if (series_.contains(labels) || own_series() < max_series_) {
            e.series = labels;
        } else {
            e.series = labels;
            std::erase_if(e.series, [](const auto &l) { return is_workload_label(l.first); });
            for (auto &[name, value] : e.series)
                if (std::find(capped_.begin(), capped_.end(), name) != capped_.end())
                    value = "other";
            ++dropped_;
        }
    }
    auto &totals = series_[e.series];
    totals.resize(width_, 0);
    for (size_t i = 0; i < width_ && i < values.size(); ++i) {
        // A value below the last one read means the entry was deleted and made anew between
        // two reads: all of it is new.
        const double delta = values[i] >= e.last[i] ? values[i] - e.last[i] : values[i];
        totals[i] += delta;
        e.last[i] = values[i];
    }
}

void BoundedCounters::end() {
    // An entry that is gone left its counts in its series; only its bookkeeping goes.
    std::erase_if(entries_, [](const auto &kv) { return !kv.second.seen; });
}

void BoundedCounters::remove_removed_cgroups(
    const std::map<uint64_t, std::string> &cgroup_paths,
    const std::function<bool(const std::string &)> &exists) {
    std::set<std::string> live;
    for (const auto &[id, path] : cgroup_paths)
        live.insert(path);
    auto removed = [&](const Labels &l) {
        for (const auto &[name, value] : l)
            if (name == "cgroup")
                return value != "other" && !live.contains(value) && !(exists && exists(value));
        return false;
    };
    std::erase_if(series_, [&](const auto &kv) { return removed(kv.first); });
}

void write_counter_families(Exposition &out,
                            std::span<const std::pair<const char *, const char *>> families,
                            const BoundedCounters &counts) {
    for (size_t i = 0; i < families.size(); ++i) {
        const std::string_view name = families[i].first;
        out.family(std::string(name), Type::Counter, families[i].second,
                   name.ends_with("_seconds") ? "seconds"
                   : name.ends_with("_bytes") ? "bytes"
                                              : "");
        for (const auto &[l, values] : counts.series())
            out.sample(l, values[i]);
    }
}

void build_info(Exposition &out, std::string_view tool) {
    out.family("memlat_build", Type::Info,
               "The memlat tool serving these metrics, and its version");
    out.sample({{"tool", std::string(tool)}, {"version", MEMLAT_VERSION}}, 1);
}

void self_metrics(Exposition &out, const std::vector<Probe> &probes, bpf_object *obj,
                  bool run_stats_held) {
    out.family("memlat_probe", Type::Info,
               "The hook the loader chose for each probe on this kernel (none: not attached)");
    for (const auto &p : probes)
        out.sample(
            out.with_tool({{"probe", p.name}, {"hook", p.choice() ? p.choice()->label() : "none"}}),
            1);

    struct Prog {
        std::string name;
        bpf_prog_info info;
    };
    std::vector<Prog> progs;
    bpf_program *prog = nullptr;
    bpf_object__for_each_program(prog, obj) {
        const int fd = bpf_program__fd(prog);
        if (fd < 0)
            continue; // a fall-back that was not loaded
        bpf_prog_info info{};
        uint32_t len = sizeof(info);
        if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0)
            progs.push_back({bpf_program__name(prog), info});
    }
    out.family("memlat_bpf_recursion_misses", Type::Counter,
               "Runs of the tool's BPF programs the kernel skipped because another BPF program "
               "ran on the same CPU: events not counted");
    for (const auto &p : progs)
        out.sample(out.with_tool({{"program", p.name}}),
                   static_cast<double>(p.info.recursion_misses));
    // The kernel counts run time only while someone holds BPF_ENABLE_STATS (--bpf-stats) or
    // kernel.bpf_stats_enabled is on (it costs two clock reads per run); without either the
    // numbers would be stale, so they are left out.
    if (!run_stats_held) {
        auto stats = read_text_file("/proc/sys/kernel/bpf_stats_enabled");
        if (!stats || !stats->starts_with('1'))
            return;
    }
    out.family("memlat_bpf_program_run_seconds", Type::Counter,
               "Time the tool's BPF programs ran (while --bpf-stats or "
               "kernel.bpf_stats_enabled has the kernel time them)",
               "seconds");
    for (const auto &p : progs)
        out.sample(out.with_tool({{"program", p.name}}),
                   static_cast<double>(p.info.run_time_ns) / 1e9);
    out.family("memlat_bpf_program_runs", Type::Counter,
               "Runs of the tool's BPF programs (while --bpf-stats or kernel.bpf_stats_enabled "
               "has the kernel time them)");
    for (const auto &p : progs)
        out.sample(out.with_tool({{"program", p.name}}), static_cast<double>(p.info.run_cnt));
}

void loss_metrics(Exposition &out, uint64_t lost_events, uint64_t table_full,
                  std::optional<uint64_t> unpaired_ends, std::optional<uint64_t> stacks_lost) {
    out.family("memlat_lost_events", Type::Counter,
               "Events lost because the buffer between the kernel and the tool was full");
    out.sample(out.with_tool({}), static_cast<double>(lost_events));
    out.family("memlat_table_full", Type::Counter,
               "Events not counted because a BPF table had no room for a new entry");
    out.sample(out.with_tool({}), static_cast<double>(table_full));
    if (unpaired_ends) {
        out.family("memlat_unpaired_ends", Type::Counter,
                   "Ends of a stall or call whose begin the tool did not see (it began before "
                   "the tool started, or the thread's state was evicted), so not timed");
        out.sample(out.with_tool({}), static_cast<double>(*unpaired_ends));
    }
    if (stacks_lost) {
        out.family("memlat_stacks_lost", Type::Counter,
                   "Stalls of the tool's profiles whose stack its stack map had no room for "
                   "(counted under a \"[kernel stack lost: no room in the stack map]\" frame; "
                   "--max-entries makes the map larger)");
        out.sample(out.with_tool({}), static_cast<double>(*stacks_lost));
    }
}

void series_dropped_metric(Exposition &out, uint64_t dropped) {
    out.family("memlat_series_dropped", Type::Counter,
               "Label sets (processes, cgroups, files) counted in an \"other\" series because "
               "--max-series was reached");
    out.sample(out.with_tool({}), static_cast<double>(dropped));
}

} // namespace memlat::prometheus
