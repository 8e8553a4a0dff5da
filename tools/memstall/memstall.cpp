// memstall: which threads, processes and memory cgroups are stalled on memory, for how long,
// and why: reclaim, compaction, dirty-page throttling, swap-in, memory.high throttling,
// refault thrashing, or another memory stall that PSI counts.
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <utility>

#include "base/errors.h"
#include "base/files.h"
#include "base/profile.h"
#include "cli/multicall.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/profile_output.h"
#include "cli/run_loop.h"
#include "kernel/cgroups.h"
#include "kernel/features.h"
#include "kernel/tasks.h"
#include "kernel/types.h"
#include "kernel/workloads.h"
#include "loading/events.h"
#include "loading/loader.h"
#include "loading/stack_profile.h"
#include "loading/stacks.h"
#include "loading/symbols.h"
#include "memlat/memstall.h"
#include "memstall.skel.h"
#include "memstall_metrics.h"
#include "memstall_tool.h"
#include "prometheus/exporter.h"
#include "prometheus/metrics_serving.h"
#include "prometheus/process_metrics.h"
#include "sources/stall_source.h"
#include "sources/stalls.h"
#include "tool/tool.h"

using namespace memlat;
using namespace memlat::memstall;
using nlohmann::json;

namespace {

constexpr const char *description =
    R"(Show which processes are stalled on memory, for how long and why: the wall
time each spends in memory stalls, per cause, every INTERVAL seconds (top
style, the most stalled first) or once at the end.

Causes (columns, in ms):
  DIRECT   global direct reclaim (vmscan direct_reclaim_begin/end tracepoints)
  MEMCG    reclaim in a memory cgroup at its limit (memcg_reclaim_begin/end)
  COMPACT  direct compaction by a user task (compaction begin/end)
  DIRTY    dirty-page throttling: balance_dirty_pages pauses, from the
           tracepoint until the task runs again
  SWAPIN   asleep under the swap-in functions, in a memory stall or waiting
           for the page's read (an I/O sleep)
  HIGH     asleep in a memory stall under the memory.high throttle
  THRASH   asleep in a memory stall waiting for a refaulting page (thrashing)
  OTHER    any other memory stall PSI counts (also kswapd, kcompactd)
The last four are the off-CPU time of a task whose PSI memstall flag is set
(or, for SWAPIN, that sleeps for I/O), seen at each context switch and told
apart by the kernel functions it sleeps in: their addresses are looked up in
the kernel once at start (from /proc/kallsyms before Linux 5.16), which needs
root or CAP_SYSLOG; without it, from Linux 5.17 on, the kernel names each
frame for memstall's program instead, and before 5.17 all four count as
OTHER. -v says which cause is measured how on this kernel. A stall is counted
when it ends.

Without PSI (a kernel booted with psi=0, as Debian's are by default) no task
carries the memstall flag: HIGH is told by its killable sleep in the
throttle and SWAPIN by its I/O sleep, THRASH only where delay accounting
marks thrashing (sysctl kernel.task_delayacct=1, off by default), and OTHER
is not measured. memstall says at start, in one line, which causes it
cannot measure on this host; the JSON has them in "unmeasured_causes" and
the exporter in memlat_memstall_cause_measured.

STALL% is the stall time as a share of the interval's wall time; a process
with several stalled threads can pass 100%.)";

constexpr const char *examples = R"(Examples:
  memstall                  stall time per process, printed at Ctrl-C
  memstall 5                every 5 seconds, the most stalled first
  memstall -C 5             per memory cgroup instead of per process
  memstall -p 1234 1 10     process 1234, every second, 10 times
  memstall -t 1235          only thread 1235
  memstall -G /sys/fs/cgroup/memory/db 5
                            only tasks in that cgroup and below
  memstall -j -d 60         one JSON line after a minute
  memstall -s -p 1234 5     and at Ctrl-C the stacks that stalled it most
  memstall --folded -d 30 > stalls.folded
                            30 s of stalled stacks for flamegraph.pl or inferno
  memstall --pprof stalls.pb.gz -G /sys/fs/cgroup/memory/db -d 60
                            a minute of one cgroup's stalls for go tool pprof
  memstall -v               say how each cause is measured on this kernel

)";

} // namespace

