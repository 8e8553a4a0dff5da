#include "cli/options.h"

#include <algorithm>
#include <argp.h>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <unistd.h>

#include "kernel/btf.h"

namespace memlat {

namespace {

// argp reports usage errors with this status (EX_USAGE by default): BCC's tools use 2.
struct UsageExitStatus {
    UsageExitStatus() { argp_err_exit_status = 2; }
} usage_exit_status;

} // namespace

CommandLine::CommandLine(std::string tool, std::string summary, std::string examples)
    : tool_(std::move(tool)), summary_(std::move(summary)), examples_(std::move(examples)) {
    entries_.push_back(Entry{'h', "help-h", "", "Show this help and exit", nullptr});
}

std::string CommandLine::option_name(char key, const std::string &long_name) const {
    if (!prefix_.empty())
        return "--" + prefix_ + long_name;
    return key ? fmt::format("-{}", key) : "--" + long_name;
}

std::pair<int, std::string> CommandLine::name_option(char key, std::string long_name) {
    if (prefix_.empty())
        return {key ? key : next_long_key_++, std::move(long_name)};
    return {next_long_key_++, prefix_ + long_name};
}

void CommandLine::begin_group(std::string prefix, std::string title) {
    prefix_ = std::move(prefix);
    entries_.push_back(Entry{0, "", "", std::move(title), nullptr, false, true});
}

bool CommandLine::group_given(std::string_view prefix) const {
    return std::find(groups_given_.begin(), groups_given_.end(), prefix) != groups_given_.end();
}

void CommandLine::flag(char key, std::string long_name, std::string help,
                       std::function<void()> on) {
    option(key, std::move(long_name), "", std::move(help), [on](const std::string &) { on(); });
}

void CommandLine::flag(char key, std::string long_name, std::string help, bool &target) {
    flag(key, std::move(long_name), std::move(help), [&target] { target = true; });
}

void CommandLine::option(char key, std::string long_name, std::string arg, std::string help,
                         std::function<void(const std::string &)> on) {
    auto [k, name] = name_option(key, std::move(long_name));
    if (!prefix_.empty())
        on = [this, prefix = prefix_, on = std::move(on)](const std::string &text) {
            if (!group_given(prefix))
                groups_given_.push_back(prefix);
            on(text);
        };
    entries_.push_back(Entry{k, std::move(name), std::move(arg), std::move(help), std::move(on)});
}

void CommandLine::alias(std::string long_name) {
    Entry e = entries_.back();
    e.long_name = std::move(long_name);
    e.alias = true;
    entries_.push_back(std::move(e));
}

void CommandLine::retired_short(char key, std::string long_option, std::string meaning) {
    if (!prefix_.empty())
        return; // a group's options have no short names
    Entry e{key, "", "", "", nullptr};
    e.on = [this, key, long_option = std::move(long_option),
            meaning = std::move(meaning)](const std::string &) {
        throw UsageError(fmt::format("-{} is no longer {}'s: write {}. In every memlat tool "
                                     "that has it, -{} means {}",
                                     key, tool_, long_option, key, meaning));
    };
    e.hidden = true;
    entries_.push_back(std::move(e));
}

void CommandLine::positional(std::string name, std::string help,
                             std::function<void(const std::string &)> on) {
    positionals_.push_back(Positional{std::move(name), std::move(help), std::move(on)});
}

void CommandLine::parse(int argc, char **argv) {
    std::vector<argp_option> table;
    for (const auto &e : entries_)
        // -h is BCC's spelling of argp's own -?/--help: accepted, not listed twice. A header
        // (no name, no key) starts a group of its own in the help.
        table.push_back(e.header ? argp_option{nullptr, 0, nullptr, 0, e.help.c_str(), 0}
                                 : argp_option{e.long_name.empty() ? nullptr : e.long_name.c_str(),
                                               e.key, e.arg.empty() ? nullptr : e.arg.c_str(),
                                               e.key == 'h' || e.hidden ? OPTION_HIDDEN
                                               : e.alias                ? OPTION_ALIAS
                                                                        : 0,
                                               e.help.c_str(), 0});
    table.push_back(argp_option{});
    std::string args_doc;
    for (const auto &p : positionals_)
        args_doc += (args_doc.empty() ? "" : " ") + ("[" + p.name);
    args_doc += std::string(positionals_.size(), ']');
    // argp prints the text before \v above the options and the rest below them.
    std::string doc = summary_;
    if (!positionals_.empty())
        doc += "\n\nArguments:";
    for (const auto &p : positionals_)
        doc += fmt::format("\n  {:<10} {}", p.name, p.help);
    doc += "\n\nOptions:\v" + examples_;

    auto parser = [](int key, char *arg, argp_state *state) -> error_t {
        auto *self = static_cast<CommandLine *>(state->input);
        try {
            if (key == 'h') {
                argp_state_help(state, stdout, ARGP_HELP_STD_HELP);
                return 0;
            }
            if (key == ARGP_KEY_ARG) {
                if (state->arg_num >= self->positionals_.size())
                    throw UsageError(fmt::format("unexpected argument '{}'", arg));
                self->positionals_[state->arg_num].on(arg);
                return 0;
            }
            for (const auto &e : self->entries_)
                if (!e.header && e.key == key) {
                    // No option of any tool means anything with an empty value (-c '' would
                    // otherwise select nothing, or everything, silently).
                    if (arg != nullptr && *arg == '\0')
                        throw UsageError(fmt::format(
                            "{} needs a value, and it was given an empty one",
                            e.key < 256 ? fmt::format("-{}", char(e.key)) : "--" + e.long_name));
                    e.on(arg ? std::string(arg) : std::string());
                    return 0;
                }
        } catch (const UsageError &e) {
            argp_error(state, "%s", e.what());
        }
        return ARGP_ERR_UNKNOWN;
    };
    // argp adds -V/--version when this hook is set; the tool's name is argv[0] (set below).
    argp_program_version_hook = [](FILE *stream, argp_state *state) {
        fmt::print(stream, "{} {}\n", state->name, MEMLAT_VERSION);
    };
    argp spec{table.data(), parser, args_doc.c_str(), doc.c_str(), nullptr, nullptr, nullptr};
    argv[0] = const_cast<char *>(tool_.c_str()); // argp names the tool by argv[0]
    argp_parse(&spec, argc, argv, 0, nullptr, this);
}

double parse_seconds(std::string_view text, std::string_view what, double at_least) {
    double seconds = parse_number<double>(text, what);
    // from_chars accepts "inf" and "nan"; neither is a time to wait.
    if (!std::isfinite(seconds) || seconds <= 0)
        throw UsageError(
            fmt::format("{} must be a positive number of seconds, not '{}'", what, text));
    if (seconds > max_seconds)
        throw UsageError(
            fmt::format("{} of {} seconds is longer than memlat can wait (at most {:.0f} "
                        "seconds, about three years); to run until Ctrl-C, leave it out",
                        what, text, max_seconds));
    if (seconds < at_least)
        throw UsageError(
            fmt::format("{} must be at least {} seconds, not '{}'", what, at_least, text));
    return seconds;
}

void add_common_options(CommandLine &cli, CommonOptions &options, bool periodic,
                        std::string timestamp_help) {
    cli.flag('T', "timestamp", std::move(timestamp_help), options.timestamp);
    cli.flag('j', "json",
             "JSON lines on stdout instead of text: one object per event or "
             "interval (schema in docs/output.md)",
             options.json);
    add_run_options(cli, options);
    add_max_entries_option(cli, options);
    if (periodic)
        add_interval_arguments(cli, options,
                               "print every INTERVAL seconds instead of once at the end");
}

void add_interval_arguments(CommandLine &cli, CommonOptions &options, std::string interval_help) {
    cli.positional("interval", std::move(interval_help), [&options](const std::string &text) {
        options.interval = parse_seconds(text, "the interval", min_interval);
    });
    cli.positional("count", "stop after COUNT intervals", [&options](const std::string &text) {
        options.count = parse_number<uint64_t>(text, "count");
        if (options.count == 0)
            throw UsageError("the count must be a positive number");
    });
}

void add_run_options(CommandLine &cli, CommonOptions &options) {
    cli.option(
        'd', "duration", "SECONDS",
        "Stop after SECONDS and print the summary (default: run until Ctrl-C)",
        [&options](const std::string &text) { options.duration = parse_seconds(text, "-d", 0); });
    cli.flag('v', "verbose",
             "Say on stderr which hook was chosen for each probe and why the "
             "others were not; -vv also shows libbpf's own messages",
             [&options] { options.verbose++; });
    cli.option(0, "btf", "FILE",
               "The running kernel's BTF, for kernels without /sys/kernel/btf/vmlinux that "
               "this tool embeds none for: raw BTF (pahole --btf_encode_detached) or a vmlinux "
               "with a .BTF section. Also MEMLAT_BTF=FILE. -v says which BTF is used",
               [&options](const std::string &path) {
                   if (access(path.c_str(), R_OK) != 0)
                       throw UsageError(
                           fmt::format("--btf {}: cannot read it ({})", path, strerror(errno)));
                   set_btf_option(path);
               });
}

void add_max_entries_option(CommandLine &cli, CommonOptions &options) {
    cli.option(
        0, "max-entries", "N",
        fmt::format("Rows of each per-process, per-file, per-culprit or per-stack table "
                    "(default: the tool's own, in docs/tools/; at most {}). Events that find "
                    "a table full are still in the totals, and every interval and the "
                    "summary say how many (table_full). A larger N also raises the "
                    "per-thread state of drsnoop, compactsnoop, numamove and cachestat "
                    "(4096 threads that have stalled, kept until they exit; those beyond "
                    "share 1024 more, the least recently stalled thread's going to a new "
                    "one)",
                    max_table_entries),
        [&options](const std::string &text) {
            const auto n = parse_number<uint64_t>(text, "--max-entries");
            if (n == 0 || n > max_table_entries)
                throw UsageError(
                    fmt::format("--max-entries takes 1 to {}, not {}", max_table_entries, text));
            options.max_entries = static_cast<uint32_t>(n);
        });
}

std::string environment_help(bool disable_features, std::span<const std::string_view> hook_kinds) {
    // The descriptions start at column 28, as argp's option list above them does.
    constexpr std::string_view continued = "\n                            ";
    std::string text = "Environment:\n"
                       "  MEMLAT_READY=1            print \"memlat: ready\" on stderr once "
                       "tracing runs\n"
                       "  MEMLAT_DISABLE_HOOKS=LIST";
    std::string_view separator = " ";
    for (auto line : hook_kinds) {
        text += separator;
        text += line;
        separator = continued;
    }
    if (disable_features) {
        text += "\n  MEMLAT_DISABLE_FEATURES=LIST";
        text += continued;
        text += "act as on an older kernel: task_btf (5.11),";
        text += continued;
        text += "ringbuf (5.8), kernel_btf, uffd_wp_async (6.7);";
        text += continued;
        text += "-v shows the choice";
    }
    return text;
}

size_t parse_buffer_size(std::string_view text) {
    const auto bad = [&text](std::string_view why) {
        return UsageError(fmt::format("--buffer-size {}: {} (a power of two from 4K to 1G, "
                                      "e.g. 64K, 1M or 65536)",
                                      text.empty() ? "''" : text, why));
    };
    if (text.empty())
        throw UsageError("--buffer-size needs a value");
    size_t unit = 1;
    std::string_view digits = text;
    switch (digits.back()) {
    case 'k':
    case 'K':
        unit = size_t{1} << 10;
        break;
    case 'm':
    case 'M':
        unit = size_t{1} << 20;
        break;
    case 'g':
    case 'G':
        unit = size_t{1} << 30;
        break;
    default:
        break;
    }
    if (unit != 1)
        digits.remove_suffix(1);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos)
        throw bad("not a size");
    // At most 1G: more digits than that are too large whatever they say.
    if (digits.size() > 10)
        throw bad("more than 1G");
    uint64_t number = 0;
    std::from_chars(digits.data(), digits.data() + digits.size(), number);
    const uint64_t bytes = number * unit;
    if (bytes > max_buffer_bytes)
        throw bad("more than 1G");
    if (bytes < min_buffer_bytes)
        throw bad("less than one page (4K)");
    if (!std::has_single_bit(bytes))
        throw bad("not a power of two");
    return bytes;
}

