// drsnoop's front-end, declared for the files that hold its parts: drsnoop.cpp (the manual,
// the options and the plan) and drsnoop_tool_read.cpp (what is read back: the stalls' lines,
// histograms, the summary and the metrics).
#pragma once

#include <sys/stat.h>

#include <cerrno>
#include <csignal>

#include <algorithm>
#include <array>
#include <bit>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <utility>

#include "base/files.h"
#include "cli/histogram.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/run_loop.h"
#include "drsnoop.h"
#include "drsnoop.skel.h"
#include "drsnoop_format.h"
#include "drsnoop_metrics.h"
#include "kernel/cgroups.h"
#include "kernel/features.h"
#include "kernel/gfp.h"
#include "kernel/tasks.h"
#include "kernel/types.h"
#include "kernel/workloads.h"
#include "loading/epoch_table.h"
#include "loading/events.h"
#include "loading/loader.h"
#include "prometheus/exporter.h"
#include "prometheus/metrics_serving.h"
#include "tool/tool.h"

namespace memlat::drsnoop {

inline constexpr char tool_name[] = "drsnoop";

// The events' buffer (--buffer-size), and the batch after which user space is woken.
// Reclaim stalls come by tens to hundreds a second (the runtime tests' memory-cgroup
// reclaim); 32 KiB hold 341 records of 96 bytes, and user space drains them at each 8 KiB
// batch (85 records) and every 100 ms: a burst of 3000 stalls a second fits. The kernel maps
// a ring buffer's pages twice, so each KiB here is two of RSS: 1 MiB was 2 MiB of RSS, 128
// KiB 0.26 MiB, 12% of the tool's peak.
// The BPF side wakes user space when the ring buffer's producer position crosses a multiple
// of the batch (submit_batched() in bpf/common.bpf.h), a test that needs a power of two.
inline constexpr EventBufferSize default_event_buffer{.bytes = 32 * 1024, .wakeup_bytes = 8 * 1024};
static_assert(std::has_single_bit(default_event_buffer.bytes) &&
              std::has_single_bit(default_event_buffer.wakeup_bytes));

struct Options {
    CommonOptions common;
    std::optional<int> pid, tid;
    std::optional<uint32_t> uid;
    std::string comm;
    bool show_uid = false;
    bool extended = false;
    std::string kinds;
    std::string cgroup;
    bool hist = false;
    bool per_process = false;
    PrometheusOptions prom;
    EventBufferSize events = default_event_buffer;
};

class Drsnoop final : public Tool<drsnoop_bpf, Options, tool_name> {
  public:
    using Tool::Tool;
    void check_options() override;
    CountedLosses collect(prometheus::Exposition &out) override;

  private:
    int trace() override;
    void prepare(const Verbosity &v) override;
    std::vector<Probe> plan() const override;
    void configure(drsnoop_bpf &skel) override;
    void loaded(const Verbosity &v) override;
    void print_header() const;
    void print_event(const drsnoop_event &e);
    void print_histograms(drsnoop_bpf &skel);
    void print_summary(drsnoop_bpf &skel, const EventReader *events);

    std::optional<drsnoop::Metrics> metrics_; // --prometheus
    drsnoop::Counts counts_;
    std::array<bool, DRSNOOP_KINDS> kinds_{true, true, true, true};
    bool kinds_explicit_ = false;
    std::optional<CgroupTarget> cgroup_;
    bool memcg_on_v1_ = memory_controller_on_v1();
    CgroupPathCache cgroup_cache_{memcg_on_v1_};  // --prometheus-labels cgroup
    CgroupPathCache event_cgroups_{memcg_on_v1_}; // -j: each event's cgroup
    WorkloadNames metric_names_{o_.common.verbosity(),
                                WorkloadNames::Lookups::once}; // the series' labels
    // mm_vmscan_*_reclaim_begin's argument order (gfp first on 7.x), when recognized.
    std::optional<bool> reclaim_gfp_first_;
    std::string reclaim_why_;
    // Read from the kernel's BTF once the BPF object is open (load()): the object inflated
    // for the open is freed by then, and is not held beside libbpf's index of the BTF (240 KB
    // of drsnoop's peak RSS).
    std::optional<GfpNames> gfp_;
    drsnoop::LineFormat format_{o_.common.timestamp, o_.show_uid, o_.extended, getpagesize() / 1024,
                                o_.tid.has_value()};
    uint64_t first_ns_ = 0;
    IntervalHists<std::pair<uint32_t, uint32_t>> hists_;
    uint64_t table_full_before_ = 0; // table_full at the last interval
    // -H -P: (pid, kind) -> the interval's histogram.
    EpochTable<drsnoop_hist_key, drsnoop_proc_hist, std::pair<uint32_t, uint32_t>> hist_table_{
        [](const drsnoop_hist_key &k) {
            return std::pair{k.pid, k.kind};
        },
        [](drsnoop_proc_hist &into, const drsnoop_proc_hist &entry) {
            for (int i = 0; i < MEMLAT_HIST_SLOTS; ++i)
                into.slots[i] += entry.slots[i];
            std::copy(std::begin(entry.comm), std::end(entry.comm), std::begin(into.comm));
        }};
};

} // namespace memlat::drsnoop
