// The Prometheus side of --prometheus: the exposition formats (Prometheus text 0.0.4 and
// OpenMetrics 1.0), log2 histograms as cumulative Prometheus histograms, label sets that stay
// bounded under a cap, and the metrics every tool exports about itself. The HTTP server that
// serves them is in exporter.h; this part has no I/O, so the unit tests reach all of it.
#pragma once

#include <bpf/libbpf.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernel/hooks.h"
#include "kernel/workloads.h"

namespace memlat::prometheus {

// Label name -> value, in the order they are written. Values are bytes (a task name may be
// cut inside a UTF-8 character); the writer makes them valid UTF-8.
using Labels = std::vector<std::pair<std::string, std::string>>;

// The labels every series of a tool filtered by -G PATH carries: cgroup="PATH". None without
// -G, nor where the series are per cgroup (`per_cgroup`): each names its own cgroup then.
Labels cgroup_filter_labels(std::string cgroup, bool per_cgroup = false);

// The labels of a series per cgroup: `cgroup`, its path (docs/output.md), and, where the
// node's files name what runs there (kernel/workloads.h), `namespace`, `pod` and `container`
// as kube-state-metrics and cAdvisor name them, so that joins on them work; `container` alone
// for a Docker or Podman container. `workload` may be null: the path alone.
void add_cgroup_labels(Labels &labels, std::string path, const Workload *workload);
// The labels add_cgroup_labels() adds beside `cgroup`: a series counted as "other" past
// --max-series has none of them.
bool is_workload_label(std::string_view name);

// A series' own label `name`="value", then `common`, the labels every series of its tool
// carries.
Labels labels_of(std::string name, std::string value, const Labels &common);

enum class Type { Counter, Gauge, Histogram, Info };
enum class Format { Text, OpenMetrics };

// The format a scrape asked for by its Accept header: OpenMetrics when it names
// application/openmetrics-text (Prometheus sends it first when it can parse it), else text.
Format negotiate(std::string_view accept);
// The Content-Type of a response in `format`.
std::string_view content_type(Format format);

// A label value as the exposition writes it between quotes: invalid UTF-8 bytes become U+FFFD
// (as print_json_line does), then backslash, double quote and newline are escaped.
std::string escape_label_value(std::string_view bytes);

// One scrape's metrics. Families are declared, then samples added to the last one declared.
// Counter families are named without _total (the writer adds it); samples of one family with
// the same labels (e.g. two task names that differ only in invalid bytes) are added up, so
// the output never holds a duplicate series.
class Exposition {
  public:
    // `unit` (OpenMetrics "# UNIT") only when the name ends with it: "seconds", "bytes".
    void family(std::string name, Type type, std::string help, std::string unit = "");
    // A counter's, gauge's or info's value (info: 1, with the labels saying the rest).
    void sample(const Labels &labels, double value);
    // A log2 histogram (slot 0: values 0-1, slot i: 2^i to 2^(i+1)-1, in units of
    // `unit_seconds` seconds) as cumulative buckets le="2^(i+1) * unit_seconds", up to the
    // last non-empty slot, then +Inf; `sum_seconds` is the exact sum of the observations.
    void histogram(const Labels &labels, std::span<const uint64_t> slots, double unit_seconds,
                   double sum_seconds);
    bool has_family(std::string_view name) const;
    // Adds `other`'s families: a family this one has already gets its series (samples of the
    // same labels added up), the others are appended. `memlat exporter` builds each tool's
    // exposition apart, so that a tool whose counters cannot be read leaves nothing behind.
    void merge(const Exposition &other);

    // `memlat exporter` serves every tool on one /metrics: the families every tool exports
    // about itself (memlat_lost_events, memlat_probe_info, ...) then carry a `tool` label,
    // set here before the tool writes them. Empty (a tool's own --prometheus): no such label.
    void set_tool(std::string tool) { tool_ = std::move(tool); }
    // {"tool", TOOL} in front of `labels` when a tool is set.
    Labels with_tool(Labels labels) const;

    std::string render(Format format) const;

