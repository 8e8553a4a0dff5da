// lockstall: threads that wait for their address space's mmap_lock, and the threads that held
// it meanwhile: the writer they waited behind, the readers a queued writer waited for (a
// monitoring agent reading /proc/PID/smaps, a process_vm_readv), and what each was doing.
#include <fmt/format.h>

#include <cmath>
#include <tuple>
#include <utility>

#include "cli/multicall.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/run_loop.h"
#include "kernel/cgroups.h"
#include "kernel/features.h"
#include "kernel/tasks.h"
#include "kernel/types.h"
#include "lockstall_tool.h"
#include "tool/tool.h"

using namespace memlat;
using namespace memlat::lockstall;

namespace {

constexpr const char *description =
    R"(Trace threads that wait for their address space's mmap_lock, with the
threads that held it meanwhile. A thread that maps, unmaps or protects
memory takes the lock for writing; it waits for every reader (a page fault,
a monitoring agent reading /proc/PID/smaps, process_vm_readv,
get_user_pages), and while it waits every new reader queues behind it: one
long reader stalls the whole process. One line per wait of at least -m
milliseconds, then a line per hold that ended during it (the holders it
waited behind), '*' on the first of them: the hold the others queued behind,
where the convoy began. A summary per process at exit, on stderr (with -j: a
JSON object).

Columns: PID, TID and COMM of the waiter; OP what it was doing (a system
call, "fault", "gup", "/proc smaps_rollup", khugepaged, fork, exit: from its
kernel stack; "?" without kernel symbols); MODE read or write; WAIT(ms). A
holder's line: its PID, TID, COMM, OP, MODE and how long it held the lock;
then, in parentheses, the time the holder itself spent in reclaim or
compaction meanwhile (its waiters waited for that too), and in brackets
the monitoring program it is when its name is one known to read /proc
files (node_exporter, process-exporter, cAdvisor, kubelet, Telegraf,
Datadog Agent, htop, atop, top, ps...). Holds shorter than --min-hold are
not kept: a queued writer's own hold is short, and its wait has a line of
its own.

Since Linux 6.4 most page faults take a lock of the faulting VMA instead,
and 6.17 reads /proc/PID/maps that way: a fault that waits for a VMA lock,
and the reader of maps, are not in these waits. Needs the mmap_lock
tracepoints (Linux 5.11; Debian's 5.10 has none).)";

constexpr const char *examples = R"(Examples:
  lockstall                 every wait for an mmap_lock of 1 ms or more
  lockstall -p 1234         waits of process 1234 (the holders: any process)
  lockstall -m 10 -s        waits of 10 ms or more, with the stacks of waiter
                            and holders
  lockstall -G /sys/fs/cgroup/db
                            waiters in that cgroup and below
  lockstall -T -d 60 -j     a minute of JSON lines with times
  lockstall -d 30 --folded > waits.folded
                            30 s of waits as a chain graph: the waiters'
                            stacks, the root holder's on top (flamegraph.pl)
  lockstall --prometheus 127.0.0.1:9849
                            serve wait histograms, and slow waits by mode, by
                            what waited and by the convoy's root

)";

enum class ProbeId { mmap_lock, direct_reclaim, memcg_reclaim, compaction };

// Milliseconds from an option, as nanoseconds: finite, at least `at_least_ms`.
uint64_t option_ns(double ms, double at_least_ms, std::string_view what) {
    if (!std::isfinite(ms) || ms < at_least_ms || ms > 1e9)
        throw UsageError(
            fmt::format("{} takes milliseconds from {:g} to 1e9, not {:g}", what, at_least_ms, ms));
    return static_cast<uint64_t>(ms * 1e6);
}

} // namespace

