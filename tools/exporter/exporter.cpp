// memlat exporter: the counting side of every tool in one process, served to Prometheus on one
// port. Each tool loads on its own (its ExporterPart, metrics_serving.h): one the kernel cannot
// run is reported down, with the reason, and stops none of the others.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "base/errors.h"
#include "base/parsing.h"
#include "cli/multicall.h"
#include "cli/options.h"
#include "cli/run_loop.h"
#include "loading/fallback.h"
#include "loading/loader.h"
#include "prometheus/exporter.h"
#include "prometheus/metrics_serving.h"
#include "prometheus/prometheus.h"

namespace memlat {

namespace {

constexpr char command_name[] = "memlat exporter";

// Where it listens without --web.listen-address: next to the ports of the tools' own
// examples (tlbflush 9846 ... oomwhy 9851), each its own.
constexpr const char *default_listen = ":9845";

constexpr const char *description =
    R"(Serve the counters and histograms of every memlat tool this kernel can run to
Prometheus from one process on one port (http://ADDR:PORT/metrics), as
TOOL --prometheus serves one tool's. Each tool loads on its own: one that
cannot run here (a missing tracepoint, tlbflush on arm64, a missing
capability) is reported down, memlat_tool_up{tool} 0 with the reason in
memlat_tool_error_info{tool,error} and on stderr, and stops none of the
others.

The metric names and labels are those of each TOOL --prometheus; the metrics
every tool exports about itself (memlat_lost_events_total, memlat_probe_info,
...) carry a tool label, and memlat_build_info says tool="exporter".
A tool's options that shape its metrics are given as --TOOL.NAME, NAME being
the tool's own long option (--drsnoop.cgroup PATH is drsnoop's -G PATH, and
--TOOL.max-entries sizes its tables); -d, -v and --btf apply to every tool.)";

constexpr const char *examples = R"(Examples:
  memlat exporter           every tool, on every address, port 9845
  memlat exporter --web.listen-address 127.0.0.1:9845
                            only on the loopback address
  memlat exporter --tools drsnoop,memstall --drsnoop.kind memcg
                            two tools; drsnoop counts memory-cgroup reclaim only
  memlat exporter --tlbflush.latency --drsnoop.prometheus-labels comm
                            tlbflush's IPI handler histograms (CAP_SYSLOG), and
                            drsnoop's stalls by task name too

)";

// The hook kinds of every tool, for MEMLAT_DISABLE_HOOKS's description.
constexpr std::array<std::string_view, 3> hook_kinds{"never try these hook kinds (tp_btf, raw_tp,",
                                                     "tracepoint, fentry, kprobe), families or",
                                                     "choices, in whichever tool knows them"};

// One tool of --tools, and whether it runs.
struct ToolState {
    const ToolEntry *entry;
    std::unique_ptr<ExporterPart> part;
    CountingSide *side = nullptr; // null: not running
    std::string error;            // why not
};

// A message as one line, for a label value and a log line.
std::string one_line(std::string text) {
    std::replace(text.begin(), text.end(), '\n', ' ');
    return text;
}

void mark_down(ToolState &tool, const std::string &why) {
    tool.error = one_line(why);
    tool.side = nullptr;
    tool.part->unload();
    fmt::print(stderr, "{}: {} does not run: {}\n", command_name, tool.entry->name, tool.error);
}

// The tools of --tools (default: all), in the order `memlat -h` lists them; a UsageError for a
// name that is none, or for --TOOL.NAME options of a tool left out.
std::vector<ToolState> choose(std::vector<ToolState> all, const std::string &list,
                              const CommandLine &cli) {
    std::vector<std::string> names;
    for (const auto &t : all)
        names.push_back(t.entry->name);
    const auto wanted = list.empty() ? names : split_list(list, "--tools");
    for (const auto &name : wanted)
        if (std::find(names.begin(), names.end(), name) == names.end())
            throw UsageError(fmt::format("--tools: no tool named '{}'; the tools are: {}", name,
                                         fmt::join(names, ", ")));
    std::vector<ToolState> chosen;
    for (auto &t : all) {
        const std::string name = t.entry->name;
        if (std::find(wanted.begin(), wanted.end(), name) != wanted.end())
            chosen.push_back(std::move(t));
        else if (cli.group_given(name + "."))
            throw UsageError(
                fmt::format("--{}.* options were given, but --tools leaves {} out", name, name));
    }
    return chosen;
}