namespace memlat::memstall {

std::vector<Probe> Memstall::plan() const {
    // The windows and the dirty pause read no typed argument: raw_tp first, which runs as
    // tp_btf does, but is attached by name where each tp_btf program makes the kernel (and
    // libbpf) search the kernel's BTF for its tracepoint's type (0.1 ms each at start-up).
    auto window = [](ProbeId id, std::string prefix, std::string group, std::string begin,
                     std::string end, bool required) {
        auto choices = tracepoint_choices({prefix + "_begin", prefix + "_end"}, "window");
        std::swap(choices[0], choices[1]);
        return Probe(id, fmt::format("{}:{}/{}", group, begin, end),
                     fmt::format("It needs the {}:{} and {} tracepoints.", group, begin, end),
                     std::move(choices), required);
    };
    // Each probe but sched_switch is in a family of its own (window, dirty, exit), so that a
    // test can force their classic tracepoints (MEMLAT_DISABLE_HOOKS=window/raw_tp,...) while
    // sched_switch, which has none, keeps its hook.
    std::vector<Probe> probes;
    probes.push_back(window(ProbeId::Direct, "direct_reclaim", "vmscan",
                            "mm_vmscan_direct_reclaim_begin", "mm_vmscan_direct_reclaim_end",
                            true));
    probes.push_back(window(ProbeId::Memcg, "memcg_reclaim", "vmscan",
                            "mm_vmscan_memcg_reclaim_begin", "mm_vmscan_memcg_reclaim_end", false));
    probes.push_back(window(ProbeId::Compaction, "compact", "compaction", "mm_compaction_begin",
                            "mm_compaction_end", false));
    // The raw tracepoint's pause argument is found by position (kernel_args.bpf.h: two
    // prototypes, 5.18 changed it), the classic tracepoint's field by name.
    const std::string pause_unknown =
        dirty_pause_arg_ ? ""
                         : "the kernel's BTF has no balance_dirty_pages prototype memstall knows";
    probes.emplace_back(
        ProbeId::Dirty, "writeback:balance_dirty_pages",
        "It needs the writeback:balance_dirty_pages tracepoint.",
        std::vector<HookChoice>{
            {.kind = HookKind::RawTp,
             .programs = {"dirty_raw"},
             .family = "dirty",
             .unavailable = pause_unknown},
            {.kind = HookKind::TpBtf,
             .programs = {"dirty_btf"},
             .family = "dirty",
             .unavailable = pause_unknown},
            {.kind = HookKind::Tracepoint, .programs = {"dirty_tp"}, .family = "dirty"},
        },
        false);
    // The classic tracepoint has no task pointers: sched_switch needs tp_btf or raw_tp.
    probes.emplace_back(
        ProbeId::Switch, "sched:sched_switch", "It needs the sched:sched_switch raw tracepoint.",
        std::vector<HookChoice>{
            // Each kind first with bpf_loop() (5.17) walking the stack,
            // which the verifier checks in a tenth of the time, then unrolled.
            {.kind = HookKind::TpBtf, .programs = {"switch_btf"}, .family = "stack_loop"},
            {.kind = HookKind::TpBtf, .programs = {"switch_unrolled_btf"}},
            {.kind = HookKind::RawTp, .programs = {"switch_raw"}, .family = "stack_loop"},
            {.kind = HookKind::RawTp, .programs = {"switch_unrolled_raw"}},
        });
    probes.emplace_back(
        ProbeId::Exit, "sched:sched_process_exit",
        "It needs the sched:sched_process_exit tracepoint.",
        std::vector<HookChoice>{
            {.kind = HookKind::RawTp, .programs = {"exit_raw"}, .family = "exit"},
            {.kind = HookKind::Tracepoint, .programs = {"exit_tp"}, .family = "exit"},
        });
    return probes;
}

void Memstall::configure(memstall_bpf &skel) {
    auto *ro = skel.rodata;
    ro->filter_pid = o_.pid.value_or(0);
    ro->filter_tid = o_.tid.value_or(0);
    set_cgroup_filter(*ro, cgroup_);
    ro->memcg_on_v1 = memcg_on_v1_;
    if (dirty_pause_arg_)
        ro->dirty_pause_arg = static_cast<uint8_t>(*dirty_pause_arg_);
    std::copy(ranges_.begin(), ranges_.end(), skel.bss->ranges);
    ro->nr_ranges = ranges_.size();
    ro->nr_swapin_ranges = std::count_if(ranges_.begin(), ranges_.end(),
                                         [](const auto &r) { return r.cause == MEMSTALL_SWAPIN; });
    ro->classify_by_name = classify_by_name_;
    ro->without_psi = without_psi();
    if (classify_by_name_) {
        uint32_t n = 0;
        for (const auto &[cause, names] : cause_functions)
            for (const char *name : names)
                if (n < MEMSTALL_MAX_RANGES)
                    skel.bss->named[n++] = {function_name_hash(name), cause, 0};
        ro->nr_named = n;
    }
    // The return addresses named so far, with their causes: a few hundred in practice.
    bpf_map__set_max_entries(skel.maps.frame_causes,
                             classify_by_name_ ? o_.common.entries(4096) : 1);
    bpf_map__set_max_entries(skel.maps.stalls, o_.common.entries(16384));
    // Threads with a stall open at the same moment (entries go when it closes): 4096, as the
    // other tools' per-thread state; preallocating 16384 cost 0.5 ms of start-up.
    bpf_map__set_max_entries(skel.maps.threads, o_.common.entries(4096));
    const bool stacks = o_.stacks || profiles_wanted() || o_.serve_profiles;
    // Served profiles take stacks only while one is being taken.
    skel.bss->stacks_paused = o_.serve_profiles;
    ro->collect_stacks = stacks;
    // 4096 stacks, as compactsnoop's: a stack map is preallocated whole, 1 KB a stack (16384
    // of them took 3-4 ms to allocate at start).
    bpf_map__set_max_entries(skel.maps.stack_traces, stacks ? o_.common.entries(4096) : 1);
    bpf_map__set_max_entries(skel.maps.stack_totals, stacks ? o_.common.entries(4096) : 1);
}

void Memstall::check_options() {
    if (o_.pid)
        require_process(*o_.pid, "-p");
    if (o_.tid)
        require_thread(*o_.tid, "-t", o_.pid);
    if (!o_.cgroup.empty())
        cgroup_ = resolve_cgroup_target(o_.cgroup);
    if (o_.max_rows == 0)
        throw UsageError("-r takes a number of rows of at least 1");
    check_prometheus_options(o_.prom, o_.common);
    if (o_.prom.on() && (o_.stacks || o_.per_cgroup || profiles_wanted()))
        throw UsageError("--prometheus serves counters per cause; -s, -C, --folded, "
                         "--folded-file and --pprof go with the text output (per cgroup: "
                         "--prometheus-labels cgroup; profiles: memlat exporter "
                         "--memstall.profiles)");
    if (o_.profile.folded && o_.stacks)
        throw UsageError("--folded prints the folded stacks alone, at the end: it takes no -s "
                         "(--folded-file FILE writes them beside -s's)");
    if (o_.serve_profiles && !o_.prom.on())
        throw UsageError("--profiles serves /debug/pprof/memstall beside the metrics: it goes "
                         "with --prometheus (or memlat exporter --memstall.profiles)");
    if (o_.folded_counts && !o_.profile.folded && o_.profile.folded_file.empty())
        throw UsageError("--folded-counts goes with --folded or --folded-file");
    profile_out_.open(o_.profile, o_.common);
}

void Memstall::prepare(const Verbosity &v) {
    has_memstall_flag_ = kernel_struct_has("task_struct", "in_memstall");
    has_thrashing_flag_ = kernel_struct_has("task_struct", "in_thrashing");
    delayacct_on_ =
        read_text_file("/proc/sys/kernel/task_delayacct").value_or("0").starts_with('1');
    resolve_ranges();
    dirty_pause_arg_ = dirty_pause_position();
    // With PSI built in but disabled (CONFIG_PSI_DEFAULT_DISABLED, as Debian builds it, or
    // psi=0) the kernel never sets in_memstall, and /proc/pressure does not exist.
    psi_enabled_ = access("/proc/pressure/memory", F_OK) == 0 && !feature_forced_off("psi");
    if (o_.stacks || profiles_wanted())
        note_user_frames_need_ptrace(tool_name, o_.stacks ? "-s" : "a profile");
    verbose(v,
            fmt::format("CGROUP is the task's {}",
                        memcg_on_v1_ ? "memory cgroup (cgroup v1 hierarchy)" : "cgroup v2 cgroup"));
}

void Memstall::loaded(const Verbosity &v) {
    describe_causes(probes_);
    if (o_.per_cgroup)
        births_ = CgroupBirths::start(memcg_on_v1_, v);
    find_unmeasured();
    // What this host cannot measure, said once (without PSI, Debian's default, or without
    // CAP_SYSLOG before 5.17): a 0 in those columns is then no answer.
    if (!unmeasured_.empty()) {
        // Causes lost for one reason, together, in the order of the columns.
        std::vector<std::pair<std::string, std::string>> by_reason; // (causes, why)
        for (const auto &[cause, why] : unmeasured_) {
            auto same = std::find_if(by_reason.begin(), by_reason.end(),
                                     [&](const auto &r) { return r.second == why; });
            if (same == by_reason.end())
                by_reason.emplace_back(memstall::cause_name(cause), why);
            else
                same->first += fmt::format(", {}", memstall::cause_name(cause));
        }
        std::vector<std::string> lost;
        for (const auto &[causes, why] : by_reason)
            lost.push_back(fmt::format("{} ({})", causes, why));
        fmt::print(stderr, "memstall: not measured on this host: {}. -v says how each cause is.\n",
                   fmt::join(lost, "; "));
    }
    if (!o_.prom.on())
        return;
    if (o_.serve_profiles)
        profile_symbols_ = KernelSymbols::described_by_kernel();
    metrics_.emplace(o_.prom, cgroup_ ? cgroup_->path : "");
    // A cause has series where it is measured as itself: a 0 then means no stall.
    for (uint32_t cause = 0; cause < MEMSTALL_CAUSES; ++cause)
        counts_.causes[cause] = !unmeasured_.contains(cause);
}

int Memstall::trace() {
    memstall_bpf *skel = &this->skel();
    announce_tracing("Tracing memory stalls...");
    fflush(stdout);
    last_print_ = std::chrono::steady_clock::now();
    started_ = std::chrono::system_clock::now();
    const bool done = trace_until_stopped(o_.common, nullptr, [&] { print_interval(*skel); });
    if (!done && !profile_out_.replaces_output())
        print_interval(*skel);
    if (o_.stacks)
        print_stacks();
    if (profiles_wanted())
        write_profiles();
    if (o_.stacks || profiles_wanted())
        note_stacks_lost(tool_name, skel->bss->stacks_lost,
                         bpf_map__max_entries(skel->maps.stack_traces));
    if (births_ && births_->lost() != 0)
        fmt::print(stderr,
                   "memstall: {} cgroups made or removed were not seen (their ring buffer was "
                   "full): a row of one removed before its interval was printed shows its id\n",
                   births_->lost());
    return end_run("stalls", o_.common.verbosity());
}

} // namespace memlat::memstall