void add_cgroup_option(CommandLine &cli, std::string &path) {
    cli.option('G', "cgroup", "PATH",
               "Only tasks in this cgroup and below (a cgroup v2 directory, or one of the "
               "cgroup v1 memory hierarchy), or in a pod or a container by name: "
               "NAMESPACE/POD[/CONTAINER], a container's name or id (docs/names.md)",
               path);
}

void add_buffer_size_option(CommandLine &cli, EventBufferSize &buffer, std::string_view mode) {
    cli.option(0, "buffer-size", "SIZE",
               fmt::format("Bytes of the ring buffer {} pass through (default {}K): a power of "
                           "two from 4K to 1G, e.g. 64K or 1M. Events that find it full are "
                           "lost, counted and printed (lost_events)",
                           mode, buffer.bytes >> 10),
               [&buffer](const std::string &text) {
                   buffer.bytes = parse_buffer_size(text);
                   buffer.wakeup_bytes = std::min(buffer.wakeup_bytes, buffer.bytes / 4);
                   buffer.given = true;
               });
}

void check_buffer_size_used(const EventBufferSize &buffer, bool has_events,
                            std::string_view modes) {
    if (buffer.given && !has_events)
        throw UsageError(
            fmt::format("--buffer-size sizes the buffer of {}; this mode has none", modes));
}

void check_max_entries_used(const CommonOptions &options, bool has_table, std::string_view tables) {
    if (options.max_entries != 0 && !has_table)
        throw UsageError(fmt::format("--max-entries sizes the tables of {}; without them it has "
                                     "nothing to size",
                                     tables));
}

} // namespace memlat
