// Options every tool shares, with the meanings BCC and libbpf-tools gave them, the command
// line parser, and CPU lists (numbers and comma lists: parsing.h).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "base/parsing.h"
#include "base/verbosity.h"

namespace memlat {

struct CommonOptions {
    bool timestamp = false;   // -T: a wall-clock time on each line or interval
    double duration = 0;      // -d: stop after this many seconds; 0 runs until Ctrl-C
    bool json = false;        // -j: JSON lines on stdout
    int verbose = 0;          // -v: hook choices and loader decisions on stderr
    double interval = 0;      // positional: print every INTERVAL seconds; 0 prints at the end
    uint64_t count = 0;       // positional: stop after COUNT intervals; 0 never
    uint32_t max_entries = 0; // --max-entries: rows of the tool's tables; 0: each its own
    Verbosity verbosity() const { return Verbosity{verbose}; }
    // The size of a table whose default is `default_entries`.
    uint32_t entries(uint32_t default_entries) const {
        return max_entries != 0 ? max_entries : default_entries;
    }
};

// The command line, parsed by glibc's argp: the parser libbpf-tools use, which prints the
// --help text and the usage errors users of those tools know. (A C++ parser such as CLI11
// needs iostreams, which add about 1 MB to every static binary.) Callbacks may throw
// UsageError; argp then prints "TOOL: message" and a hint, and the tool exits with status 2.
template <typename T>
constexpr bool is_optional = false;
template <typename T>
constexpr bool is_optional<std::optional<T>> = true;

class CommandLine {
  public:
    CommandLine(std::string tool, std::string summary, std::string examples);

    // -k/--long (key 0: long option only). `on` runs each time the flag appears.
    void flag(char key, std::string long_name, std::string help, std::function<void()> on);
    void flag(char key, std::string long_name, std::string help, bool &target);
    // -k/--long ARG. `target`: a string, a number or an optional number (set when given).
    void option(char key, std::string long_name, std::string arg, std::string help,
                std::function<void(const std::string &)> on);
    template <typename T>
    void option(char key, std::string long_name, std::string arg, std::string help, T &target) {
        std::string what = option_name(key, long_name);
        option(key, std::move(long_name), std::move(arg), std::move(help),
               [&target, what](const std::string &text) {
                   if constexpr (std::is_same_v<T, std::string>)
                       target = text;
                   else if constexpr (is_optional<T>)
                       target = parse_number<typename T::value_type>(text, what);
                   else
                       target = parse_number<T>(text, what);
               });
    }
    // Another long name for the option added last (BCC's spelling, e.g. --extended_fields).
    void alias(std::string long_name);
    // A short option this tool gave up because the letter means something else in the other
    // tools (BCC's meaning, where BCC has one): hidden, and a usage error that says to write
    // `long_option` instead and what the letter means (`meaning`). Nothing in a group.
    void retired_short(char key, std::string long_option, std::string meaning);
    // Positional arguments, in order; all optional. `help` is listed under "Arguments:".
    void positional(std::string name, std::string help,
                    std::function<void(const std::string &)> on);

    // From here on, options are long ones only, named PREFIX.NAME (`memlat exporter` takes each
    // tool's options as --TOOL.NAME), listed in --help under `title`; parsed() then says
    // whether one of them was given.
    void begin_group(std::string prefix, std::string title);
    bool group_given(std::string_view prefix) const;

    // -h/--help prints the help on stdout and exits 0; -V/--version prints "TOOL VERSION" (the
    // project's version) and exits 0.
    void parse(int argc, char **argv);

