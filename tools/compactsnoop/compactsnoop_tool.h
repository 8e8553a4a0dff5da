// compactsnoop's front-end, declared for the files that hold its parts: compactsnoop.cpp (the
// manual, the options and the plan) and compactsnoop_tool_read.cpp (what is read back: the
// runs' lines, histograms, the summary, stacks, the profile and the metrics).
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "cli/histogram.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/profile_output.h"
#include "cli/run_loop.h"
#include "compactsnoop.h"
#include "compactsnoop.skel.h"
#include "compactsnoop_format.h"
#include "compactsnoop_metrics.h"
#include "kernel/features.h"
#include "kernel/gfp.h"
#include "kernel/tasks.h"
#include "kernel/types.h"
#include "loading/events.h"
#include "loading/loader.h"
#include "loading/stack_profile.h"
#include "loading/stacks.h"
#include "loading/symbols.h"
#include "prometheus/exporter.h"
#include "prometheus/metrics_serving.h"
#include "tool/tool.h"

namespace memlat::compactsnoop {

inline constexpr char tool_name[] = "compactsnoop";

// The events' buffer (--buffer-size), and the batch after which user space is woken.
// Compaction runs come by tens a second; 64 KiB hold 234 records of 280 bytes, and user
// space drains them at each 16 KiB batch (58 records) and every 100 ms: a burst of 2000 runs
// a second fits. The kernel maps a ring buffer's pages twice, so each KiB here is two of RSS
// (1 MiB was 2 MiB of RSS, 128 KiB 0.26 MiB).
// The BPF side wakes user space when the ring buffer's producer position crosses a multiple
// of the batch (submit_batched() in bpf/common.bpf.h), a test that needs a power of two.
inline constexpr EventBufferSize default_event_buffer{.bytes = 64 * 1024,
                                                      .wakeup_bytes = 16 * 1024};
static_assert(std::has_single_bit(default_event_buffer.bytes) &&
              std::has_single_bit(default_event_buffer.wakeup_bytes));

struct Options {
    CommonOptions common;
    std::optional<int> pid;
    std::string kinds;
    bool extended = false;
    bool stacks = false;
    bool hist = false;
    bool per_order = false;
    ProfileOutputOptions profile; // --folded, --folded-file, --pprof
    PrometheusOptions prom;
    EventBufferSize events = default_event_buffer;
};

class Compactsnoop final : public Tool<compactsnoop_bpf, Options, tool_name> {
  public:
    using Tool::Tool;
    void check_options() override;
    CountedLosses collect(prometheus::Exposition &out) override;

  private:
    int trace() override;
    void prepare(const Verbosity &v) override;
    std::vector<Probe> plan() const override;
    void configure(compactsnoop_bpf &skel) override;
    void loaded(const Verbosity &v) override;
    void print_event(compactsnoop_bpf &skel, const compactsnoop_event &e);
    std::vector<std::string> stack_frames(compactsnoop_bpf &skel, int32_t id);
    void print_histograms(compactsnoop_bpf &skel);
    void print_summary(compactsnoop_bpf &skel, const EventReader *events);

    compactsnoop::Counts counts_; // --prometheus
    uint32_t kind_mask_ = (1u << COMPACTSNOOP_KINDS) - 1;
    compactsnoop::Names names_;
    std::vector<std::string> missing_enums_;
    GfpNames gfp_ = GfpNames::from_kernel();
    compactsnoop::LineFormat format_{o_.common.timestamp, o_.extended};
    std::optional<KernelSymbols> ksyms_;
    std::optional<StackSymbolizer> stacks_; // -K, made at the first stack
    ProfileOutputs profile_out_;
    // The profile's runs and time per (kind, pid, comm, kernel stack), from the events.
    std::map<std::tuple<uint32_t, uint32_t, std::string, int32_t>, std::pair<int64_t, int64_t>>
        profiled_;
    std::chrono::system_clock::time_point started_;
    void write_profile(compactsnoop_bpf &skel);
    uint64_t first_ns_ = 0;
    // (kind, order row) -> slots, as last printed.
    IntervalHists<std::pair<uint32_t, uint32_t>> hists_;
    uint64_t table_full_before_ = 0; // table_full at the last interval
};

} // namespace memlat::compactsnoop