namespace memlat::lockstall {

std::vector<Probe> Lockstall::plan() const {
    auto choices = tracepoint_choices({"start_locking", "acquire_returned", "released"}, "", "");
    if (!memcg_path_arg_) {
        // Positional arguments of a shape not recognized: the classic tracepoints read mm,
        // write and success by name.
        choices[0].unavailable = "mmap_lock's arguments not recognized: " + layout_why_;
        choices[1].unavailable = choices[0].unavailable;
    }
    std::vector<Probe> probes;
    probes.emplace_back(ProbeId::mmap_lock,
                        "mmap_lock:mmap_lock_start_locking/acquire_returned/released",
                        "It needs the mmap_lock tracepoints (Linux 5.11 and later; Debian's 5.10 "
                        "has none): there is no other way in without kprobes.",
                        std::move(choices));
    if (!o_.prom.on()) {
        // A holder's own memory stalls, for its line: optional, as the holders are.
        const std::string lost = "holders' time in reclaim and compaction is not measured";
        for (auto [id, event, programs] :
             {std::tuple{ProbeId::direct_reclaim, "vmscan:mm_vmscan_direct_reclaim_begin/end",
                         std::vector<std::string>{"direct_reclaim_begin", "direct_reclaim_end"}},
              std::tuple{ProbeId::memcg_reclaim, "vmscan:mm_vmscan_memcg_reclaim_begin/end",
                         std::vector<std::string>{"memcg_reclaim_begin", "memcg_reclaim_end"}},
              std::tuple{ProbeId::compaction, "compaction:mm_compaction_begin/end",
                         std::vector<std::string>{"compaction_begin", "compaction_end"}}}) {
            Probe probe(id, event, fmt::format("It needs the {} tracepoints.", event),
                        tracepoint_choices(programs), false);
            probe.note_if_none = lost;
            probes.push_back(std::move(probe));
        }
    }
    probes.push_back(thread_exit_probe());
    return probes;
}

void Lockstall::configure(lockstall_bpf &skel) {
    auto *ro = skel.rodata;
    ro->filter_pid = o_.pid.value_or(0);
    ro->min_wait_ns = option_ns(o_.min_wait_ms, 0, "-m");
    ro->min_hold_ns = option_ns(o_.min_hold_ms, 0, "--min-hold");
    ro->mmap_lock_memcg_path = memcg_path_arg_.value_or(false);
    ro->memcg_on_v1 = memcg_on_v1_;
    set_cgroup_filter(*ro, cgroup_);
    ro->trace_events = !o_.prom.on();
    ro->count_processes = !o_.prom.on();
    ro->count_causes = o_.prom.on();
    ro->causes_by_cgroup = o_.prom.label("cgroup");
    // Stacks name what waiters and holders did: one per slow wait and kept hold.
    ro->take_stacks = true;
    bpf_map__set_max_entries(skel.maps.stacks, o_.common.entries(4096));
    bpf_map__set_max_entries(skel.maps.summaries, o_.prom.on() ? 1 : o_.common.entries(8192));
    bpf_map__set_max_entries(skel.maps.causes, o_.prom.on() ? o_.common.entries(4096) : 1);
    bpf_map__set_max_entries(skel.maps.mm_holds, o_.common.entries(1024));
    configure_events(skel, !o_.prom.on());
    set_compat(*ro, kernel_features());
    size_thread_state_map(skel.maps.threads, skel.maps.threads_overflow, o_.common.max_entries);
}

void Lockstall::check_options() {
    if (o_.pid)
        require_process(*o_.pid, "-p");
    option_ns(o_.min_wait_ms, 0, "-m");
    option_ns(o_.min_hold_ms, 0, "--min-hold");
    if (!o_.cgroup.empty())
        cgroup_ = resolve_cgroup_target(o_.cgroup);
    check_prometheus_options(o_.prom, o_.common);
    if (o_.prom.on() && (o_.stacks || o_.profile.wanted()))
        throw UsageError("--prometheus serves counts and histograms: -s, --folded, "
                         "--folded-file and --pprof go with the per-wait output");
    profile_out_.open(o_.profile, o_.common);
    check_buffer_size_used(o_.events, !o_.prom.on(), "the per-wait output (without --prometheus)");
}

void Lockstall::prepare(const Verbosity &v) {
    memcg_path_arg_ = mmap_lock_passes_memcg_path(layout_why_);
    if (!memcg_path_arg_)
        verbose(v, "mmap_lock's arguments not recognized (" + layout_why_ +
                       "): the classic tracepoints read them by name");
    else
        verbose(v, *memcg_path_arg_
                       ? "mmap_lock_* pass (mm, memcg_path, write): the kernel formats the "
                         "memory cgroup's path at each lock operation while they are traced"
                       : "mmap_lock_* pass (mm, write)");
}

void Lockstall::loaded(const Verbosity &v) {
    if (o_.prom.on())
        metrics_.emplace(o_.prom, cgroup_ ? cgroup_->path : "", o_.min_wait_ms / 1e3);
    kernel_symbols_.emplace(KernelSymbols::for_stacks());
    symbolizer_.emplace(skel().maps.stacks, &*kernel_symbols_);
    verbose(v, kernel_symbols_->describes_by_kernel()
                   ? "operations named from the kernel's own descriptions of stack addresses"
               : kernel_symbols_->addresses_hidden()
                   ? "kernel symbol addresses are hidden (kptr_restrict, no CAP_SYSLOG): "
                     "OP is '?'"
                   : "operations named from /proc/kallsyms");
}

int Lockstall::trace() {
    const auto v = o_.common.verbosity();
    lockstall_bpf *skel = &this->skel();
    std::optional<EventReader> events;
    read_events<lockstall_wait>(
        events, o_.events, [this](const auto &e) { print_event(e); }, v);
    if (!o_.common.json && !profile_out_.replaces_output())
        fmt::print("{}\n", header(format_));
    announce_tracing("Tracing mmap_lock waits...");
    fflush(stdout);
    started_ = std::chrono::system_clock::now();
    const int status = trace_lines_or_histograms(
        events, [] {}, [&](const EventReader *reader) { print_summary(*skel, reader); }, "waits", v,
        skel->maps.threads, skel->maps.threads_overflow);
    if (profile_out_.wanted())
        write_profile();
    return status;
}

} // namespace memlat::lockstall

