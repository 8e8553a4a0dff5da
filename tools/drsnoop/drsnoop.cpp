// drsnoop: threads stalled in memory reclaim (global direct reclaim, memory-cgroup limit
// reclaim, cgroup v1 soft-limit reclaim, node reclaim), how long each stall lasted and how many
// pages it freed.
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
#include "cli/multicall.h"
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
#include "loading/epoch_table.h"
#include "loading/events.h"
#include "loading/loader.h"
#include "prometheus/exporter.h"
#include "prometheus/metrics_serving.h"
#include "tool/tool.h"

using namespace memlat;
using nlohmann::json;

namespace {

constexpr char tool_name[] = "drsnoop";

constexpr const char *description =
    R"(Trace threads that stall in memory reclaim: global direct reclaim, reclaim
in a memory cgroup that hit its limit (what containers hit), cgroup v1
soft-limit reclaim and node reclaim. One line per stall, or log2 latency
histograms counted in the kernel (-H); a summary per process at exit, on
stderr so that stdout carries the rows only (with -j: a JSON object).

Columns: BCC's first, in BCC's order: PID (TID with -t), LAT(ms) the stall,
PAGES the pages that reclaim freed (nr_reclaimed), with -e FREE(KB), the free
memory of all zones when the stall began (BCC's -v column). Then memlat's:
KIND direct/memcg/softlimit/node, ORDER the allocation order, with -e TID (PID
with -t), CGROUP (the id of the task's memory cgroup) and GFP flags by name
(bit layout from the kernel's BTF). drsnoop reads FREE from the zones of every node,
reached through the task's memory cgroup, so it needs no kallsyms entry
(unlike BCC's, which needs vm_zone_stat and CONFIG_KALLSYMS_ALL).)";

constexpr const char *examples = R"(Examples:
  drsnoop                   trace every reclaim stall
  drsnoop -p 1234           only process 1234
  drsnoop -k memcg -e       memory-cgroup reclaim, with GFP flags and free memory
  drsnoop -G /sys/fs/cgroup/memory/db
                            only tasks in that cgroup and below
  drsnoop -H -P 5           per-process latency histograms every 5 seconds
  drsnoop -T -U -d 60       with timestamps and UIDs, for a minute
  drsnoop -j                JSON lines
  drsnoop --prometheus 127.0.0.1:9847
                            serve per-kind counts and stall histograms to
                            Prometheus at http://127.0.0.1:9847/metrics

)";

// The events' buffer (--buffer-size), and the batch after which user space is woken.
// Reclaim stalls come by tens to hundreds a second (the runtime tests' memory-cgroup
// reclaim); 32 KiB hold 341 records of 96 bytes, and user space drains them at each 8 KiB
// batch (85 records) and every 100 ms: a burst of 3000 stalls a second fits. The kernel maps
// a ring buffer's pages twice, so each KiB here is two of RSS: 1 MiB was 2 MiB of RSS, 128
// KiB 0.26 MiB, 12% of the tool's peak.
// The BPF side wakes user space when the ring buffer's producer position crosses a multiple
// of the batch (submit_batched() in bpf/common.bpf.h), a test that needs a power of two.
constexpr EventBufferSize default_event_buffer{.bytes = 32 * 1024, .wakeup_bytes = 8 * 1024};
static_assert(std::has_single_bit(default_event_buffer.bytes) &&
              std::has_single_bit(default_event_buffer.wakeup_bytes));

const std::array<const char *, DRSNOOP_KINDS> kind_tracepoints{
    "direct_reclaim", "memcg_reclaim", "memcg_softlimit_reclaim", "node_reclaim"};

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
    CgroupPathCache cgroup_cache_{memcg_on_v1_}; // --prometheus-labels cgroup
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

int node_count() {
    // "0-1" or "0": the highest possible node id, plus one.
    auto text = read_text_file("/sys/devices/system/node/possible");
    if (!text)
        return 1;
    auto last = text->find_last_of(",-");
    std::string_view tail =
        std::string_view(*text).substr(last == std::string::npos ? 0 : last + 1);
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' '))
        tail.remove_suffix(1);
    try {
        return parse_number<int>(tail, "node count") + 1;
    } catch (const UsageError &) {
        return 1;
    }
}

// One probe per reclaim kind: its DRSNOOP_* value.
enum class ProbeId {};

std::vector<Probe> Drsnoop::plan() const {
    std::vector<Probe> probes;
    for (int kind = 0; kind < DRSNOOP_KINDS; ++kind) {
        if (!kinds_[kind])
            continue;
        std::string tp = kind_tracepoints[kind];
        // A kind the user did not ask for by name may be missing from a kernel (soft-limit
        // reclaim exists only with cgroup v1 support); the others are required.
        auto choices = tracepoint_choices({tp + "_begin", tp + "_end"});
        if (kind != DRSNOOP_NODE && !reclaim_gfp_first_) {
            // Positional arguments in an order not recognized: the classic tracepoint reads
            // order and gfp_flags by name.
            choices[0].unavailable = "reclaim begin's arguments not recognized: " + reclaim_why_;
            choices[1].unavailable = choices[0].unavailable;
        }
        probes.emplace_back(ProbeId{kind}, fmt::format("vmscan:mm_vmscan_{}_begin/end", tp),
                            fmt::format("It needs the vmscan:mm_vmscan_{}_begin and _end "
                                        "tracepoints.",
                                        tp),
                            std::move(choices),
                            kinds_explicit_ || kind == DRSNOOP_DIRECT || kind == DRSNOOP_MEMCG);
    }
    probes.push_back(thread_exit_probe());
    return probes;
}

void Drsnoop::configure(drsnoop_bpf &skel) {
    // The GFP names are read from the BTF once the object is open: the inflated object is not
    // held beside libbpf's BTF index.
    if (!gfp_)
        gfp_ = GfpNames::from_kernel();
    auto *ro = skel.rodata;
    ro->filter_pid = o_.pid.value_or(0);
    ro->filter_tid = o_.tid.value_or(0);
    ro->read_uid = o_.show_uid || o_.common.json;
    ro->read_cgroup = o_.extended || o_.common.json; // the outputs with a cgroup column
    ro->filter_uid_on = o_.uid.has_value();
    ro->filter_uid = o_.uid.value_or(0);
    std::copy_n(o_.comm.begin(), std::min<size_t>(o_.comm.size(), DRSNOOP_COMM_LEN - 1),
                const_cast<char *>(ro->filter_comm));
    set_cgroup_filter(*ro, cgroup_);
    ro->memcg_on_v1 = memcg_on_v1_;
    ro->reclaim_gfp_first = reclaim_gfp_first_.value_or(false);
    ro->extended = o_.extended;
    ro->trace_events = !o_.hist;
    ro->hist_mode = o_.hist;
    ro->hist_per_process = o_.hist && o_.per_process;
    ro->nr_nodes = std::min(node_count(), DRSNOOP_MAX_NODES);
    ro->count_cgroups = o_.prom.label("cgroup");
    bpf_map__set_max_entries(skel.maps.cgroup_totals,
                             o_.prom.label("cgroup") ? o_.common.entries(16384) : 1);
    // The per-process summary: the text modes' summary at exit, and --prometheus-labels comm.
    // Without them nothing reads or empties it: a long run would fill it with exited
    // processes and count every later stall as not counted (a soak under process churn
    // reached 2 million).
    const bool count_processes = !o_.prom.on() || o_.prom.label("comm");
    ro->count_processes = count_processes;
    bpf_map__set_max_entries(skel.maps.summaries, count_processes ? o_.common.entries(8192) : 1);
    bpf_map__set_max_entries(skel.maps.proc_hists,
                             o_.hist && o_.per_process ? o_.common.entries(8192) : 1);
    configure_events(skel, !o_.hist);
    set_compat(*ro, kernel_features());
    size_thread_state_map(skel.maps.starts, skel.maps.starts_overflow, o_.common.max_entries);
}

void Drsnoop::print_header() const {
    if (!o_.common.json && !o_.hist)
        fmt::print("{}\n", drsnoop::header(format_));
}

void Drsnoop::print_event(const drsnoop_event &e) {
    if (first_ns_ == 0)
        first_ns_ = e.ts_ns - e.lat_ns;
    // Signed: perf buffers (kernels before 5.8) deliver each CPU's events in batches, so an
    // event of another CPU may precede the first one printed.
    const double time_s = static_cast<double>(static_cast<int64_t>(e.ts_ns - first_ns_)) / 1e9;
    if (o_.common.json) {
        auto j = drsnoop::json_event(e, time_s, format_, *gfp_);
        if (o_.common.timestamp)
            j["wall_time"] = wall_clock_time();
        print_json_line(j);
        return;
    }
    fmt::print("{}\n", drsnoop::line(e, time_s, format_, *gfp_));
}

void Drsnoop::print_histograms(drsnoop_bpf &skel) {
    // (pid, kind) -> slots, pid 0 for the all-process histograms; printed as the change
    // since the last print.
    std::map<std::pair<uint32_t, uint32_t>, Log2Hist> now;
    std::map<uint32_t, std::string> comms;
    if (o_.per_process) {
        // The interval's own histograms, nothing to subtract (see EpochTable).
        hists_.reset();
        for (const auto &[k, v] :
             hist_table_.next_interval(skel.maps.proc_hists, skel.bss->hist_epoch)) {
            std::copy(std::begin(v.slots), std::end(v.slots), now[k].begin());
            comms[k.first] = std::string(v.comm, strnlen(v.comm, sizeof(v.comm)));
        }
    } else {
        for (uint32_t kind = 0; kind < DRSNOOP_KINDS; ++kind)
            std::copy(std::begin(skel.bss->hist[kind]), std::end(skel.bss->hist[kind]),
                      now[{0, kind}].begin());
    }
    json out = json::object();
    json hists = json::array();
    if (o_.common.json)
        out["time"] = wall_clock_time();
    else if (o_.common.timestamp || o_.common.interval > 0)
        fmt::print("\n{}\n", wall_clock_time());
    for (const auto &[key, d] : hists_.next(std::move(now))) {
        const char *kind = drsnoop::kind_name(key.second);
        if (o_.common.json) {
            json h = log2_hist_json(d, "usecs");
            h["kind"] = kind;
            if (o_.per_process) {
                h["pid"] = key.first;
                h["comm"] = comms[key.first];
            }
            hists.push_back(h);
            continue;
        }
        if (o_.per_process)
            fmt::print("\npid {} ({}), {} reclaim:\n", key.first, comms[key.first], kind);
        else
            fmt::print("\n{} reclaim:\n", kind);
        fmt::print("{}", render_log2_hist(d, "usecs"));
    }
    // Stalls of this interval a table had no room for (the per-process histograms, or the
    // per-thread start times): its histograms lack them.
    const uint64_t full =
        skel.bss->table_full - std::exchange(table_full_before_, skel.bss->table_full);
    if (o_.common.json) {
        out["histograms"] = hists;
        out["table_full"] = full;
        print_json_line(out);
    } else if (full != 0) {
        fmt::print("\n{} stalls of this interval missing: a BPF table was full.\n", full);
    }
}

void Drsnoop::print_summary(drsnoop_bpf &skel, const EventReader *events) {
    // Records the BPF side could not reserve or write, and those a perf buffer lost.
    const uint64_t lost =
        events != nullptr ? events->lost(skel.bss->dropped_events) : skel.bss->dropped_events;
    const std::string events_name = events != nullptr ? events->name() : "ring buffer";
    auto rows = read_hash_map<drsnoop_proc_key, drsnoop_summary>(skel.maps.summaries);
    std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
        return a.second.total_ns != b.second.total_ns ? a.second.total_ns > b.second.total_ns
                                                      : a.first.pid < b.first.pid;
    });
    const auto *bss = skel.bss;
    // The stalls of each kind, counted beside the rows (the same events, past the same
    // filters): what the rows hold less than these, a full table kept out of them.
    std::array<drsnoop_totals, DRSNOOP_KINDS> in_rows{};
    for (const auto &[k, s] : rows) {
        in_rows[k.kind % DRSNOOP_KINDS].stalls += s.stalls;
        in_rows[k.kind % DRSNOOP_KINDS].total_ns += s.total_ns;
        in_rows[k.kind % DRSNOOP_KINDS].pages += s.pages;
    }
    if (o_.common.json) {
        json list = json::array();
        for (const auto &[k, s] : rows)
            list.push_back({{"pid", k.pid},
                            {"comm", std::string(s.comm, strnlen(s.comm, sizeof(s.comm)))},
                            {"kind", drsnoop::kind_name(k.kind)},
                            {"stalls", s.stalls},
                            {"total_ms", s.total_ns / 1e6},
                            {"max_ms", s.max_ns / 1e6},
                            {"pages", s.pages}});
        json totals = json::array(), left_out = json::array();
        for (uint32_t kind = 0; kind < DRSNOOP_KINDS; ++kind) {
            const drsnoop_totals &all = bss->totals[kind], &shown = in_rows[kind];
            if (all.stalls == 0)
                continue;
            totals.push_back({{"kind", drsnoop::kind_name(kind)},
                              {"stalls", all.stalls},
                              {"total_ms", all.total_ns / 1e6},
                              {"pages", all.pages}});
            if (all.stalls > shown.stalls)
                left_out.push_back({{"kind", drsnoop::kind_name(kind)},
                                    {"stalls", all.stalls - shown.stalls},
                                    {"total_ms", (all.total_ns - shown.total_ns) / 1e6},
                                    {"pages", all.pages - shown.pages}});
        }
        print_json_line({{"summary", list},
                         {"totals", totals},
                         {"left_out", left_out},
                         {"lost_events", lost},
                         {"table_full", bss->table_full},
                         {"unpaired_ends", bss->unpaired_ends},
                         {skipped_runs_field, recursion_misses(skel.obj)}});
        return;
    }
    // The text summary goes to stderr: stdout carries the header and the rows only, so that
    // a pipe into awk or sort reads rows and nothing else (BCC's tools print no summary),
    // while the summary still shows on the terminal and in logs. The rows printed go first
    // (and a stdout that cannot be written fails the tool here, as at each interval).
    flush_output();
    fmt::print(stderr, "\nReclaim stalls by process:\n");
    fmt::print(stderr, "{:<7} {:<16} {:<9} {:>8} {:>12} {:>10} {:>10}\n", "PID", "COMM", "KIND",
               "STALLS", "TOTAL(ms)", "MAX(ms)", "PAGES");
    for (const auto &[k, s] : rows)
        fmt::print(stderr, "{:<7} {:<16} {:<9} {:>8} {:>12.3f} {:>10.3f} {:>10}\n", k.pid,
                   std::string(s.comm, strnlen(s.comm, sizeof(s.comm))), drsnoop::kind_name(k.kind),
                   s.stalls, s.total_ns / 1e6, s.max_ns / 1e6, s.pages);
    for (uint32_t kind = 0; kind < DRSNOOP_KINDS; ++kind) {
        const drsnoop_totals &all = bss->totals[kind], &shown = in_rows[kind];
        if (all.stalls == 0)
            continue;
        fmt::print(stderr, "{:<7} {:<16} {:<9} {:>8} {:>12.3f} {:>10} {:>10}\n", "total", "",
                   drsnoop::kind_name(kind), all.stalls, all.total_ns / 1e6, "", all.pages);
        if (all.stalls > shown.stalls)
            fmt::print(stderr,
                       "{} {} stalls ({:.3f} ms) are in no row above: the per-process table was "
                       "full (--max-entries)\n",
                       all.stalls - shown.stalls, drsnoop::kind_name(kind),
                       (all.total_ns - shown.total_ns) / 1e6);
    }
    if (lost != 0)
        fmt::print(stderr, "\nLost {} events: the {} was full (the summary still counts them).\n",
                   lost, events_name);
    if (bss->table_full != 0)
        fmt::print(stderr, "\n{} stalls not counted: a BPF table was full.\n", bss->table_full);
    if (bss->unpaired_ends != 0)
        fmt::print(stderr,
                   "\n{} stalls not timed: their begin was not seen (under way when tracing "
                   "began, or the thread's state was evicted while it stalled).\n",
                   bss->unpaired_ends);
}

