// cachestat: page-cache hits, misses and dirties, counted in pages, per interval; machine-wide,
// per process (-P) or per file (--per-file).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <fmt/format.h>
#include <map>
#include <optional>

#include "cachestat.h"
#include "cachestat.skel.h"
#include "cachestat_format.h"
#include "cachestat_metrics.h"
#include "cachestat_totals.h"
#include "kernel/cgroups.h"
#include "kernel/workloads.h"
#include "sources/page_cache.h"
#include <linux/capability.h>

#include "base/capabilities.h"
#include "base/files.h"
#include "base/machine.h"
#include "cachestat_tool.h"
#include "cli/multicall.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/run_loop.h"
#include "kernel/features.h"
#include "kernel/file_paths.h"
#include "kernel/tasks.h"
#include "loading/epoch_table.h"
#include "loading/loader.h"
#include "prometheus/exporter.h"
#include "prometheus/metrics_serving.h"
#include "prometheus/process_metrics.h"
#include "tool/tool.h"

using namespace memlat;
using namespace memlat::cachestat;
using nlohmann::json;

namespace {

constexpr const char *description =
    R"(Count page-cache hits, misses and dirtied pages per interval (every second
unless INTERVAL is given, as BCC), machine-wide, per process (-P) or per file
(--per-file). Everything is in pages (PAGE_SIZE): a large folio counts as the
pages it holds, not as one call.

Columns:
  MISSES    pages added to the page cache (mm_filemap_add_to_page_cache):
            read-ahead, read faults, and pages a write creates (appends,
            holes), which are DIRTIES too.
  ACCESSES  (JSON) pages looked up: the range each read(2) or splice asks
            for, clamped to the file size (the kernel reports it once per
            folio batch; cachestat counts it once per read), the fault-around
            window of each mmap fault, and one page per filemap fault.
  HITS      ACCESSES that no MISS accounts for: a thread's accesses are
            matched against the pages the same thread added to the same file
            (its read-ahead); the rest are hits, counted when they happen, so
            the -P and --per-file rows add up to the total. Pages a write
            creates and dirties are matched by nothing. BCC:
            mark_page_accessed calls minus mark_buffer_dirty calls, minus
            misses, machine-wide.
  HITRATIO  HITS / ACCESSES; "-" when nothing was accessed.
  DIRTIES   pages of folios that went from clean to dirty
            (writeback_dirty_folio), on every file system. BCC: calls to
            mark_buffer_dirty (always 0 on XFS and btrfs).
  BUFFERS_MB, CACHED_MB  Buffers and Cached of /proc/meminfo.
-P: PID UID COMM HITS MISSES DIRTIES READ_HIT% per process (the task that
was current: a read and its read-ahead run in the reader), busiest first.
--per-file: DEV INO HITS MISSES DIRTIES HITRATIO PATH per file. PATH is looked
up in /proc/PID/fd and /proc/PID/maps of the last process that used the file;
"-" when it no longer has it open or mapped.
Kernels without the access tracepoints (before 6.12) count accesses from
folio_mark_accessed or mark_page_accessed (fentry or kprobe): read(2) marks
every folio it copies (a folio that successive small reads stay in, once);
mmap faults mark nothing, and mapped pages count when the process unmaps
them (munmap, exit) if they were used. Where nothing can count accesses,
HITS and HITRATIO print as "-" and cachestat says why.
mmap: kernels map whole large folios at a fault, beyond the window the
tracepoint reports, so mmap ACCESSES are a lower bound. Not seen: tmpfs and
shmem reads, direct I/O, pages already mapped (no fault).
At exit a summary covers the whole run (HITS from the run's totals): on
stderr, so that stdout carries the rows only (with -j: a summary object).)";

constexpr const char *examples = R"(Examples:
  cachestat                 hits, misses, dirties every second (as BCC)
  cachestat -T 5 12         every 5 seconds, 12 times, with the time
  cachestat -p 1234         only process 1234
  cachestat -G /sys/fs/cgroup/db.slice
                            only tasks in that cgroup and below
  cachestat -P 5            per process every 5 seconds (BCC's cachetop)
  cachestat --per-file -p 1234
                            per file, for process 1234
  cachestat -j -d 10        JSON lines for 10 seconds, then a summary
  cachestat --prometheus 127.0.0.1:9850
                            serve the counters to Prometheus

)";

// MEMLAT_DISABLE_HOOKS in --help: the hook kinds and families of its probes.
constexpr std::array<std::string_view, 4> hook_kinds{
    "never try these hook kinds or families", "(tp_btf, raw_tp, tracepoint, fentry, kprobe,",
    "filemap_access, folio_mark_accessed,", "mark_page_accessed, writeback_dirty_folio)"};

} // namespace