  private:
    struct Entry {
        int key;
        std::string long_name, arg, help;
        std::function<void(const std::string &)> on;
        bool alias = false;
        bool header = false; // a group's title in --help, no option
        bool hidden = false; // not in --help (a retired short option)
    };
    // How messages name an option: -k, or --long (--PREFIX.long in a group).
    std::string option_name(char key, const std::string &long_name) const;
    // The key and long name of an option added now (in a group: no key, the prefix added).
    std::pair<int, std::string> name_option(char key, std::string long_name);
    struct Positional {
        std::string name, help;
        std::function<void(const std::string &)> on;
    };
    std::string tool_, summary_, examples_;
    std::deque<Entry> entries_; // deque: argp keeps pointers to the strings
    std::vector<Positional> positionals_;
    int next_long_key_ = 256;
    std::string prefix_;
    std::vector<std::string> groups_given_;
};

// A span of time in seconds for option `what`: finite, positive, at least `at_least` and at
// most max_seconds (so that deadlines never overflow the clock); else a UsageError naming it.
constexpr double max_seconds = 1e8;
// --max-entries: beyond this a table costs more kernel memory than any view can use.
constexpr uint32_t max_table_entries = 1 << 20;
constexpr double min_interval = 0.01; // shorter intervals would only spin
double parse_seconds(std::string_view text, std::string_view what, double at_least);

// Adds -d, -v and --btf: what a run takes whatever it prints (`memlat exporter` takes these
// for all its tools).
void add_run_options(CommandLine &cli, CommonOptions &options);
// Adds --max-entries (`memlat exporter`: one for each tool, --TOOL.max-entries).
void add_max_entries_option(CommandLine &cli, CommonOptions &options);

// The positional [interval [count]]: INTERVAL seconds (described by `interval_help`), COUNT
// intervals.
void add_interval_arguments(CommandLine &cli, CommonOptions &options, std::string interval_help);

// Adds -T, -j, the options of add_run_options() and add_max_entries_option() and, for tools
// that print periodically, [interval [count]]. What -T
// adds differs between tools as it did in BCC (a TIME(s) column of seconds for the event
// tracers, HH:MM:SS for the periodic ones), so each tool says it in `timestamp_help`.
void add_common_options(CommandLine &cli, CommonOptions &options, bool periodic,
                        std::string timestamp_help = "Print a wall-clock time (HH:MM:SS)");

// MEMLAT_DISABLE_HOOKS's description for a tool whose probes are all tracepoints (each a
// tp_btf, raw_tp or tracepoint program: tracepoint_choices()), its lines as environment_help()
// takes them.
inline constexpr std::array<std::string_view, 2> tracepoint_hook_kinds{
    "never try these hook kinds (tp_btf, raw_tp,", "tracepoint)"};

// The "Environment:" part every tool's examples text ends with: MEMLAT_READY, then
// MEMLAT_DISABLE_HOOKS with the tool's own hook kinds (`hook_kinds`: the lines of its
// description, the first after "never try these hook kinds", the others under it), then for
// tools whose BPF side adapts to older kernels (`disable_features`) MEMLAT_DISABLE_FEATURES.
std::string environment_help(bool disable_features,
                             std::span<const std::string_view> hook_kinds = tracepoint_hook_kinds);

// --buffer-size SIZE, for the tools with a per-event output: the bytes of the ring buffer the
// events pass through (on kernels before 5.8 the per-CPU perf buffers share as much). Each
// tool's default is sized for its event rate; a full buffer loses events, which are counted
// and printed. SIZE: a number of bytes with an optional K, M or G (KiB, MiB, GiB), a power of
// two from min_buffer_bytes to max_buffer_bytes (the ring buffer's own rules: whole pages, a
// power of two).
struct EventBufferSize {
    size_t bytes;        // the buffer
    size_t wakeup_bytes; // the batch after which user space is woken, a power of two
    bool given = false;  // --buffer-size was on the command line
};
constexpr size_t min_buffer_bytes = 4096;
constexpr size_t max_buffer_bytes = size_t{1} << 30;
size_t parse_buffer_size(std::string_view text);
// Adds --buffer-size to `cli`, setting `buffer` (which holds the tool's defaults; `mode` names
// the output the buffer carries, for the help). A buffer smaller than four wake-up batches
// gets a quarter of its size as the batch, so that user space is woken before it is full.
void add_buffer_size_option(CommandLine &cli, EventBufferSize &buffer, std::string_view mode);
// A UsageError when --buffer-size was given to a mode without per-event output (`modes` names
// the options that have one, for the message).
void check_buffer_size_used(const EventBufferSize &buffer, bool has_events, std::string_view modes);

// -G/--cgroup PATH: only the tasks of one cgroup and its descendants (the tools that filter by
// cgroup say the same; the tool resolves PATH, a v2 directory or one of the v1 memory
// hierarchy, to what its BPF side compares).
void add_cgroup_option(CommandLine &cli, std::string &path);

// A UsageError when --max-entries was given to a mode that keeps none of the tables it sizes
// (`tables` names the options that do, for the message: "-P or -f").
void check_max_entries_used(const CommonOptions &options, bool has_table, std::string_view tables);

} // namespace memlat