void Drsnoop::check_options() {
    if (o_.pid)
        require_process(*o_.pid, "-p");
    if (o_.tid)
        require_thread(*o_.tid, "-t", o_.pid);
    if (o_.comm.size() >= DRSNOOP_COMM_LEN)
        throw UsageError(fmt::format("-n '{}' is longer than a task name ({} characters)", o_.comm,
                                     DRSNOOP_COMM_LEN - 1));
    if (!o_.kinds.empty()) {
        kinds_.fill(false);
        kinds_explicit_ = true;
        const uint32_t mask =
            parse_kind_list(o_.kinds, DRSNOOP_KINDS, drsnoop::kind_name, "reclaim kind");
        for (uint32_t kind = 0; kind < DRSNOOP_KINDS; ++kind)
            kinds_[kind] = (mask >> kind) & 1;
    }
    if (!o_.cgroup.empty())
        cgroup_ = resolve_cgroup(o_.cgroup);
    if (o_.per_process && !o_.hist)
        throw UsageError("-P goes with -H (per-process histograms)");
    check_prometheus_options(o_.prom, o_.common);
    if (o_.prom.on() && o_.per_process)
        throw UsageError("--prometheus serves histograms per kind; -P goes with the text output "
                         "(per-task counts: --prometheus-labels comm)");
    // Metrics come from the in-kernel histograms and totals: no event per stall.
    if (o_.prom.on())
        o_.hist = true;
    // -U and -e add columns to the per-stall lines, which -H and --prometheus do not print.
    if (o_.hist && (o_.show_uid || o_.extended))
        throw UsageError(o_.prom.on() ? "--prometheus serves counts and histograms: -U and -e go "
                                        "with the per-stall output"
                                      : "-H counts in the kernel and prints no stalls: -U and -e "
                                        "go with the per-stall output");
    check_lines_or_histograms(o_.hist, "stall");
}

