// What every tool is, written once: a tool's file (tools/NAME/NAME.cpp) keeps its options, its
// hook plan, its configuration of the BPF side and its views, and derives the rest from here.
//
//   constexpr char tool_name[] = "drsnoop";
//   class Drsnoop final : public Tool<drsnoop_bpf, Options, tool_name> {
//     public:
//       using Tool::Tool;              // Drsnoop(Options)
//       void check_options() override; // no kernel
//       CountedLosses collect(prometheus::Exposition &) override; // --prometheus, exporter
//     private:
//       void prepare(const Verbosity &) override;   // what it reads of the kernel first
//       std::vector<Probe> plan() const override;   // its probes and their hook choices
//       void configure(drsnoop_bpf &) override;     // rodata and map sizes, before load
//       void loaded(const Verbosity &) override;    // what it got: notes, metrics
//       int trace() override;          // per event or per interval until stopped
//   };
//   void add_counting_options(CommandLine &, Options &); // what the exporter takes too
//   void add_own_options(CommandLine &, Options &);      // the rest of its own options
//   constexpr ToolManual manual{summary, description, examples, ...}; // its words
//   extern const ToolEntry memlat_tool_drsnoop =
//       tool_entry<Drsnoop, tool_name, manual, add_own_options, add_counting_options>();
//
// The options every tool shares (-v, -j, -T, the interval, --btf, --max-entries,
// --buffer-size, --prometheus, ...) and the Environment part of -h are added here, from the
// manual's words: a tool declares only its own.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/errors.h"
#include "cli/multicall.h"
#include "cli/options.h"
#include "cli/run_loop.h"
#include "kernel/features.h"
#include "kernel/hooks.h"
#include "loading/events.h"
#include "loading/fallback.h"
#include "loading/loader.h"
#include "prometheus/metrics_serving.h"

namespace memlat {

// A tool's class: a counting side (what --prometheus and `memlat exporter` serve) named Name,
// built from its Options (which hold `common` and `prom`) around one skeleton of type Skel,
// opened and destroyed through the C++ members bpftool gives a skeleton (Skel::open,
// Skel::destroy).
template <typename Skel, typename ToolOptions, const char *Name>
class Tool : public CountingSide {
  public:
    using Options = ToolOptions;

    explicit Tool(Options options) : o_(std::move(options)) {}

    // The steps of run() that `memlat exporter` takes too (ExporterPartOf): the checks that
    // need no kernel (a UsageError), then the load (with --prometheus: and the metrics it
    // serves; a RuntimeError when the tool cannot run here).
    virtual void check_options() = 0;

    // The load, one sequence for every tool: privileges, a BTF and the memlock limit
    // (check_environment()); what the tool reads of the kernel before it plans (prepare());
    // the kernel's features, said with -v; the skeleton opened, configured (configure()),
    // loaded and attached with plan()'s choices, falling back as the kernel refuses
    // (Loaded); what the choices made lose, in one form (say_what_probes_lost()); then what
    // else the tool says of what it got, and its metrics (loaded()).
    void load() {
        check_environment(name_);
        const Verbosity v = o_.common.verbosity();
        raise_memlock_limit(v);
        prepare(v);
        describe_features(v, kernel_features());
        probes_ = plan();
        loaded_.emplace(
            &Skel::open, &Skel::destroy, [this](Skel &s) { configure(s); }, probes_, v);
        say_what_probes_lost(name_, probes_);
        loaded(v);
    }

    // The tool's own run: checks, load, then its metrics served (--prometheus) or its
    // output (trace()) until stopped. Returns the exit status.
    int run() {
        check_options();
        load();
        install_stop_signals();
        if (o_.prom.on())
            return serve_tool_metrics(name_, o_.prom, o_.common, *this);
        return trace();
    }

    const std::vector<Probe> &probes() const final { return probes_; }
    bpf_object *object() const final { return skel().obj; }