namespace {

// The options that shape what memstall counts: its own, and `memlat exporter`'s
// --memstall.NAME.
void add_counting_options(CommandLine &cli, Options &o) {
    cli.option('p', "pid", "PID", "Only threads of process PID (its row is shown even at 0)",
               o.pid);
    cli.option('t', "tid", "TID", "Only thread TID", o.tid);
    add_cgroup_option(cli, o.cgroup);
    add_series_options(cli, o.prom, {"cgroup"});
    cli.flag(0, "profiles",
             "With --prometheus: also serve stall profiles at /debug/pprof/memstall?seconds=N "
             "(pprof, the stacks of the stalls that end in the N seconds after the request; "
             "N 1-300, default 30; one at a time); holds a table of 4096 stacks (--max-entries), "
             "1 KB each",
             o.serve_profiles);
}

void add_own_options(CommandLine &cli, Options &o) {
    cli.flag('C', "cgroups",
             "One row per memory cgroup instead of per process, a pod's or a "
             "container's named as people know it (docs/names.md)",
             o.per_cgroup);
    cli.flag('s', "stacks",
             "At the end, the kernel and user stacks that stalled the longest, per cause "
             "(taken only for stalled tasks)",
             o.stacks);
    cli.option('r', "rows", "ROWS", "Print at most ROWS rows per interval (default 20)",
               o.max_rows);
    add_profile_options(cli, o.profile, 'f', "the stalled stacks",
                        "the stall time in ns; the cause is the root frame, then the process",
                        "stalls and stall_time in ns, labels cause, pid, comm, cgroup");
    cli.flag(0, "folded-counts", "Folded stacks count stalls instead of their nanoseconds",
             o.folded_counts);
}

// memstall as memlat top's source of stall time: Memstall loaded with no filter.
class MemstallSource final : public memstall::StallSource {
  public:
    MemstallSource(const CommonOptions &common, bool stacks)
        : memstall_(options(common, stacks)), stacks_(stacks) {
        memstall_.check_options();
        memstall_.load();
    }
    memstall::Snapshot take_snapshot() override { return memstall_.take_snapshot(); }
    const std::map<uint32_t, std::string> &unmeasured() const override {
        return memstall_.unmeasured();
    }
    bool memcg_on_v1() const override { return memstall_.memcg_on_v1(); }
    uint64_t table_full() const override { return memstall_.table_full(); }
    double map_memory_bytes() const override {
        return prometheus::object_map_memory_bytes(memstall_.object());
    }
    std::optional<std::vector<memstall::StallStack>> stacks_of(uint32_t pid,
                                                               size_t per_cause) const override {
        if (!stacks_)
            return std::nullopt;
        return memstall_.stalled_stacks(pid, per_cause);
    }

  private:
    static Options options(const CommonOptions &common, bool stacks) {
        Options o;
        o.common = common;
        o.stacks = stacks;
        return o;
    }
    Memstall memstall_;
    const bool stacks_;
};

constexpr ToolManual manual{
    .summary = "stall time by cause (reclaim, compaction, dirty pages, swap-in, memory.high, "
               "refaults) per process or cgroup, and its stacks as flame graphs and pprof",
    .description = description,
    .examples = examples,
    .disable_features = false,
};

} // namespace

std::unique_ptr<memstall::StallSource> memstall::load_stall_source(const CommonOptions &common,
                                                                   bool stacks) {
    return std::make_unique<MemstallSource>(common, stacks);
}

// memlat memstall (and a link named memstall), and its part of `memlat exporter`.
extern const ToolEntry memlat_tool_memstall =
    tool_entry<Memstall, tool_name, manual, add_own_options, add_counting_options>();
