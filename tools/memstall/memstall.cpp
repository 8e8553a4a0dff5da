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
#include "loading/events.h"
#include "loading/loader.h"
#include "loading/stack_profile.h"
#include "loading/stacks.h"
#include "loading/symbols.h"
#include "memlat/memstall.h"
#include "memstall.skel.h"
#include "memstall_metrics.h"
#include "prometheus/exporter.h"
#include "prometheus/metrics_serving.h"
#include "prometheus/process_metrics.h"
#include "sources/stall_source.h"
#include "sources/stalls.h"
#include "tool/tool.h"

using namespace memlat;
using nlohmann::json;

namespace {

constexpr char tool_name[] = "memstall";

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

// The kernel functions a memstall sleep under which is charged to a cause, innermost first
// wins. Kernels name them differently over time; those missing here are skipped.
struct CauseFunctions {
    uint32_t cause;
    std::vector<const char *> names;
};
const std::vector<CauseFunctions> cause_functions{
    // First (the BPF side looks at these ranges first, nr_swapin_ranges of them): a sleep
    // under these is a swap-in whatever frame is innermost: the wait for the page is in
    // folio_wait_bit_common, a memstall (thrashing) only for a workingset page, an I/O sleep
    // otherwise.
    {MEMSTALL_SWAPIN,
     {"swap_read_folio", "swap_readpage", "do_swap_page", "swapin_readahead", "shmem_swapin_folio",
      "shmem_swapin_page"}},
    // folio_wait_bit_common enters a memstall for a locked, not up-to-date workingset folio:
    // a refault of a page that was recently evicted (5.16+; wait_on_page_bit_common before).
    // read_pages does for the readahead of workingset pages (5.16+).
    {MEMSTALL_THRASHING, {"folio_wait_bit_common", "wait_on_page_bit_common", "read_pages"}},
    {MEMSTALL_MEMORY_HIGH, {"__mem_cgroup_handle_over_high", "mem_cgroup_handle_over_high"}},
    // Timed through its tracepoint: a memstall around it is not counted twice.
    {MEMSTALL_DIRTY, {"balance_dirty_pages"}},
};

enum class ProbeId { Direct, Memcg, Compaction, Dirty, Switch, Exit };

struct Options {
    CommonOptions common;
    std::optional<int> pid, tid;
    std::string cgroup;
    bool per_cgroup = false;
    bool stacks = false;
    ProfileOutputOptions profile;
    bool folded_counts = false;  // --folded-counts
    bool serve_profiles = false; // --profiles: /debug/pprof/memstall
    uint32_t max_rows = 20;
    PrometheusOptions prom;
};

// --stacks: how many stacks per cause are printed at the end.
constexpr size_t stacks_per_cause = 3;

class Memstall final : public Tool<memstall_bpf, Options, tool_name>, public ProfileSource {
  public:
    using Tool::Tool;
    void check_options() override;
    CountedLosses collect(prometheus::Exposition &out) override;
    ProfileSource *profile_source() override { return o_.serve_profiles ? this : nullptr; }
    // /debug/pprof/memstall: the stacks of the stalls that end between the two.
    void begin() override;
    std::string end() override;

    // sources/stall_source.h's, for memlat top.
    memstall::Snapshot take_snapshot();
    const std::map<uint32_t, std::string> &unmeasured() const { return unmeasured_; }
    bool memcg_on_v1() const { return memcg_on_v1_; }
    uint64_t table_full() const { return skel().bss->table_full; }
    // -s: the stacks that stalled the longest since load, `per_cause` of each cause, of one
    // process or of all, symbolized.
    std::vector<memstall::StallStack> stalled_stacks(std::optional<uint32_t> pid,
                                                     size_t per_cause) const;