void Drsnoop::prepare(const Verbosity &v) {
    reclaim_gfp_first_ = reclaim_begin_gfp_first("mm_vmscan_direct_reclaim_begin", reclaim_why_);
    verbose(v, reclaim_begin_order_text(reclaim_gfp_first_, reclaim_why_));
    verbose(v,
            fmt::format("CGROUP is the task's {}",
                        memcg_on_v1_ ? "memory cgroup (cgroup v1 hierarchy)" : "cgroup v2 cgroup"));
}

void Drsnoop::loaded(const Verbosity &v) {
    verbose(v, fmt::format("GFP flag names from {}", gfp_->source()));
    if (!o_.prom.on())
        return;
    metrics_.emplace(o_.prom, o_.cgroup, getpagesize());
    for (uint32_t kind = 0; kind < DRSNOOP_KINDS; ++kind)
        if (const Probe *p = find_probe(probes_, ProbeId{static_cast<int>(kind)}))
            counts_.kinds[kind] = p->choice() != nullptr;
}

int Drsnoop::trace() {
    const auto v = o_.common.verbosity();
    drsnoop_bpf *skel = &this->skel();
    std::optional<EventReader> events;
    if (!o_.hist)
        read_events<drsnoop_event>(
            events, o_.events, [this](const auto &e) { print_event(e); }, v);
    print_header();
    announce_tracing(o_.hist ? "Tracing reclaim stalls (histograms)..."
                             : "Tracing reclaim stalls...");
    fflush(stdout);

    return trace_lines_or_histograms(
        events, [&] { print_histograms(*skel); },
        [&](const EventReader *reader) { print_summary(*skel, reader); }, "stalls", v,
        skel->maps.starts, skel->maps.starts_overflow);
}

