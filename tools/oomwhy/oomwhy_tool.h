// oomwhy's front-end, declared for the files that hold its parts: oomwhy.cpp (the manual,
// the options and the plan) and oomwhy_tool_read.cpp (what is read back: the kills, their
// lead-up, the reports and the metrics).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <deque>
#include <fmt/format.h>
#include <map>
#include <optional>

#include "base/errors.h"
#include "base/files.h"
#include "base/parsing.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/run_loop.h"
#include "kernel/cgroups.h"
#include "kernel/features.h"
#include "kernel/gfp.h"
#include "kernel/memory_state.h"
#include "kernel/types.h"
#include "loading/events.h"
#include "loading/loader.h"
#include "oomwhy.h"
#include "oomwhy.skel.h"
#include "oomwhy_format.h"
#include "prometheus/exporter.h"
#include "prometheus/metrics_serving.h"
#include "sources/stall_source.h"
#include "tool/tool.h"

namespace memlat::oomwhy {

inline constexpr char tool_name[] = "oomwhy";
using json = nlohmann::json;

// How long a report waits for the victim to exit before it is printed without it.
inline constexpr auto report_wait = std::chrono::milliseconds(1000);
// Victims remembered after their report, for the reaper's later steps (2 s after a kill).
inline constexpr size_t reported_victims_kept = 1024;

// The longest lead-up kept (--lead-up), a bound on the history's memory.
inline constexpr int max_lead_up_s = 600;

struct Options {
    CommonOptions common;
    // The records' ring buffer: a kill record is under 1 KiB, so 256 KiB holds a storm's burst.
    EventBufferSize events{256 << 10, 4096};
    std::string report_dir;
    int lead_up_s = 30;
    bool oomkill_only = false;
    PrometheusOptions prom;
};

enum class ProbeId { Victim, DirectReclaim, MemcgReclaim, RetryZone, CompactRetry, Reaper };

// A kill waiting for its victim's exit (or its second) before it is reported.
struct Pending {
    oomwhy_kill kill;
    oomwhy::Aftermath after;
    std::optional<oomwhy::LeadUpStalls> stalls;
    std::chrono::steady_clock::time_point due;
    std::string time;
    std::string loadavg;
    std::string victim_title, trigger_title; // read at the kill (kernel/process_titles.h)
};

class Oomwhy final : public Tool<oomwhy_bpf, Options, tool_name> {
  public:
    using Tool::Tool;
    void check_options() override;
    CountedLosses collect(prometheus::Exposition &out) override;

  private:
    int trace() override;
    void prepare(const Verbosity &v) override;
    std::vector<Probe> plan() const override;
    void configure(oomwhy_bpf &skel) override;
    void loaded(const Verbosity &v) override;
    void on_record(const void *data, size_t size);
    void on_note(const oomwhy_note &n);
    // Reports the kills whose victim exited or whose second is over (all with `all`).
    void report_due(bool all);
    void report(const Pending &p);
    void keep_report(const Pending &p, const std::string &text, const json &object);
    std::string cgroup_path(uint64_t id);
    Workload cgroup_workload(uint64_t id);
    // --lead-up: memstall's table read into the history, once a second and at each kill.
    void load_stall_history(const Verbosity &v);
    void take_stall_second();
    oomwhy::LeadUpStalls stalls_before(const oomwhy_kill &k);

    bool memcg_on_v1_ = memory_controller_on_v1();
    WorkloadNames names_{o_.common.verbosity()}; // the kills' cgroups
    // --prometheus: the memcg kills by cgroup, at most --max-series of them.
    prometheus::BoundedCounters memcg_kills_{1, o_.prom.max_series, {"cgroup"}};
    bool victim_task_args_ = false; // mark_victim passes the task (tp_btf/raw_tp usable)
    std::string victim_args_why_;
    std::optional<bool> reclaim_gfp_first_; // the reclaim begin's argument order, when known
    std::string reclaim_why_;
    uint64_t memory_nodes_ = memory_node_mask(); // of the first 64
    GfpNames gfp_ = GfpNames::from_kernel();
    std::map<uint32_t, Pending> pending_; // by victim thread id
    // Victims reported (thread id, kill time), oldest first, for the reaper's later steps.
    std::deque<std::pair<uint32_t, uint64_t>> reported_;
    std::map<uint64_t, std::string> paths_;
    std::chrono::steady_clock::time_point paths_read_{};
    std::unique_ptr<memstall::StallSource> stall_source_;
    memstall::Snapshot stall_before_;
    std::deque<oomwhy::StallSecond> stall_history_;
    std::chrono::steady_clock::time_point stall_taken_{};
    bool report_dir_ok_ = false;
    uint64_t reports_ = 0, report_dir_errors_ = 0;
};

} // namespace memlat::oomwhy