namespace memlat::cachestat {

std::vector<Probe> Cachestat::plan() const {
    std::vector<Probe> probes;
    probes.emplace_back(ProbeId::Misses, "filemap:mm_filemap_add_to_page_cache (misses)",
                        "It needs the filemap:mm_filemap_add_to_page_cache tracepoint.",
                        tracepoint_choices({"add"}, "",
                                           "on kernels whose classic format has no order field, "
                                           "a large folio counts as one page"));

    auto dirties =
        tracepoint_choices({"dirty_folio"}, "writeback_dirty_folio",
                           "the classic format has neither the folio's size nor the device: a "
                           "large folio counts as one page, --per-file shows device 0:0");
    for (auto &c :
         tracepoint_choices({"dirty_page"}, "writeback_dirty_page",
                            "the classic format has no device: --per-file shows device 0:0")) {
        dirties.push_back(c);
    }
    probes.emplace_back(ProbeId::Dirties, "writeback:writeback_dirty_folio (dirties)",
                        "It needs the writeback:writeback_dirty_folio or writeback_dirty_page "
                        "tracepoint.",
                        std::move(dirties));

    const std::string marked =
        "accesses are the pages of folios marked accessed: read(2) marks each folio it copies, "
        "mmap faults none (mapped pages count at unmap, if used)";
    auto accesses = tracepoint_choices({"get_pages", "map_pages", "fault"}, filemap_access,
                                       "the classic format has no file size: a read that asks "
                                       "past the end of a file counts the pages it asked for");
    for (auto [kind, program, function] :
         {std::tuple{HookKind::Fentry, "folio_accessed_fentry", "folio_mark_accessed"},
          std::tuple{HookKind::Kprobe, "folio_accessed_kprobe", "folio_mark_accessed"},
          std::tuple{HookKind::Fentry, "page_accessed_fentry", "mark_page_accessed"},
          std::tuple{HookKind::Kprobe, "page_accessed_kprobe", "mark_page_accessed"}}) {
        HookChoice c{.kind = kind, .programs = {program}, .family = function, .caveat = marked};
        c.note = fmt::format("accesses come from {} ({}): read(2) counts every folio it copies; "
                             "mmap faults count nothing: mapped pages count when unmapped "
                             "(munmap, exit), if used.",
                             function, c.label());
        accesses.push_back(std::move(c));
    }
    probes.emplace_back(
        ProbeId::Accesses, "filemap:mm_filemap_get_pages/map_pages/fault (accesses)",
        "The access tracepoints arrived in Linux 6.12.", std::move(accesses), false);
    probes.back().note_if_none =
        "HITS and HITRATIO are unavailable: nothing on this kernel can count page-cache "
        "accesses (the filemap access tracepoints need Linux 6.12; folio_mark_accessed needs "
        "fentry or kprobes).";
    probes.push_back(thread_exit_probe());
    return probes;
}

void Cachestat::configure(cachestat_bpf &skel) {
    auto *ro = skel.rodata;
    ro->filter_pid = o_.pid.value_or(0);
    set_cgroup_filter(*ro, cgroup_);
    ro->per_process = o_.per_process;
    ro->per_file = o_.per_file;
    ro->page_shift = __builtin_ctz(static_cast<unsigned>(getpagesize()));
    ro->nr_cpus = static_cast<uint32_t>(ncpus_);
    bpf_map__set_max_entries(skel.maps.cpu_counts, 2 * static_cast<uint32_t>(ncpus_));
    bpf_map__set_max_entries(skel.maps.proc_counts, o_.per_process ? o_.common.entries(16384) : 1);
    bpf_map__set_max_entries(skel.maps.file_counts, o_.per_file ? o_.common.entries(65536) : 1);
    ro->per_cgroup = o_.per_cgroup;
    ro->memcg_on_v1 = o_.per_cgroup && memory_controller_on_v1();
    bpf_map__set_max_entries(skel.maps.cgroup_counts, o_.per_cgroup ? o_.common.entries(4096) : 1);
    set_compat(*ro, kernel_features());
    size_thread_state_map(skel.maps.threads, skel.maps.threads_overflow, o_.common.max_entries);
}

void Cachestat::check_options() {
    // BCC's default, one line a second, is for the text output only.
    if (o_.common.interval == 0 && !o_.prom.on())
        o_.common.interval = 1;
    if (o_.pid)
        require_process(*o_.pid, "-p");
    if (o_.per_process && o_.per_file)
        throw UsageError("-P and --per-file are two views; choose one");
    check_prometheus_options(o_.prom, o_.common);
    if (o_.prom.on()) {
        if (o_.per_process || o_.per_file)
            throw UsageError("--prometheus serves the totals: -P and --per-file go with the text "
                             "output (per-task counts: --prometheus-labels comm)");
        o_.per_process = o_.prom.label("comm"); // per-task series need the per-process table
    }
    check_max_entries_used(o_.common, o_.per_process || o_.per_file || o_.per_cgroup,
                           "-P or --per-file (or --prometheus-labels comm)");
    if (!o_.cgroup.empty())
        cgroup_ = resolve_cgroup_target(o_.cgroup);
}

void Cachestat::prepare(const Verbosity &) {
    if (o_.per_file) {
        // Other users' /proc/PID/fd directories are theirs alone (CAP_DAC_READ_SEARCH), and
        // their links and maps are read under ptrace's rules (CAP_SYS_PTRACE).
        std::string missing;
        if (!process_has_capability(CAP_DAC_READ_SEARCH))
            missing = "CAP_DAC_READ_SEARCH";
        if (!process_has_capability(CAP_SYS_PTRACE))
            missing += missing.empty() ? "CAP_SYS_PTRACE" : " and CAP_SYS_PTRACE";
        if (!missing.empty())
            fmt::print(
                stderr,
                "{}: missing {}: --per-file reads the paths from the /proc/PID/fd and maps of "
                "other users' processes only with them; their files show PATH -, the "
                "counts are complete\n",
                tool_name, missing);
    }
}

void Cachestat::loaded(const Verbosity &) {
    cpu_counts_ = MappedArray(skel().maps.cpu_counts);

    const Probe &access = *find_probe(probes_, ProbeId::Accesses);
    accesses_known_ = access.choice() != nullptr;
    // A classic tracepoint names a file by (dev, ino) only: then every hook matches a thread's
    // misses to its accesses that way (cachestat.bpf.c).
    for (auto id : {ProbeId::Misses, ProbeId::Accesses}) {
        const HookChoice *c = find_probe(probes_, id)->choice();
        if (c && c->kind == HookKind::Tracepoint)
            skel().bss->match_by_inode = true;
    }

    if (o_.prom.on())
        metrics_.emplace(o_.prom, cgroup_ ? cgroup_->path : "", accesses_known_);
}

int Cachestat::trace() {
    const auto v = o_.common.verbosity();
    cachestat_bpf *skel = &this->skel();
    epochs_ = true;
    const auto started = std::chrono::steady_clock::now();
    Snapshot before = snapshot(*skel);
    if (!o_.common.json && !o_.per_process && !o_.per_file)
        fmt::print("{}\n", cachestat::header({o_.common.timestamp, accesses_known_}));
    announce_tracing(o_.per_process ? "Counting page-cache use per process..."
                     : o_.per_file  ? "Counting page-cache use per file..."
                                    : "Counting page-cache hits, misses and dirties...");
    flush_output();

    trace_until_stopped(o_.common, nullptr, [&] {
        Snapshot now = snapshot(*skel);
        print_interval(now, before);
        before = std::move(now);
    });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    print_summary(*skel, snapshot(*skel), seconds);
    report_thread_state(v, skel->maps.threads, skel->maps.threads_overflow,
                        skel->bss->memlat_thread_entries_created,
                        skel->bss->memlat_thread_entries_exit_deleted);
    fflush(stdout);
    return 0;
}

} // namespace memlat::cachestat