namespace {

// The options that shape what lockstall counts: its own, and `memlat exporter`'s
// --lockstall.NAME.
void add_counting_options(CommandLine &cli, Options &o) {
    cli.option('p', "pid", "PID", "Only waiters of process PID (holders of its lock: any)", o.pid);
    cli.option('m', "min-wait", "MS",
               "Waits of at least MS milliseconds are printed and counted as slow (default 1)",
               o.min_wait_ms);
    cli.option(0, "min-hold", "MS",
               "Holds of at least MS milliseconds are kept to be named as holders, the "
               "first of them a wait's root (default 0.1)",
               o.min_hold_ms);
    add_cgroup_option(cli, o.cgroup);
    add_series_options(cli, o.prom, {"cgroup"});
}

void add_own_options(CommandLine &cli, Options &o) {
    cli.flag('s', "stacks", "Print the kernel stacks of each waiter and holder", o.stacks);
    add_profile_options(cli, o.profile, 0,
                        "the waits' kernel stacks, each topped by a frame naming the hold it "
                        "queued behind (its first holder, the root) and that holder's stack",
                        "their wait time in ns; the mode, then the waiting process, are the "
                        "root frames",
                        "waits and wait_time in ns, labels pid, comm, mode, root_pid, "
                        "root_comm, root_op, monitor");
}

constexpr ToolManual manual{
    .summary = "waits for an mmap_lock, with the holders they waited behind",
    .description = description,
    .examples = examples,
    .periodic = false,
    .timestamp_help = "Add a TIME(s) column: seconds since the first wait began; with -j a "
                      "wall_time field",
    .event_lines = "the per-wait lines",
};

} // namespace

// memlat lockstall (and a link named lockstall), and its part of `memlat exporter`.
extern const ToolEntry memlat_tool_lockstall =
    tool_entry<Lockstall, tool_name, manual, add_own_options, add_counting_options>();
