// memstall's front-end, declared for the files that hold its parts: memstall.cpp (the manual,
// the options and the plan), memstall_tool_causes.cpp (how this kernel lets each cause be
// measured: the functions in kallsyms, PSI, delay accounting) and memstall_tool_read.cpp (what
// is read back: intervals, stacks, profiles and metrics).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/options.h"
#include "cli/profile_output.h"
#include "kernel/cgroups.h"
#include "kernel/process_titles.h"
#include "kernel/workloads.h"
#include "loading/cgroup_births.h"
#include "loading/stacks.h"
#include "loading/symbols.h"
#include "memlat/memstall.h"
#include "memstall.skel.h"
#include "memstall_metrics.h"
#include "prometheus/exporter.h"
#include "prometheus/metrics_serving.h"
#include "sources/stall_source.h"
#include "sources/stalls.h"
#include "tool/tool.h"

namespace memlat::memstall {

inline constexpr char tool_name[] = "memstall";

// The kernel functions a memstall sleep under which is charged to a cause, innermost first
// wins. Kernels name them differently over time; those missing here are skipped.
struct CauseFunctions {
    uint32_t cause;
    std::vector<const char *> names;
};
// Those functions, by cause (memstall_tool_causes.cpp).
extern const std::vector<CauseFunctions> cause_functions;

// FNV-1a of a function's name, as memstall.h defines it for the BPF side.
uint64_t function_name_hash(std::string_view name);

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
inline constexpr size_t stacks_per_cause = 3;

class Memstall final : public Tool<memstall_bpf, Options, tool_name>, public ProfileSource {
  public:
    using Tool::Tool;
    void check_options() override;
    CountedLosses collect(prometheus::Exposition &out) override;
    // --profiles: the kernel's describer of the profiles' stacks.
    std::vector<const bpf_object *> helper_objects() const override {
        if (profile_symbols_ && profile_symbols_->describer_object() != nullptr)
            return {profile_symbols_->describer_object()};
        return {};
    }
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
    WorkloadNames names_{o_.common.verbosity()}; // -C: what runs in each cgroup
    // -C: the cgroups made while it runs, named as they are made (null where the kernel
    // refuses): a container gone before its interval is printed keeps its path and names.
    std::unique_ptr<CgroupBirths> births_;
    ProcessTitles titles_; // the COMMAND column
    WorkloadNames metric_names_{o_.common.verbosity(),
                                WorkloadNames::Lookups::once}; // the same for the series' labels
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

} // namespace memlat::memstall