  private:
    struct Series {
        Labels labels;
        double value = 0;
        std::vector<double> cumulative; // histograms: counts up to each bucket's le
        std::vector<double> bounds;     // histograms: the le of each bucket (seconds)
        double sum = 0;
    };
    struct Family {
        std::string name, help, unit;
        Type type;
        std::map<std::string, Series> series; // by escaped label text: merges duplicates
    };
    Series &series_for(const Labels &labels);
    std::vector<Family> families_;
    std::string tool_;
};

// A number as the exposition formats write it: integers exactly, others shortest round-trip,
// and +Inf, -Inf, NaN by name.
std::string format_value(double value);

// Bounded label sets for counters read from a BPF table whose entries come and go (a task's
// entry is deleted when it exits, a new one appears for a new task). Each entry's values are
// cumulative; the accumulator turns them into per-series totals that never decrease, even
// when the entry that fed them is gone. Once `max_series` label sets have a series of their
// own, entries of new label sets are counted in the `other` series (each of the high-
// cardinality labels set to "other") and `dropped()` counts those label sets.
class BoundedCounters {
  public:
    // `width`: the number of values per entry (stalls, seconds, pages, ...). `capped`: the
    // labels that are replaced by "other" past the cap.
    BoundedCounters(size_t width, size_t max_series, std::vector<std::string> capped);

    // One read of the table: begin(), update() for every entry present, end(). An entry is
    // identified by `entry` (its key bytes); its labels must not change while it exists.
    void begin();
    void update(const std::string &entry, const Labels &labels, std::span<const double> values);
    void end();

    // Removes the series whose "cgroup" label names a cgroup that is gone: none of
    // `cgroup_paths` (live cgroups by id: those of this read's entries) and, when given, not
    // `exists` either (CgroupPathCache::exists: a cgroup whose entries are gone may live).
    // Their counts stay in the totals; "other" stays. The slots they held become free for
    // new label sets.
    void remove_removed_cgroups(const std::map<uint64_t, std::string> &cgroup_paths,
                                const std::function<bool(const std::string &)> &exists = {});

    // Series, by labels, with their totals ("other" included once it has counts).
    const std::map<Labels, std::vector<double>> &series() const { return series_; }
    // Label sets refused a series of their own since the start (a monotonic count).
    uint64_t dropped() const { return dropped_; }

  private:
    struct Entry {
        Labels series; // where its counts go: its own labels, or the "other" ones
        std::vector<double> last;
        bool seen = false;
    };
    size_t width_, max_series_;
    std::vector<std::string> capped_;
    std::map<std::string, Entry> entries_;
    std::map<Labels, std::vector<double>> series_;
    uint64_t dropped_ = 0;
    size_t own_series() const;
};

// One counter family per value of `counts`' series, in order: {name, help} each; the unit
// follows the name's suffix (_seconds, _bytes).
void write_counter_families(Exposition &out,
                            std::span<const std::pair<const char *, const char *>> families,
                            const BoundedCounters &counts);

// memlat_build_info{tool, version}: what serves these metrics (a tool, or "exporter").
void build_info(Exposition &out, std::string_view tool);
// The metrics every tool exports about itself: memlat_probe_info{probe, hook} for the hook
// the loader chose for each probe, recursion misses of the tool's BPF programs, and, when
// the kernel times them (`run_stats_held`: this process holds BPF_ENABLE_STATS, or
// kernel.bpf_stats_enabled is on), their run time and run count
// (memlat_bpf_program_run_seconds_total, memlat_bpf_program_runs_total{program}).
void self_metrics(Exposition &out, const std::vector<Probe> &probes, bpf_object *obj,
                  bool run_stats_held);
// memlat_lost_events_total and memlat_table_full_total (events a BPF table had no room for);
// for the tools that time a begin and an end, memlat_unpaired_ends_total (ends whose begin
// was not seen, so not timed); for those that serve stall profiles, memlat_stacks_lost_total.
void loss_metrics(Exposition &out, uint64_t lost_events, uint64_t table_full,
                  std::optional<uint64_t> unpaired_ends = std::nullopt,
                  std::optional<uint64_t> stacks_lost = std::nullopt);
// memlat_series_dropped_total: label sets folded into an "other" series by --max-series.
void series_dropped_metric(Exposition &out, uint64_t dropped);

} // namespace memlat::prometheus