// One scrape: what serves, which tools run, then each running tool's families. A tool whose
// counters cannot be read at this scrape is down for it, and its families are left out.
void collect(prometheus::Exposition &out, std::vector<ToolState> &tools, bool run_stats_held) {
    write_server_metrics(out, "exporter");
    std::vector<prometheus::Exposition> parts;
    std::vector<std::string> errors;
    for (auto &t : tools) {
        errors.push_back(t.error);
        if (t.side == nullptr)
            continue;
        prometheus::Exposition part;
        part.set_tool(t.entry->name);
        try {
            write_tool_metrics(part, *t.side, run_stats_held);
            parts.push_back(std::move(part));
        } catch (const std::exception &e) {
            errors.back() = one_line(fmt::format("cannot read the counters: {}", e.what()));
        }
    }
    out.family("memlat_tool_up", prometheus::Type::Gauge,
               "Whether the tool runs in this exporter (1) or could not be loaded or read (0)");
    for (size_t i = 0; i < tools.size(); ++i)
        out.sample({{"tool", tools[i].entry->name}}, errors[i].empty() ? 1 : 0);
    out.family("memlat_tool_error", prometheus::Type::Info,
               "Why a tool does not run in this exporter");
    for (size_t i = 0; i < tools.size(); ++i)
        if (!errors[i].empty())
            out.sample({{"tool", tools[i].entry->name}, {"error", errors[i]}}, 1);
    for (const auto &part : parts)
        out.merge(part);
}

int run_exporter(int argc, char **argv) {
    CommonOptions common;
    std::string tools_list;
    ListenAddress where = parse_listen_address(default_listen);
    std::vector<ToolState> tools;
    CommandLine cli(command_name, description, examples + environment_help(true, hook_kinds));
    std::string names;
    for (const ToolEntry *entry : tool_entries())
        if (entry->exporter_part != nullptr)
            names += (names.empty() ? "" : ", ") + std::string(entry->name);
    cli.option(0, "tools", "LIST", fmt::format("Only these tools (default: all: {})", names),
               tools_list);
    cli.option(0, "web.listen-address", "[ADDR:]PORT",
               fmt::format("Serve on ADDR:PORT (no ADDR: every address; default {}), as "
                           "node_exporter's option of that name",
                           default_listen),
               [&where](const std::string &text) { where = parse_listen_address(text); });
    cli.alias("prometheus"); // the tools' name for it
    std::optional<WebConfig> web;
    add_web_config_option(cli, web); // as node_exporter's
    bool bpf_stats = false;
    add_bpf_stats_option(cli, bpf_stats);
    add_run_options(cli, common);
    for (const ToolEntry *entry : tool_entries()) {
        if (entry->exporter_part == nullptr)
            continue;
        ToolState t{entry, entry->exporter_part()};
        cli.begin_group(std::string(entry->name) + ".",
                        fmt::format("{} (see '{} -h'):", entry->name, entry->name));
        t.part->add_options(cli);
        tools.push_back(std::move(t));
    }
    cli.parse(argc, argv);
    tools = choose(std::move(tools), tools_list, cli);

    // The tools' options first, so that bad input loads nothing.
    share_disabled_hooks();
    for (auto &t : tools) {
        try {
            t.part->check(common, where);
        } catch (const UsageError &e) {
            throw UsageError(fmt::format("{}: {}", t.entry->name, e.what()));
        } catch (const RuntimeError &e) {
            mark_down(t, e.what());
        }
    }
    for (auto &t : tools) {
        if (!t.error.empty())
            continue;
        try {
            t.side = &t.part->load();
        } catch (const RuntimeError &e) {
            mark_down(t, e.what());
        }
    }
    const auto unknown = disabled_hooks_unknown(environment_list("MEMLAT_DISABLE_HOOKS"));
    if (!unknown.empty())
        throw UsageError(fmt::format("MEMLAT_DISABLE_HOOKS: {} is not a hook kind or a hook of "
                                     "any tool",
                                     fmt::join(unknown, ", ")));
    if (std::none_of(tools.begin(), tools.end(), [](const auto &t) { return t.side != nullptr; }))
        throw RuntimeError("no tool can run here (each said why above)");

    ProfileSources profiles;
    for (auto &t : tools)
        if (t.side != nullptr && t.side->profile_source() != nullptr)
            profiles.emplace_back(t.entry->name, t.side->profile_source());
    install_stop_signals();
    // While capabilities are held: BPF_ENABLE_STATS needs CAP_SYS_ADMIN.
    const OwnedFd run_stats = bpf_stats ? enable_bpf_run_stats() : OwnedFd{};
    Exporter exporter(
        where, "exporter",
        [&tools, bpf_stats](prometheus::Exposition &out) { collect(out, tools, bpf_stats); },
        web.value_or(WebConfig{}), std::move(profiles));
    serve_until_stopped(command_name, exporter, common, sleep_for);
    return 0;
}

} // namespace

} // namespace memlat

// memlat exporter (and a link named memlat-exporter).
extern const memlat::ToolEntry memlat_tool_exporter = {
    "exporter", "every tool's counters and histograms for Prometheus, one process, one port",
    memlat::entry_main<memlat::command_name, memlat::run_exporter>, nullptr,
    memlat::ToolKind::Fleet};
