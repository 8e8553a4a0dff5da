// A tool's counting side for Prometheus: its own families, then what every tool exports about
// its losses and itself. Served by the tool (--prometheus) until a stop signal or -d, or by
// `memlat exporter` together with every other tool's (ExporterPart).
#pragma once

#include <bpf/libbpf.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "cli/options.h"
#include "kernel/hooks.h"
#include "prometheus/exporter.h"
#include "prometheus/prometheus.h"

namespace memlat {

// What the BPF side lost, as it counted: events it could not submit, entries that found a
// table full.
struct CountedLosses {
    uint64_t dropped_events = 0;
    uint64_t table_full = 0;
    // Tools that time a begin and an end: ends without their begin.
    std::optional<uint64_t> unpaired_ends;
    // Tools that serve stall profiles: stacks their stack map had no room for.
    std::optional<uint64_t> stacks_lost;
};

// A tool's programs, attached and counting, as each scrape reads them.
class CountingSide {
  public:
    virtual ~CountingSide() = default;
    // Writes the tool's families and returns its losses.
    virtual CountedLosses collect(prometheus::Exposition &out) = 0;
    // The probes and the object, for the self metrics (hooks chosen, BPF program stats).
    virtual const std::vector<Probe> &probes() const = 0;
    virtual bpf_object *object() const = 0;
    // Other BPF objects it holds while it serves (the kernel's describer of stack addresses),
    // whose maps' memory is the tool's too.
    virtual std::vector<const bpf_object *> helper_objects() const { return {}; }
    // The profile it serves at /debug/pprof/TOOL, if any (memstall --profiles).
    virtual ProfileSource *profile_source() { return nullptr; }
};

// One scrape of a tool: its families (collect), then its loss and self metrics (labelled by
// tool when out.set_tool() was called: `memlat exporter`): its maps' memory, its programs'
// run statistics (when `run_stats_held`, or kernel.bpf_stats_enabled), and the time this
// took (memlat_scrape_duration_seconds).
void write_tool_metrics(prometheus::Exposition &out, CountingSide &tool, bool run_stats_held);

// What serves the metrics, about itself: memlat_build_info{tool} and the process_* families.
void write_server_metrics(prometheus::Exposition &out, std::string_view tool);

// Serves /metrics until stopped: write_server_metrics(), then write_tool_metrics(), with the
// programs' run statistics when prom.bpf_stats. Returns the tool's exit status.
int serve_tool_metrics(std::string_view tool, const PrometheusOptions &prom,
                       const CommonOptions &common, CountingSide &side);

// What `memlat exporter` runs of one tool (each tool's entry makes one, multicall.h): its
// filter and label options on the exporter's command line, then its counting side.
class ExporterPart {
  public:
    virtual ~ExporterPart() = default;
    // The tool's options that shape its metrics (filters, --prometheus-labels, --max-series,
    // --max-entries), as the tool itself names them; the exporter has begun the group
    // --TOOL.NAME.
    virtual void add_options(CommandLine &cli) = 0;
    // Once the command line is parsed: the tool, given the exporter's run options and where it
    // serves, checks its options with no kernel involved (a UsageError: the exporter stops; a
    // RuntimeError: this tool cannot run here).
    virtual void check(const CommonOptions &common, const ListenAddress &where) = 0;
    // Loads and attaches (a RuntimeError: this tool cannot run here).
    virtual CountingSide &load() = 0;
    // Frees what a tool that cannot run holds.
    virtual void unload() = 0;
};

// The ExporterPart of a tool class `Tool` (a CountingSide built from its `Options`, with
// check_options() and load(), which its own run() calls too) whose counting options
// `add_options` adds.
template <typename Tool, typename Options>
class ExporterPartOf final : public ExporterPart {
  public:
    using AddOptions = void (*)(CommandLine &, Options &);
    explicit ExporterPartOf(AddOptions add_options) : add_options_(add_options) {}
    void add_options(CommandLine &cli) override {
        add_options_(cli, options_);
        add_max_entries_option(cli, options_.common);
    }
    void check(const CommonOptions &common, const ListenAddress &where) override {
        const uint32_t max_entries = options_.common.max_entries; // --TOOL.max-entries
        options_.common = common;
        options_.common.max_entries = max_entries;
        options_.prom.listen = where;
        tool_.emplace(std::move(options_));
        tool_->check_options();
    }
    CountingSide &load() override {
        tool_->load();
        return *tool_;
    }
    void unload() override { tool_.reset(); }

  private:
    AddOptions add_options_;
    Options options_;
    std::optional<Tool> tool_;
};

} // namespace memlat
