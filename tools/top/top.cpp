// memlat top: which memory cgroups are stalled on memory right now, by what, next to their
// memory, limits, limit events and PSI, and the host's; refreshed every INTERVAL seconds.
// The stall time is memstall's (its BPF side loaded with no filter, sources/stall_source.h); the
// rest is what the kernel's files say (kernel/memory_state.h), read only for the rows shown.
// This file is its manual: the options, and the run that loads the sources and hands them to
// the live view (top_live.h: the intervals in top_live.cpp, the screen and its keys in
// top_screen.cpp).
//
// On a terminal it is a keyboard-driven screen (cli/terminal.h, ncurses): rows to select, sorted by
// a column the user picks, filtered, a cgroup opened into its processes and a process into its
// threads, held, with a help page. -b prints text rows per interval for a pipe, -j JSON lines.
// -o records the intervals (top_record.h), which --replay replays on the same screen, or as -b and
// -j print them, without the BPF side; -s adds a process's most stalled stacks to its threads.
#include <unistd.h>

#include <fmt/format.h>
#include <memory>
#include <string>

#include "base/errors.h"
#include "cli/multicall.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/run_loop.h"
#include "cli/terminal.h"
#include "top/top_live.h"

namespace memlat {

namespace {

using top::Top;
using top::TopOptions;

constexpr char command_name[] = "memlat top";

constexpr const char *description =
    R"(Show which memory cgroups are stalled on memory right now and by what, with
their memory, limits and limit events, under the host's memory, PSI, stall
time per cause and reclaim rates; refreshed every INTERVAL seconds (default 1).

The stall time per cause is memstall's (memstall -h explains the causes and
what each needs); a cause this host cannot measure shows "-" in the header,
and -j lists it with the reason. STALL% is a cgroup's stall time as a share
of the interval: several stalled tasks can pass 100%. USAGE and LIMIT are
memory.current and memory.max (cgroup v2; memory.high instead when lower,
marked h) or memory.usage_in_bytes and memory.limit_in_bytes (v1); EVENTS
counts the limit being met since top started: max (v1: memory.failcnt),
then /high on cgroup v2, and Kn for n OOM kills. PSI% is the cgroup's own
memory.pressure "some" share (cgroup v2). RECL/s is the pages the cgroup's
own tasks freed per second in direct and limit reclaim (kswapd's are in the
header's rates only). HIT% is the share of its tasks' page-cache accesses
that hit, as cachestat counts them (cachestat -h), and the header's Mem line
gives the host's; its programs run on every read and page fault of the host
(--no-page-cache leaves them off).

Rows are the cgroups that stalled in the interval, busiest first (-a: every
memory cgroup). A screen too narrow for every cause (under 133 columns) gives
the causes with the most stall time a column each and sums the others in REST;
RECL/s and HIT% come after two causes (88 and 96 columns); header lines fold;
-b -w COLUMNS does the same to text rows. On a terminal
the screen is redrawn each interval; -b prints the rows as text per interval
(as top -b), -j as JSON lines.

Keys on the screen: Up/Down (k/j), PgUp/PgDn, Home/End select a cgroup;
Enter or Right opens it into its processes (and there a process into its
threads), Esc, Left or Backspace goes back;
< and > sort by another column; a shows every cgroup or only the stalled;
/ filters the rows by a text in their path or name; n shows the paths in
place of the names of pods, containers and units;
space holds the screen as it is (and space again goes on; the counting goes
on meanwhile); d or s changes the interval; h or ? shows the keys; q quits.
Rows that stalled are yellow, red from a STALL% of 10 (NO_COLOR: none).

-o FILE records every interval, with all its rows and the stalls of each
thread, as JSON lines (the objects of -j, docs/output.md); --replay FILE
replays a record afterwards, without privileges: on the screen (one interval
per INTERVAL seconds; t and T step to the next and the previous, space
holds), or with -b or -j at once. A file of -j lines replays too, without
the processes and threads.)";

constexpr const char *examples = R"(Examples:
  memlat top                the live view, every second
  memlat top 5              every 5 seconds
  memlat top -b 1 10        ten intervals of text rows, for a pipe or a log
  memlat top -j -d 60 > stalls.json
                            JSON lines for a minute
  memlat top -a -b 2 1      one interval of every memory cgroup
  memlat top -o incident.json
                            the live view, recorded
  memlat top --replay incident.json
                            the record replayed, with the same keys

)";

// cachestat's counting per memory cgroup, or null where it cannot load: then the screen goes
// on without the page-cache columns, and says why once.
std::unique_ptr<cachestat::CacheSource> load_page_cache(const CommonOptions &common) {
    try {
        auto cache = cachestat::load_cache_source(common);
        if (!cache->accesses_known())
            fmt::print(stderr,
                       "{}: HIT% shows - : this kernel counts no page-cache accesses "
                       "(cachestat -h says why)\n",
                       command_name);
        return cache;
    } catch (const RuntimeError &e) {
        fmt::print(stderr, "{}: no page-cache columns (HIT%, the header's hit ratio): {}\n",
                   command_name, e.what());
        return nullptr;
    }
}

