// lockstall's front-end, declared for the files that hold its parts: lockstall.cpp (the manual,
// the options and the plan) and lockstall_tool_read.cpp (what is read back: the waits' lines,
// the summary and the metrics).
#pragma once

#include <array>
#include <bit>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "cli/options.h"
#include "cli/profile_output.h"
#include "kernel/cgroups.h"
#include "kernel/workloads.h"
#include "loading/events.h"
#include "loading/stacks.h"
#include "loading/symbols.h"
#include "lockstall.h"
#include "lockstall.skel.h"
#include "lockstall_format.h"
#include "lockstall_metrics.h"
#include "prometheus/exporter.h"
#include "tool/tool.h"

namespace memlat::lockstall {

inline constexpr char tool_name[] = "lockstall";

// The events' buffer (--buffer-size). A record is 584 bytes (eight holders); waits of a
// millisecond or more come by hundreds a second in a convoy (the tests' made one: about 370 a
// second on 2 CPUs): 128 KiB hold 224 records, drained at each 16 KiB and every 100 ms.
inline constexpr EventBufferSize default_event_buffer{.bytes = 128 * 1024,
                                                      .wakeup_bytes = 16 * 1024};
static_assert(std::has_single_bit(default_event_buffer.bytes) &&
              std::has_single_bit(default_event_buffer.wakeup_bytes));

struct Options {
    CommonOptions common;
    std::optional<int> pid;
    double min_wait_ms = 1;
    double min_hold_ms = 0.1;
    std::string cgroup;
    bool stacks = false;
    ProfileOutputOptions profile;
    PrometheusOptions prom;
    EventBufferSize events = default_event_buffer;
};

class Lockstall final : public Tool<lockstall_bpf, Options, tool_name> {
  public:
    using Tool::Tool;
    void check_options() override;
    CountedLosses collect(prometheus::Exposition &out) override;
    std::vector<const bpf_object *> helper_objects() const override;

  private:
    int trace() override;
    void prepare(const Verbosity &v) override;
    std::vector<Probe> plan() const override;
    void configure(lockstall_bpf &skel) override;
    void loaded(const Verbosity &v) override;
    void print_event(const lockstall_wait &e);
    void print_summary(lockstall_bpf &skel, const EventReader *events);
    std::string operation(int32_t stack_id);
    void profile_wait(const lockstall_wait &e, const std::vector<lockstall_hold> &holders,
                      const std::vector<std::string> &ops);
    void write_profile();

    std::optional<lockstall::Metrics> metrics_; // --prometheus
    std::optional<CgroupTarget> cgroup_;
    bool memcg_on_v1_ = memory_controller_on_v1();
    CgroupPathCache event_cgroups_{memcg_on_v1_};      // each event's cgroup
    WorkloadNames event_names_{o_.common.verbosity()}; // ... and what runs there
    CgroupPathCache cgroup_paths_{memcg_on_v1_};       // --prometheus-labels cgroup
    WorkloadNames metric_names_{o_.common.verbosity(),
                                WorkloadNames::Lookups::once}; // the series' labels
    // mmap_lock_*'s arguments: with the memory cgroup's path (5.11-6.12) or without (6.18+).
    std::optional<bool> memcg_path_arg_;
    std::string layout_why_;
    // What names the operations (loaded()): the kernel's descriptions of stack addresses.
    std::optional<KernelSymbols> kernel_symbols_;
    std::optional<StackSymbolizer> symbolizer_;
    LineFormat format_{o_.common.timestamp};
    uint64_t first_ns_ = 0;
    // --folded, --folded-file, --pprof: the waits and their time per waiter (pid, comm, mode,
    // kernel stack) and root hold (pid, comm, op, kernel stack; pid 0: no hold kept).
    ProfileOutputs profile_out_;
    using ProfileKey = std::tuple<uint32_t, std::string, bool, int32_t, uint32_t, std::string,
                                  std::string, int32_t>;
    std::map<ProfileKey, std::pair<int64_t, int64_t>> profiled_;
    std::chrono::system_clock::time_point started_;
};

} // namespace memlat::lockstall