CountedLosses Drsnoop::collect(prometheus::Exposition &out) {
    drsnoop_bpf &skel = this->skel();
    drsnoop::Counts &counts = counts_;
    // A scrape reads the totals and histograms; the per-task and per-cgroup tables on request.
    const auto *bss = skel.bss;
    for (uint32_t k = 0; k < DRSNOOP_KINDS; ++k) {
        counts.totals[k] = bss->totals[k];
        std::copy(std::begin(bss->hist[k]), std::end(bss->hist[k]), counts.hist_us[k].begin());
    }
    counts.summaries.clear();
    if (o_.prom.label("comm")) {
        counts.summaries = read_hash_map<drsnoop_proc_key, drsnoop_summary>(skel.maps.summaries);
        // A process that exited stalls no more: its counts are read, so its entry goes,
        // and the table keeps room for the processes that live.
        delete_exited_tasks(skel.maps.summaries, counts.summaries,
                            [](const drsnoop_proc_key &k) { return k.pid; });
    }
    if (o_.prom.label("cgroup")) {
        counts.cgroups = read_hash_map<drsnoop_cgroup_key, drsnoop_totals>(skel.maps.cgroup_totals);
        // Looked up after the table was read: a cgroup it has and this does not was
        // removed, and its entry goes too.
        counts.cgroup_paths = cgroup_cache_.paths_of(
            counts.cgroups, [](const auto &entry) { return entry.first.cgroup_id; });
        for (const auto &[key, t] : counts.cgroups)
            if (!counts.cgroup_paths.contains(key.cgroup_id))
                bpf_map__delete_elem(skel.maps.cgroup_totals, &key, sizeof(key), 0);
    }
    metrics_->collect(counts, out);
    return CountedLosses{bss->dropped_events, bss->table_full, bss->unpaired_ends};
}

