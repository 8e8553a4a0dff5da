// tlbflush's output views, apart from the tool so that the unit tests reach them: the interval
// views (the counts table and the flush IPIs each CPU received, --culprits with -s's stacks, -L's
// histograms), computed from two snapshots of what the BPF side counted, and the per-event view
// (--trace). The front-end reads the maps into a Snapshot and symbolizes stacks; these functions
// turn the values into text and JSON.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernel/hypervisor.h"
#include "tlbflush.h"

namespace memlat::tlbflush {

using Hist = std::array<uint64_t, MEMLAT_HIST_SLOTS>;

struct CountKey {
    uint32_t pid, cpu, reason; // pid 0 unless -P
    auto operator<=>(const CountKey &) const = default;
};

struct CulpritKey {
    uint32_t pid, tid, cpu; // cpu: the target, or TLBFLUSH_ANY_CPU
    int32_t kernel_stack, user_stack;
    auto operator<=>(const CulpritKey &) const = default;
};

// Everything the BPF side has counted so far; intervals print the difference of two.
struct Snapshot {
    std::map<CountKey, tlbflush_count> counts;
    std::map<CountKey, std::string> comms; // -P
    // -P: the CPUs' counts since the baseline by CPU and reason (pid 0), over the same epochs
    // as the rows, so that an interval's rows add up to them but for a full table.
    std::map<CountKey, tlbflush_count> cpu_totals;
    std::map<CulpritKey, uint64_t> culprits;
    std::map<CulpritKey, std::string> culprit_comms;
    std::vector<Hist> handler_ns, handler_us, callback_ns; // -L, per CPU
    std::vector<tlbflush_ipi_counts> ipi_counts;           // -L, per CPU
    // The flush IPIs each CPU handled (the /proc/interrupts TLB row), per CPU, when the csd
    // tracepoints (Linux 6.3+) count them; empty without them.
    std::vector<uint64_t> flush_ipis;
    // Remote flush requests that named each CPU, per target CPU, and the requests by where
    // their CPU mask was read (enum tlbflush_target_source: unknown ones named no CPU).
    std::vector<uint64_t> flush_requests;
    std::array<uint64_t, TLBFLUSH_TARGET_SOURCES> request_sources{};
    std::map<CulpritKey, uint64_t> culprit_requests; // --culprits
    uint64_t dropped = 0, table_full = 0;
    // -P: the per-process table's refused inserts over the epochs of cpu_totals (in table_full)
    uint64_t proc_table_full = 0;
    uint64_t stacks_lost = 0;  // -s: stacks the stack map had no room for
    uint64_t skipped_runs = 0; // recursion misses
};

// What the views need to know of the run.
struct ViewFormat {
    bool per_process = false;   // -P: PID and COMM columns, busiest rows first
    bool stacks = false;        // -s: each culprit's kernel and user stacks
    uint32_t reason_mask = ~0u; // --reason, a bit per reason value
    // This kernel's values of the victim-side reasons.
    int64_t remote_shootdown = 1, remote_wrong_cpu = 5;
    int64_t remote_send_ipi = 4; // the senders' reason
    // -L: the csd tracepoints time the flush callback; without them tlb_flush marks the
    // handler runs and no callback is timed.
    bool callbacks_timed = true;
    // The kernel's name of a reason value.
    std::function<std::string(int64_t)> reason_name;
    // --culprits: the csd tracepoints (Linux 6.3+) count the flush IPIs each sender queued;
    // without them only its flush requests are known.
    bool culprit_ipis_counted = true;
    // The flush IPIs counted are all those the requests counted led to: no -p (the IPIs are
    // filtered by the victim's task, the requests by the sender's) and, where tlb_flush's
    // remote reasons stand in for them, no --reason leaving those out. Else the path is not judged
    // from the run (path_of() keeps what the machine says).
    bool path_evidence = true;
    // -c: the CPUs selected (empty: all). Each is shown with the shootdowns it received, 0
    // included: a CPU that received none is an answer, not a missing line.
    std::vector<bool> cpus;
};

// The path seen over a run: `expected` is what the machine says of itself (CPUID), `requests`
// the remote flush requests sent and `ipis` the flush IPIs handled. A request the hypervisor
// served left no IPI: requests without a single IPI mean the hypervisor does them all, and
// IPIs where the hypervisor can flush mean both paths; few requests prove nothing, and the
// expected path stands.
FlushPath observed_path(FlushPath expected, uint64_t requests, uint64_t ipis);
// Requests without an IPI before observed_path() calls the path the hypervisor's.
constexpr uint64_t hypervisor_path_min_requests = 100;

// The counts view of one interval.
struct CountRow {
    CountKey key;
    tlbflush_count c; // counted in the interval
    std::string comm; // -P
};
struct CountTable {
    std::vector<CountRow> rows; // by CPU and reason, or under -P by count, largest first
    // -P: the interval's counts by CPU and reason, and what of them no row holds (processes
    // the table had no room for: table_full), so that rows plus left_out equal totals.
    std::vector<CountRow> totals, left_out;
    // The flush IPIs each CPU received: counted where the kernel counts its TLB row (csd),
    // else what tlb_flush reports of them (remote_shootdown + remote_wrong_cpu).
    std::map<uint32_t, uint64_t> received;
    bool ipis_counted = false; // `received` is the csd count
    // The remote flush requests that named each CPU (from other CPUs), and those whose CPU
    // mask could not be read; shown when --reason selects a remote reason.
    std::map<uint32_t, uint64_t> requested;
    uint64_t requests_unknown = 0;
    bool requests_shown = false;
    // The path over the run so far (observed_path()).
    FlushPath path = FlushPath::Unknown;
};
CountTable counts_since(const Snapshot &now, const Snapshot &before, const ViewFormat &f);
// Counts field by field: one interval's (a - b), two sets together (a + b).
tlbflush_count minus(const tlbflush_count &a, const tlbflush_count &b);
tlbflush_count plus(const tlbflush_count &a, const tlbflush_count &b);
// The path over everything counted in `now` (since the start), given the expected one.
FlushPath path_of(const Snapshot &now, const ViewFormat &f, FlushPath expected);
// The same rule on the run's totals, for a caller without a Snapshot (the metrics): the
// requests that named each CPU counted (`flush_requests`, -c applies to them as to the IPIs),
// and the flush IPIs those CPUs handled, counted by the csd tracepoints (`flush_ipis`) or,
// without them (empty), the remote flushes tlb_flush saw on them (`remote_flushes`).
FlushPath path_seen(FlushPath expected, std::span<const uint64_t> flush_requests,
                    std::span<const uint64_t> flush_ipis, uint64_t remote_flushes);

// --culprits: one sender's remote flush requests naming one target CPU in the interval, and
// the shootdown IPIs it queued for it.
struct CulpritRow {
    CulpritKey key;
    std::string comm;
    uint64_t count = 0;    // IPIs queued (csd); 0 without the csd tracepoints
    uint64_t requests = 0; // requests that named the target
    // -s: filled by the front-end, which reads and symbolizes the stacks.
    std::vector<std::string> kernel_stack, user_stack;
};
// Most requests (then IPIs) first.
std::vector<CulpritRow> culprits_since(const Snapshot &now, const Snapshot &before);

// -L: one victim CPU's IPI handler runs in the interval (CPUs with none are left out).
struct LatencyRow {
    uint32_t cpu = 0;
    tlbflush_ipi_counts ipis{};
    Hist handler_ns{}, handler_us{}, callback_ns{};
};
std::vector<LatencyRow> latency_since(const Snapshot &now, const Snapshot &before);

// One interval's output: text, or one JSON object.
struct Interval {
    std::string time; // HH:MM:SS; the text prints it when not "" (-T or an interval)
    CountTable counts;
    std::optional<std::vector<CulpritRow>> culprits; // --culprits
    std::optional<std::vector<LatencyRow>> latency;  // -L
    uint64_t lost_events = 0, table_full = 0, skipped_runs = 0;
    std::optional<uint64_t> stacks_lost; // -s: stacks the stack map had no room for
    std::string lost_in = "ring buffer"; // the buffer that lost the events
};

std::string counts_text(const CountTable &counts, const ViewFormat &f);
std::string culprits_text(const std::vector<CulpritRow> &rows, const ViewFormat &f);
std::string latency_text(const std::vector<LatencyRow> &rows, const ViewFormat &f);
std::string interval_text(const Interval &interval, const ViewFormat &f);

// The JSON views add their keys to `out`.
void counts_json(const CountTable &counts, const ViewFormat &f, nlohmann::json &out);
void culprits_json(const std::vector<CulpritRow> &rows, const ViewFormat &f, nlohmann::json &out);
void latency_json(const std::vector<LatencyRow> &rows, const ViewFormat &f, nlohmann::json &out);
nlohmann::json interval_json(const Interval &interval, const ViewFormat &f);

// --trace: the header, with a TIME column first under -T.
std::string event_header(bool timestamp);
// --trace: one flush, `time_s` seconds after the first one printed, its reason named `reason`;
// `wall_time` (HH:MM:SS) leads the line under -T and is "" otherwise.
std::string event_line(const tlbflush_event &e, double time_s, std::string_view reason,
                       std::string_view wall_time);
// --trace -j: the same as one JSON object ("pages" null and "full" 1 for a full flush, else 0).
nlohmann::json event_json(const tlbflush_event &e, double time_s, std::string_view reason,
                          std::string_view wall_time);

} // namespace memlat::tlbflush
