// cachestat's front-end, declared for the files that hold its parts: cachestat.cpp (the
// manual, the options and the plan) and cachestat_tool_read.cpp (what is read back: the
// snapshots of its three tables, the rows, the summary and the metrics).
#pragma once

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
#include "sources/page_cache.h"
#include <linux/capability.h>

#include "base/capabilities.h"
#include "base/files.h"
#include "base/machine.h"
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

namespace memlat::cachestat {

inline constexpr char tool_name[] = "cachestat";
using json = nlohmann::json;

struct Options {
    CommonOptions common;
    std::optional<int> pid;
    std::string cgroup;
    bool per_process = false;
    bool per_file = false;
    bool per_cgroup = false; // memlat top's source (sources/page_cache.h): no option of its own
    PrometheusOptions prom;
};

// A file as the BPF side keys it: a new file that reuses a freed inode number is a new key
// (its generation differs) where the hook can see the inode.
using FileKey = FileIdentity;

struct Snapshot {
    cachestat::Counts total;
    // Cumulative per key; with epochs only the keys active in the last interval.
    std::map<uint32_t, cachestat_proc_value> procs;
    std::map<FileKey, cachestat_file_value> files;
    uint64_t table_full = 0;
};

// The probes plan() makes, looked up by these and not by their labels.
enum class ProbeId { Misses, Dirties, Accesses };
// The accesses' preferred family: the filemap access tracepoints (Linux 6.12).
inline constexpr const char *filemap_access = "filemap_access";

class Cachestat final : public Tool<cachestat_bpf, Options, tool_name> {
  public:
    using Tool::Tool;
    void check_options() override;
    CountedLosses collect(prometheus::Exposition &out) override;
    // With per_cgroup: the counters since load (sources/page_cache.h).
    cachestat::CgroupSnapshot cgroup_snapshot();
    bool accesses_known() const { return accesses_known_; }
    void forget_cgroup(uint64_t id) const {
        bpf_map__delete_elem(skel().maps.cgroup_counts, &id, sizeof(id), 0);
    }

  private:
    int trace() override;
    void prepare(const Verbosity &v) override;
    std::vector<Probe> plan() const override;
    void configure(cachestat_bpf &skel) override;
    void loaded(const Verbosity &v) override;
    Snapshot snapshot(cachestat_bpf &skel);
    cachestat::Counts epoch_total(uint32_t epoch) const;
    void print_interval(const Snapshot &now, const Snapshot &before);
    void print_summary(cachestat_bpf &skel, const Snapshot &now, double seconds);
    std::vector<cachestat::ProcRow> proc_rows(const Snapshot &now, const Snapshot &before) const;
    std::vector<cachestat::FileRow> file_rows(const Snapshot &now, const Snapshot &before);

    MappedArray cpu_counts_;                    // skel().maps.cpu_counts, once loaded
    std::optional<cachestat::Metrics> metrics_; // --prometheus
    std::optional<CgroupTarget> cgroup_;
    bool accesses_known_ = true;
    FilePaths paths_;
    int ncpus_ = possible_cpus();
    // Text and JSON read the tables by epochs; --prometheus (cumulative counters) does not.
    bool epochs_ = false;
    bool baseline_taken_ = false;
    // With epochs: the per-CPU counters by the tables' epochs, summed over the CPUs.
    EpochCounters<cachestat::Counts> cpu_epochs_{
        [this](uint32_t epoch) { return epoch_total(epoch); }};
    EpochTable<cachestat_proc_key, cachestat_proc_value, uint32_t> proc_table_{
        [](const cachestat_proc_key &k) { return k.pid; },
        cachestat::add_entry<cachestat_proc_value>};
    EpochTable<cachestat_file_key, cachestat_file_value, FileKey> file_table_{
        [](const cachestat_file_key &k) {
            return FileKey{k.dev, k.ino, k.generation};
        },
        cachestat::add_entry<cachestat_file_value>};
    std::map<uint32_t, cachestat_proc_value> proc_totals_;
    std::map<FileKey, cachestat_file_value> file_totals_;
    cachestat::SummaryRows<uint32_t, cachestat_proc_value> proc_summary_{o_.common.entries(16384)};
    cachestat::SummaryRows<FileKey, cachestat_file_value> file_summary_{o_.common.entries(65536)};
};

} // namespace memlat::cachestat