// --replay: the record on the screen, one interval each INTERVAL seconds; with -b or -j, each
// interval printed at once.
int replay(TopOptions &o, bool full_screen) {
    if (!o.record_path.empty())
        throw UsageError("--replay replays a record and -o writes one: not both at once");
    if (o.all)
        throw UsageError("-a: a replay shows the rows that were recorded (record with -a)");
    if (o.stacks)
        throw UsageError("-s: a record holds no stacks (they are shown live only)");
    if (o.common.max_entries != 0)
        throw UsageError("--max-entries sizes memstall's table: a replay loads none");
    const top::Recording recording(o.replay_path);
    if (recording.cut_short() != 0)
        fmt::print(stderr,
                   "{}: {} ends in part of line {} (its writer stopped while writing it): the {} "
                   "intervals before it are replayed\n",
                   command_name, o.replay_path, recording.cut_short(), recording.size());
    install_stop_signals();
    if (!full_screen) {
        Top top(o, recording, nullptr);
        for (size_t i = 0; i < recording.size() && (o.common.count == 0 || i < o.common.count) &&
                           !stop_requested();
             ++i)
            top.refresh();
        flush_output();
        return 0;
    }
    FullScreen screen;
    Top top(o, recording, &screen);
    run_screen(o, screen, top);
    return 0;
}

int run_top(int argc, char **argv) {
    TopOptions o;
    o.common.interval = 1;
    CommandLine cli(command_name, description,
                    examples + environment_help(true, tracepoint_hook_kinds));
    cli.flag('b', "batch", "Text rows per interval instead of the live screen (as top -b)",
             o.batch);
    cli.flag('a', "all", "A row for every memory cgroup, not only those that stalled", o.all);
    cli.option(0, "rows", "ROWS",
               "Show at most ROWS cgroups (default: what fits the terminal; 20 with -b, -j)",
               o.rows);
    cli.option('w', "width", "COLUMNS",
               "With -b: lines COLUMNS wide, the CGROUP column taking what the others leave "
               "(it is 32 wide otherwise, cut from the left); causes that do not fit beside a "
               "16-wide CGROUP share the REST column, and the header folds",
               [&o](const std::string &text) {
                   o.width = parse_number<size_t>(text, "-w");
                   if (o.width < 60 || o.width > 4096)
                       throw UsageError(fmt::format("-w takes 60 to 4096 columns, not {}", text));
               });
    cli.flag('s', "stacks",
             "Under a process's threads, the kernel and user stacks that stalled it the "
             "longest per cause since start (memstall -s: a table of 4096 stacks, and a stack "
             "walk per stall)",
             o.stacks);
    cli.flag(0, "no-page-cache",
             "Count no page-cache accesses (HIT% and the header's hit ratio show nothing): "
             "cachestat's programs then stay off every read and page fault of the host",
             [&o] { o.page_cache = false; });
    cli.option('o', "output", "FILE",
               "Record every interval in FILE (JSON lines, all the rows and the stalls of "
               "each thread) for --replay",
               o.record_path);
    cli.option(0, "replay", "FILE",
               "Replay a record of -o (or of -j) instead of watching this host; needs no "
               "privilege",
               o.replay_path);
    cli.retired_short('r', "--replay", "--rows, rows to print, as in BCC's top tools");
    cli.flag('j', "json",
             "JSON lines on stdout instead of the screen: one object per interval (schema in "
             "docs/output.md)",
             o.common.json);
    add_run_options(cli, o.common);
    add_max_entries_option(cli, o.common);
    add_interval_arguments(cli, o.common, "refresh every INTERVAL seconds (default 1)");
    cli.parse(argc, argv);
    if (o.width != 0 && !o.batch)
        throw UsageError("-w sets the width of -b's lines: the screen takes the terminal's, "
                         "-j has no columns");
    const bool full_screen = !o.batch && !o.common.json;
    if (full_screen && !isatty(STDOUT_FILENO))
        throw UsageError("stdout is not a terminal: -b prints text rows per interval (as "
                         "top -b), -j JSON lines");
    require_stdout();
    if (!o.replay_path.empty())
        return replay(o, full_screen);
    // Opened before loading, so that a path it cannot write is a usage error at once, but
    // emptied only once loaded: a run refused its privileges leaves an earlier record whole.
    OutputFile record;
    if (!o.record_path.empty())
        record = OutputFile(o.record_path, "-o", false);
    OutputFile *recording = record.is_open() ? &record : nullptr;
    auto source = memstall::load_stall_source(o.common, o.stacks);
    auto cache = o.page_cache ? load_page_cache(o.common) : nullptr;
    // Before the ready line: a cgroup made from there on keeps its names when it goes.
    auto births = CgroupBirths::start(source->memcg_on_v1(), o.common.verbosity());
    if (recording != nullptr)
        recording->truncate();
    install_stop_signals();
    announce_tracing("Watching memory stalls per cgroup...");
    if (!full_screen) {
        Top top(o, std::move(source), std::move(cache), std::move(births), nullptr, recording);
        // Stopped by a signal or -d within an interval: its rows too, so that every stall
        // since start is in some interval of -b and -j.
        if (!run_until_stopped(o.common, sleep_for, [&] { top.refresh(); }))
            top.refresh();
        flush_output();
        return 0;
    }
    FullScreen screen;
    Top top(o, std::move(source), std::move(cache), std::move(births), &screen, recording);
    run_screen(o, screen, top);
    return 0;
}

} // namespace

} // namespace memlat

// memlat top (and the links memtop and memlat-top; tools/top/tool.cmake).
extern const memlat::ToolEntry memlat_tool_top = {
    "top", "which memory cgroups stall now, by what, with their memory and limits",
    memlat::entry_main<memlat::command_name, memlat::run_top>, nullptr, memlat::ToolKind::LiveView};