  protected:
    // The steps of load() that are the tool's own. Before the plan: what it reads of the
    // kernel (argument orders, names from the BTF, symbols) and says with -v.
    virtual void prepare(const Verbosity &) {}
    // Its probes, each with its hook choices in the order to try them.
    virtual std::vector<Probe> plan() const = 0;
    // The open skeleton before each load attempt: read-only data, map sizes.
    virtual void configure(Skel &skel) = 0;
    // Once attached (probes_ holds the choices made): what a probe's choice lost, said once,
    // and with --prometheus the metrics it serves.
    virtual void loaded(const Verbosity &) {}

    // What the tool prints until stopped (a signal, -d, the interval count), and its summary.
    virtual int trace() = 0;

    Skel &skel() const { return **loaded_; }

    // Stops the programs before the end of a run: the events and counters read after it are
    // all there will be (a record submitted after the last read would be lost uncounted).
    void detach_programs() { loaded_->detach(); }

    // For a tool that prints a line per event, or with -H histograms counted in the kernel
    // instead (`hist`), the checks of check_options() on that choice: an interval goes with -H,
    // --buffer-size without it. `event` names what a line is ("run", "stall").
    void check_lines_or_histograms(bool hist, std::string_view event) const {
        if (o_.common.interval > 0 && !hist)
            throw UsageError(fmt::format("an interval goes with -H; without it {} prints every {}",
                                         name_, event));
        check_buffer_size_used(o_.events, !hist,
                               fmt::format("the per-{} output (without -H)", event));
    }

    // The skeleton's `events` map, in configure(): --buffer-size's bytes when the run prints
    // events (`printed`), else a page (a map cannot be empty); the batch that wakes user space
    // (the rodata's wakeup_bytes); a perf buffer on kernels without ring buffers.
    void configure_events(Skel &skel, bool printed) const {
        skel.rodata->wakeup_bytes = o_.events.wakeup_bytes;
        bpf_map__set_max_entries(skel.maps.events, printed ? o_.events.bytes : 4096);
        use_events_map(skel.maps.events, kernel_features());
    }

    // Opens `events` on the skeleton's events map for records of type Event, each passed whole
    // to `on_event` (a shorter record is not one), in a buffer of `size`; said with -v.
    template <typename Event>
    void read_events(std::optional<EventReader> &events, const EventBufferSize &size,
                     std::function<void(const Event &)> on_event, const Verbosity &v) {
        events.emplace(
            skel().maps.events,
            [on_event = std::move(on_event)](const void *data, size_t bytes) {
                if (bytes >= sizeof(Event))
                    on_event(*static_cast<const Event *>(data));
            },
            size.bytes, size.wakeup_bytes);
        verbose(v, "events through " + events->describe());
    }

    // The loop of a tool that prints a line per event (from `events`) or, with -H (`events`
    // empty), histograms each interval and at the end; then its summary and end_run().
    int trace_lines_or_histograms(std::optional<EventReader> &events,
                                  const std::function<void()> &print_histograms,
                                  const std::function<void(const EventReader *)> &print_summary,
                                  std::string_view what, const Verbosity &v, bpf_map *threads,
                                  bpf_map *overflow) {
        EventReader *reader = events ? &*events : nullptr;
        const bool done = trace_until_stopped(o_.common, reader, print_histograms);
        if (reader == nullptr && !done)
            print_histograms();
        print_summary(reader);
        return end_run(what, v, threads, overflow);
    }

    // The end of a run, after its summary: the program runs the kernel skipped (so many `what`
    // went uncounted), with -v the use of the per-thread table `threads` (and its overflow
    // table) of a tool that keeps one, and stdout flushed. Returns the exit status, 0.
    int end_run(std::string_view what, const Verbosity &v, bpf_map *threads = nullptr,
                bpf_map *overflow = nullptr) {
        report_skipped_runs(name_, skel().obj, what);
        if constexpr (requires(Skel & s) { s.bss->memlat_thread_entries_created; }) {
            if (threads != nullptr)
                report_thread_state(v, threads, overflow, skel().bss->memlat_thread_entries_created,
                                    skel().bss->memlat_thread_entries_exit_deleted);
        }
        fflush(stdout);
        return 0;
    }