  private:
    int trace() override;
    void resolve_ranges();
    // The functions of a frame-classified cause found in kallsyms.
    std::vector<std::string> functions_found(uint32_t cause) const;
    void prepare(const Verbosity &v) override;
    std::vector<Probe> plan() const override;
    void configure(memstall_bpf &skel) override;
    void loaded(const Verbosity &v) override;
    void describe_causes(const std::vector<Probe> &probes) const;
    void print_interval(memstall_bpf &skel);
    void print_stacks();
    // The stacks counted since load (or since begin() cleared them), as the profile of the
    // time since `began`.
    profile::Profile stall_profile(StackSymbolizer &symbolizer,
                                   std::chrono::system_clock::time_point began);
    void write_profiles();
    bool profiles_wanted() const { return o_.profile.wanted(); }
    ProfileOutputs profile_out_;
    // --profiles: the kernel's descriptions of addresses, loaded while the capabilities to
    // load them are there (the server drops them); none before Linux 5.16.
    std::optional<KernelSymbols> profile_symbols_;
    std::chrono::system_clock::time_point profile_began_; // begin()
    std::chrono::system_clock::time_point started_;       // tracing began (trace())

    std::optional<memstall::Metrics> metrics_; // --prometheus
    memstall::Counts counts_;
    std::optional<CgroupTarget> cgroup_;
    bool memcg_on_v1_ = memory_controller_on_v1();
    CgroupPathCache cgroup_cache_{memcg_on_v1_}; // --prometheus-labels cgroup
    bool has_memstall_flag_ = false;
    bool has_thrashing_flag_ = false;
    // Delay accounting on at start (kernel.task_delayacct): the kernel sets in_thrashing only
    // then (seen on 6.18: none of 300-600 thrashing stalls of a run marked with it off).
    bool delayacct_on_ = false;
    bool thrashing_marked() const { return has_thrashing_flag_ && delayacct_on_; }
    // No task is ever in a memstall: what else the kernel marks tells the stalls.
    bool without_psi() const { return !has_memstall_flag_ || !psi_enabled_; }
    std::string no_psi_reason() const;
    std::string thrashing_unmarked_reason() const;
    bool psi_enabled_ = true;
    // None: no balance_dirty_pages prototype that memstall knows (kernel_args.bpf.h).
    std::optional<int> dirty_pause_arg_;
    std::vector<memstall_range> ranges_;
    std::vector<std::string> ranges_found_, ranges_missing_;
    std::string ranges_unavailable_; // why there are none at all
    // No ranges because kallsyms hides the addresses: the BPF side tells the functions by
    // their names (on kernels whose sched_switch program walks with bpf_loop()).
    bool classify_by_name_ = false;
    bool named_frames() const;
    // The causes not measured as themselves on this host, and why (-v, -j, the metric).
    std::map<uint32_t, std::string> unmeasured_;
    void find_unmeasured();
    memstall::Snapshot before_;
    uint64_t skipped_runs_before_ = 0; // recursion misses printed so far (-j)
    std::chrono::steady_clock::time_point last_print_ = std::chrono::steady_clock::now();
};

std::vector<std::string> Memstall::functions_found(uint32_t cause) const {
    std::vector<std::string> found;
    // Told by name, every function is looked for (one this kernel lacks is never a frame).
    const bool by_name = named_frames();
    for (const auto &[c, names] : cause_functions)
        if (c == cause)
            for (const char *name : names)
                if (by_name || std::find(ranges_found_.begin(), ranges_found_.end(), name) !=
                                   ranges_found_.end())
                    found.emplace_back(name);
    return found;
}

// FNV-1a of a function's name, as memstall.h defines it for the BPF side.
uint64_t function_name_hash(std::string_view name) {
    uint64_t hash = MEMSTALL_NAME_HASH_START;
    for (char c : name) {
        if (c == '.')
            break;
        hash ^= static_cast<unsigned char>(c);
        hash *= MEMSTALL_NAME_HASH_PRIME;
    }
    return hash;
}

// Whether the frames are told apart by name in the program attached.
bool Memstall::named_frames() const {
    const Probe *sw = find_probe(probes_, ProbeId::Switch);
    return classify_by_name_ && sw != nullptr && sw->choice() != nullptr &&
           sw->choice()->family == "stack_loop";
}

void Memstall::resolve_ranges() {
    std::vector<std::string> names;
    for (const auto &[cause, functions] : cause_functions)
        names.insert(names.end(), functions.begin(), functions.end());
    KernelSymbols symbols;
    try {
        symbols = KernelSymbols::load_only(names);
    } catch (const RuntimeError &e) {
        ranges_unavailable_ = e.what();
        return;
    }
    if (symbols.addresses_hidden()) {
        ranges_unavailable_ = "/proc/kallsyms hides its addresses from this user (it needs root "
                              "or CAP_SYSLOG, and kernel.kptr_restrict below 2)";
        classify_by_name_ = true;
        return;
    }
    for (const auto &[cause, names] : cause_functions) {
        for (const char *name : names) {
            auto range = symbols.text_range(name);
            if (!range) {
                ranges_missing_.push_back(name);
                continue;
            }
            if (ranges_.size() >= MEMSTALL_MAX_RANGES)
                break;
            ranges_.push_back({range->start, range->end, cause, 0});
            ranges_found_.push_back(name);
        }
    }
}

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

void Memstall::describe_causes(const std::vector<Probe> &probes) const {
    const auto v = o_.common.verbosity();
    if (!v.on())
        return;
    auto how = [&](ProbeId id) -> std::string {
        const Probe *p = find_probe(probes, id);
        if (p == nullptr || p->choice() == nullptr)
            return "not measured (the kernel has no such tracepoint)";
        return fmt::format("wall time between {} ({})", p->name, p->choice()->label());
    };
    verbose(v, "direct:  " + how(ProbeId::Direct));
    verbose(v, "memcg:   " + how(ProbeId::Memcg));
    verbose(v, "compact: " + how(ProbeId::Compaction) + ", user tasks only");
    const Probe *dirty = find_probe(probes, ProbeId::Dirty);
    verbose(v, dirty != nullptr && dirty->choice() != nullptr
                   ? fmt::format("dirty:   from a {} with a positive pause ({}) until the task "
                                 "runs again",
                                 dirty->name, dirty->choice()->label())
                   : "dirty:   not measured (no writeback:balance_dirty_pages tracepoint)");
    const std::vector<std::string> swapin_functions = functions_found(MEMSTALL_SWAPIN);
    verbose(v,
            swapin_functions.empty()
                ? fmt::format("swapin:  not told apart: {}",
                              ranges_unavailable_.empty() ? "none of its functions is in kallsyms"
                                                          : ranges_unavailable_)
                : fmt::format("swapin:  off-CPU time (sched_switch) of a user task in a "
                              "memstall or an I/O sleep (task_struct->in_iowait), asleep "
                              "under {}; it takes precedence over the frames inside them",
                              fmt::join(swapin_functions, ", ")));
    if (named_frames())
        verbose(v, "swapin, high, thrash: the frames are told by the names the kernel gives "
                   "them (bpf_snprintf %ps, once per return address), as kallsyms hides the "
                   "functions' addresses from this user");
    if (without_psi()) {
        const std::vector<std::string> high = functions_found(MEMSTALL_MEMORY_HIGH);
        verbose(v, thrashing_marked()
                       ? "thrash:  off-CPU time of a user task's I/O sleep with "
                         "task_struct->in_thrashing set (the wait for a workingset page, "
                         "which delay accounting marks while kernel.task_delayacct is 1; "
                         "without PSI the readahead of workingset pages is not seen)"
                       : "thrash:  not measured: " + thrashing_unmarked_reason());
        verbose(v, high.empty() ? "high:    not measured: no PSI, and its functions are not "
                                  "told apart"
                                : fmt::format("high:    off-CPU time of a user task's killable "
                                              "sleep (TASK_KILLABLE) under {}",
                                              fmt::join(high, ", ")));
        verbose(v, fmt::format("other:   not measured: {}", no_psi_reason()));
        return;
    }
    const std::string off_cpu = "off-CPU time with task_struct->in_memstall set (sched_switch)";
    if (!ranges_unavailable_.empty() && !named_frames()) {
        verbose(v, fmt::format("high, thrash: not told apart, all counted as other: {}",
                               ranges_unavailable_));
    } else {
        for (const auto &[cause, names] : cause_functions) {
            if (cause == MEMSTALL_DIRTY || cause == MEMSTALL_SWAPIN)
                continue;
            const std::vector<std::string> found = functions_found(cause);
            verbose(v, found.empty()
                           ? fmt::format("{:<8} not told apart (none of its functions is in "
                                         "kallsyms): counted as other",
                                         std::string(memstall::cause_name(cause)) + ":")
                           : fmt::format("{:<8} {}, asleep under {}",
                                         std::string(memstall::cause_name(cause)) + ":", off_cpu,
                                         fmt::join(found, ", ")));
        }
    }
    verbose(v, "other:   " + off_cpu +
                   ", anywhere else; inside a reclaim or compaction "
                   "window it is counted there, not here");
}

void Memstall::find_unmeasured() {
    auto attached = [&](ProbeId id) {
        const Probe *p = find_probe(probes_, id);
        return p != nullptr && p->choice() != nullptr;
    };
    const std::pair<uint32_t, ProbeId> windows[] = {{MEMSTALL_DIRECT_RECLAIM, ProbeId::Direct},
                                                    {MEMSTALL_MEMCG_RECLAIM, ProbeId::Memcg},
                                                    {MEMSTALL_COMPACTION, ProbeId::Compaction},
                                                    {MEMSTALL_DIRTY, ProbeId::Dirty}};
    for (const auto &[cause, probe] : windows)
        if (!attached(probe))
            unmeasured_[cause] = "this kernel has no such tracepoint";
    auto not_told_apart = [&](uint32_t cause) -> std::optional<std::string> {
        if (!functions_found(cause).empty())
            return std::nullopt;
        if (ranges_unavailable_.empty())
            return "none of its functions is in kallsyms: counted as other";
        return ranges_unavailable_ + (classify_by_name_ ? ", and before Linux 5.17 memstall "
                                                          "cannot have the kernel name the "
                                                          "frames: counted as other"
                                                        : ": counted as other");
    };
    if (auto why = not_told_apart(MEMSTALL_SWAPIN))
        unmeasured_[MEMSTALL_SWAPIN] = *why;
    if (auto why = not_told_apart(MEMSTALL_MEMORY_HIGH))
        unmeasured_[MEMSTALL_MEMORY_HIGH] = *why;
    if (!without_psi()) {
        if (auto why = not_told_apart(MEMSTALL_THRASHING))
            unmeasured_[MEMSTALL_THRASHING] = *why;
        return;
    }
    // Without PSI thrashing needs no frame, and the other memstalls are not seen.
    if (!thrashing_marked())
        unmeasured_[MEMSTALL_THRASHING] = thrashing_unmarked_reason();
    unmeasured_[MEMSTALL_OTHER] = no_psi_reason();
}

std::string Memstall::thrashing_unmarked_reason() const {
    return no_psi_reason() + (has_thrashing_flag_
                                  ? ", and delay accounting, which marks thrashing "
                                    "(task_struct->in_thrashing), was off at start (sysctl "
                                    "kernel.task_delayacct=1 turns it on without a reboot)"
                                  : ", and this kernel's task_struct has no in_thrashing (before "
                                    "6.1, or CONFIG_TASK_DELAY_ACCT off)");
}

std::string Memstall::no_psi_reason() const {
    if (!has_memstall_flag_)
        return "this kernel has no PSI (CONFIG_PSI, 4.20)";
    return feature_forced_off("psi") ? "PSI is ignored (MEMLAT_DISABLE_FEATURES=psi)"
                                     : "PSI is disabled (boot with psi=1)";
}

void Memstall::print_interval(memstall_bpf &skel) {
    const auto now_time = std::chrono::steady_clock::now();
    const double interval_s = std::chrono::duration<double>(now_time - last_print_).count();
    last_print_ = now_time;
    memstall::Snapshot now = take_snapshot();
    const auto grouping = o_.per_cgroup ? memstall::Grouping::Cgroup : memstall::Grouping::Process;
    std::map<uint64_t, std::string> paths;
    if (o_.per_cgroup)
        paths = cgroup_paths(memcg_on_v1_);
    auto rows = memstall::rows(now, before_, grouping, paths);
    // Only what stalled; with -p the process asked for has a row even at zero.
    std::erase_if(rows, [](const memstall::Row &r) { return r.total_ns() == 0; });
    if (grouping == memstall::Grouping::Process && o_.pid &&
        std::none_of(rows.begin(), rows.end(), [&](const memstall::Row &r) {
            return r.id == static_cast<uint64_t>(*o_.pid);
        })) {
        memstall::Row zero;
        zero.id = *o_.pid;
        zero.name = read_text_file(fmt::format("/proc/{}/comm", *o_.pid)).value_or("");
        while (!zero.name.empty() && zero.name.back() == '\n')
            zero.name.pop_back();
        rows.push_back(zero);
    }
    // Rows -r leaves out are summed, not dropped: rows + left_out = totals.
    const memstall::ShownRows shown = memstall::cut_rows(std::move(rows), o_.max_rows);

    if (o_.common.json) {
        json list = json::array();
        for (const auto &r : shown.rows)
            list.push_back(memstall::json_row(r, interval_s, grouping));
        json out = {{"time", wall_clock_time()},
                    {"interval_s", interval_s},
                    {o_.per_cgroup ? "cgroups" : "processes", list},
                    {"table_full", skel.bss->table_full},
                    {"unpaired_ends", skel.bss->unpaired_ends},
                    {"stack_failures", skel.bss->stack_failures},
                    {"unseen_switch_ins", skel.bss->unseen_switch_ins},
                    {"frames_unnamed", skel.bss->frames_unnamed}};
        // What this host cannot measure, so that a 0 is not read as "no stall".
        json unmeasured = json::object();
        for (const auto &[cause, why] : unmeasured_)
            unmeasured[memstall::cause_name(cause)] = why;
        out["unmeasured_causes"] = unmeasured;
        memstall::json_totals(shown, out);
        // The interval's share of the program runs the kernel skipped: stalls not counted.
        const uint64_t skipped = recursion_misses(skel.obj);
        out[skipped_runs_field] = skipped - skipped_runs_before_;
        skipped_runs_before_ = skipped;
        print_json_line(out);
    } else {
        fmt::print("\n{}  memory stalls over {:.1f} s\n{}\n", wall_clock_time(), interval_s,
                   memstall::header(grouping));
        for (const auto &r : shown.rows)
            fmt::print("{}\n", memstall::line(r, interval_s, grouping));
        if (const std::string more = memstall::left_out_line(shown, grouping); !more.empty())
            fmt::print("{}\n", more);
        if (skel.bss->table_full != 0)
            fmt::print("{} stalls not counted so far: a BPF table was full (--max-entries).\n",
                       skel.bss->table_full);
    }
    before_ = std::move(now);
}

memstall::Snapshot Memstall::take_snapshot() {
    memstall_bpf &skel = this->skel();
    const auto entries = read_hash_map<memstall_key, memstall_value>(skel.maps.stalls);
    memstall::Snapshot now;
    for (const auto &[key, value] : entries)
        now[{key.tid, key.cause}] = value;
    // Threads that are gone stall no more: their totals are in this snapshot, their entries
    // go, and the table keeps room for the threads that live.
    delete_exited_tasks(skel.maps.stalls, entries, [](const memstall_key &k) { return k.tid; });
    return now;
}

std::vector<memstall::StallStack> Memstall::stalled_stacks(std::optional<uint32_t> pid,
                                                           size_t per_cause) const {
    StackSymbolizer symbolizer(skel().maps.stack_traces);
    auto rows = read_hash_map<memstall_stack_key, memstall_stack_value>(skel().maps.stack_totals);
    if (pid)
        std::erase_if(rows, [&](const memstall::StackRow &r) { return r.first.pid != *pid; });
    std::vector<memstall::StallStack> stacks;
    for (auto &row : memstall::most_stalled_stacks(std::move(rows), per_cause)) {
        auto kernel = symbolizer.kernel(row.first.kernel_stack);
        auto user = symbolizer.user(row.first.user_stack, row.first.pid);
        stacks.push_back({row, std::move(kernel), std::move(user)});
    }
    return stacks;
}

void Memstall::print_stacks() {
    const auto stacks = stalled_stacks(std::nullopt, stacks_per_cause);
    if (o_.common.json) {
        json out = memstall::stacks_json(stacks);
        out["stacks_lost"] = skel().bss->stacks_lost;
        print_json_line(out);
    } else {
        fmt::print("{}", memstall::stacks_text(stacks));
    }
}

profile::Profile Memstall::stall_profile(StackSymbolizer &symbolizer,
                                         std::chrono::system_clock::time_point began) {
    StackProfileBuilder builder(symbolizer, {{"stalls", "count"}, {"stall_time", "nanoseconds"}},
                                1);
    const auto paths = cgroup_paths(memcg_on_v1_);
    for (const auto &[key, value] :
         read_hash_map<memstall_stack_key, memstall_stack_value>(skel().maps.stack_totals)) {
        const std::string comm = memstall::stack_comm(value);
        const auto path = paths.find(value.cgroup_id);
        std::vector<profile::Label> labels{
            {.key = "cause", .text = memstall::cause_name(key.cause)},
            {.key = "pid", .number = key.pid},
            {.key = "comm", .text = comm}};
        if (path != paths.end())
            labels.push_back({.key = "cgroup", .text = path->second});
        // The cause, then the process, as the root frames of a flame graph.
        builder.add({memstall::cause_name(key.cause), fmt::format("{}-{}", comm, key.pid)},
                    key.kernel_stack, key.user_stack, key.pid,
                    {static_cast<int64_t>(value.stalls), static_cast<int64_t>(value.total_ns)},
                    std::move(labels));
    }
    profile::Profile p = builder.take(began);
    p.comments.push_back("memlat memstall: wall time of memory stalls ended in the profile, by "
                         "cause (label cause), process and stack");
    return p;
}

void Memstall::begin() {
    // What the last profile left (and what a program still running when it ended added),
    // and stacks no stall refers to any more.
    clear_map<memstall_stack_key>(skel().maps.stack_totals);
    clear_map<uint32_t>(skel().maps.stack_traces);
    profile_began_ = std::chrono::system_clock::now();
    __atomic_store_n(&skel().bss->stacks_paused, 0, __ATOMIC_RELEASE);
}

std::string Memstall::end() {
    __atomic_store_n(&skel().bss->stacks_paused, 1, __ATOMIC_RELEASE);
    // Kernel frames as the kernel describes them; without that (before 5.16) they cannot be
    // told from the BPF machinery and are left out: an empty table says so.
    const KernelSymbols none;
    StackSymbolizer symbolizer(skel().maps.stack_traces,
                               profile_symbols_ ? &*profile_symbols_ : &none);
    profile::Profile p = stall_profile(symbolizer, profile_began_);
    if (!profile_symbols_)
        p.comments.push_back("kernel frames left out: the kernel cannot describe addresses to "
                             "this exporter (Linux 5.16 or later can)");
    return profile::gzip(profile::encode_pprof(p));
}

void Memstall::write_profiles() {
    StackSymbolizer symbolizer(skel().maps.stack_traces);
    const profile::Profile p = stall_profile(symbolizer, started_);
    profile_out_.write(p, o_.folded_counts ? 0 : 1);
    if (skel().bss->table_full != 0)
        fmt::print(stderr,
                   "memstall: {} stalls are not in the profile: a BPF table was full "
                   "(--max-entries)\n",
                   skel().bss->table_full);
}

CountedLosses Memstall::collect(prometheus::Exposition &out) {
    memstall_bpf &skel = this->skel();
    memstall::Counts &counts = counts_;
    std::copy(std::begin(skel.bss->totals), std::end(skel.bss->totals), counts.totals.begin());
    if (o_.prom.label("cgroup")) {
        counts.threads = read_hash_map<memstall_key, memstall_value>(skel.maps.stalls);
        counts.cgroup_paths = cgroup_cache_.paths_of(
            counts.threads, [](const auto &entry) { return entry.second.cgroup_id; });
        counts.cgroup_exists = &CgroupPathCache::exists;
    }
    metrics_->collect(counts, out);
    // Threads that are gone stall no more: their counts are in the series now, their
    // entries go, and the table keeps room for the threads that live.
    delete_exited_tasks(skel.maps.stalls, counts.threads,
                        [](const memstall_key &k) { return k.tid; });
    return CountedLosses{0, skel.bss->table_full, skel.bss->unpaired_ends};
}

void Memstall::check_options() {
    if (o_.pid)
        require_process(*o_.pid, "-p");
    if (o_.tid)
        require_thread(*o_.tid, "-t", o_.pid);
    if (!o_.cgroup.empty())
        cgroup_ = resolve_cgroup(o_.cgroup);
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

void Memstall::loaded(const Verbosity &) {
    describe_causes(probes_);
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
    metrics_.emplace(o_.prom, o_.cgroup);
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
    return end_run("stalls", o_.common.verbosity());
}

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
    cli.flag('C', "cgroups", "One row per memory cgroup instead of per process", o.per_cgroup);
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