namespace {

// The options that shape what cachestat counts: its own, and `memlat exporter`'s
// --cachestat.NAME.
void add_counting_options(CommandLine &cli, Options &o) {
    cli.option('p', "pid", "PID", "Only the tasks of process PID", o.pid);
    add_cgroup_option(cli, o.cgroup);
    add_series_options(cli, o.prom, {"comm"});
}

void add_own_options(CommandLine &cli, Options &o) {
    cli.flag('P', "per-process",
             "A table per interval: PID UID COMM HITS MISSES DIRTIES READ_HIT%, busiest "
             "first (BCC's cachetop is cachestat -P 5: docs/bcc.md)",
             o.per_process);
    cli.flag(0, "per-file",
             "A table per interval: DEV INO HITS MISSES DIRTIES HITRATIO PATH, busiest "
             "first",
             o.per_file);
    cli.retired_short('f', "--per-file",
                      "--folded-file, folded stacks, as BCC's -f is folded output");
}

// cachestat as memlat top's source of page-cache counts: Cachestat loaded with no filter, per
// memory cgroup.
class CachestatSource final : public cachestat::CacheSource {
  public:
    explicit CachestatSource(const CommonOptions &common) : cachestat_(options(common)) {
        cachestat_.check_options();
        cachestat_.load();
    }
    cachestat::CgroupSnapshot take_snapshot() override { return cachestat_.cgroup_snapshot(); }
    bool accesses_known() const override { return cachestat_.accesses_known(); }
    void forget(uint64_t cgroup_id) override { cachestat_.forget_cgroup(cgroup_id); }
    double map_memory_bytes() const override {
        return prometheus::object_map_memory_bytes(cachestat_.object());
    }

  private:
    static Options options(const CommonOptions &common) {
        Options o;
        o.common = common;
        o.per_cgroup = true;
        return o;
    }
    Cachestat cachestat_;
};

constexpr ToolManual manual{
    .summary = "page-cache hits, misses and dirtied pages: machine-wide, per process or per file",
    .description = description,
    .examples = examples,
    .hook_kinds = hook_kinds,
    .timestamp_help = "Start each line with a TIME column (HH:MM:SS)",
};

} // namespace

std::unique_ptr<cachestat::CacheSource> cachestat::load_cache_source(const CommonOptions &common) {
    return std::make_unique<CachestatSource>(common);
}

// memlat cachestat (and a link named cachestat), and its part of `memlat exporter`.
extern const ToolEntry memlat_tool_cachestat =
    tool_entry<Cachestat, tool_name, manual, add_own_options, add_counting_options>();