    Options o_;
    std::vector<Probe> probes_;

  private:
    static constexpr const char *name_ = Name;
    std::optional<Loaded<Skel>> loaded_;
};

// A tool's words, as its -h and `memlat -h` show them: what its file opens with.
struct ToolManual {
    const char *summary;     // its line in `memlat -h`
    const char *description; // -h's text above the options
    const char *examples;    // -h's text below them, before the Environment part made here
    // MEMLAT_DISABLE_HOOKS' words: the hook kinds (and families) its probes have.
    std::span<const std::string_view> hook_kinds = tracepoint_hook_kinds;
    // Whether its BPF side adapts to older kernels (MEMLAT_DISABLE_FEATURES is listed).
    bool disable_features = true;
    // Whether it prints per interval ([interval [count]]) or per event only.
    bool periodic = true;
    const char *timestamp_help = nullptr; // -T's words (null: "Print a wall-clock time")
    const char *event_lines = nullptr;    // --buffer-size's words: what passes the buffer
};

// What a tool's entry is made of: its class T, its name, its manual, the function that adds
// its own options and the one that adds those `memlat exporter` takes too.
template <typename T>
using CountingOptionsOf = void (*)(CommandLine &, typename T::Options &);
template <typename T>
using OwnOptionsOf = void (*)(CommandLine &, typename T::Options &);

// Tool T's command line: its -h (the manual's words) and every option, its own and the
// shared ones.
template <typename T, const char *Name, const ToolManual &manual, OwnOptionsOf<T> add_own_options,
          CountingOptionsOf<T> add_counting_options>
CommandLine tool_command_line(typename T::Options &options) {
    CommandLine cli(Name, manual.description,
                    manual.examples + environment_help(manual.disable_features, manual.hook_kinds));
    add_counting_options(cli, options);
    add_own_options(cli, options);
    if (manual.timestamp_help != nullptr)
        add_common_options(cli, options.common, manual.periodic, manual.timestamp_help);
    else
        add_common_options(cli, options.common, manual.periodic);
    if constexpr (requires { options.events; }) {
        static_assert(manual.event_lines != nullptr,
                      "a tool with per-event output says what passes its buffer");
        add_buffer_size_option(cli, options.events, manual.event_lines);
    }
    add_listen_option(cli, options.prom);
    return cli;
}

// The main() of tool T in the multi-call binary: its command line, then T(options).run().
template <typename T, const char *Name, const ToolManual &manual, OwnOptionsOf<T> add_own_options,
          CountingOptionsOf<T> add_counting_options>
int tool_main(int argc, char **argv) {
    return run_tool(Name, [&] {
        typename T::Options options;
        CommandLine cli =
            tool_command_line<T, Name, manual, add_own_options, add_counting_options>(options);
        cli.parse(argc, argv);
        return T(std::move(options)).run();
    });
}

// Tool T's entry in the multi-call binary (`memlat NAME`, a link named NAME, the manual's
// summary in `memlat -h`) and in `memlat exporter` (its counting options under --NAME., then
// its counting side).
template <typename T, const char *Name, const ToolManual &manual, OwnOptionsOf<T> add_own_options,
          CountingOptionsOf<T> add_counting_options>
ToolEntry tool_entry() {
    return ToolEntry{
        Name, manual.summary, tool_main<T, Name, manual, add_own_options, add_counting_options>,
        []() -> std::unique_ptr<ExporterPart> {
            return std::make_unique<ExporterPartOf<T, typename T::Options>>(add_counting_options);
        }};
}

} // namespace memlat
