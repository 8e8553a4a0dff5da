// memstall, how this kernel lets each cause be measured: the functions a sleep is charged
// under (kallsyms ranges, or their names), PSI, delay accounting, and what cannot be measured.
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
#include "memstall_tool.h"
#include "prometheus/exporter.h"
#include "prometheus/metrics_serving.h"
#include "prometheus/process_metrics.h"
#include "sources/stall_source.h"
#include "sources/stalls.h"
#include "tool/tool.h"

namespace memlat::memstall {

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

} // namespace memlat::memstall