// The options that shape what drsnoop counts: its own, and `memlat exporter`'s --drsnoop.NAME.
void add_counting_options(CommandLine &cli, Options &o) {
    cli.option('p', "pid", "PID", "Only threads of process PID", o.pid);
    cli.option('t', "tid", "TID", "Only thread TID", o.tid);
    cli.option('u', "uid", "UID", "Only tasks of user id UID", o.uid);
    cli.option('n', "name", "NAME", "Only tasks whose name contains NAME", o.comm);
    cli.option('k', "kind", "LIST",
               "Only these kinds of reclaim: direct, memcg, softlimit, node (default: all "
               "the kernel has)",
               o.kinds);
    add_cgroup_option(cli, o.cgroup);
    add_series_options(cli, o.prom, {"comm", "cgroup"});
}

void add_own_options(CommandLine &cli, Options &o) {
    cli.flag('U', "print-uid", "Add a UID column", o.show_uid);
    cli.flag('e', "extended",
             "Add FREE(KB) (free memory when the stall began; BCC's -v column), TID, "
             "CGROUP and GFP (flags by name)",
             o.extended);
    cli.flag('H', "hist",
             "Log2 histograms of stall time per kind instead of one line per stall, "
             "counted in the kernel; printed every INTERVAL or at the end",
             o.hist);
    cli.flag('P', "per-process", "With -H: one histogram per process and kind", o.per_process);
}

constexpr ToolManual manual{
    .summary = "threads stalled in direct, memory-cgroup and node reclaim: per stall or histograms",
    .description = description,
    .examples = examples,
    .timestamp_help = "Add a TIME(s) column: seconds since the first stall began, as BCC's "
                      "drsnoop; with -j a wall_time field",
    .event_lines = "the per-stall lines",
};

} // namespace

// memlat drsnoop (and a link named drsnoop), and its part of `memlat exporter`.
extern const ToolEntry memlat_tool_drsnoop =
    tool_entry<Drsnoop, tool_name, manual, add_own_options, add_counting_options>();
