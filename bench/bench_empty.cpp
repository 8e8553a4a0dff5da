// The benchmark's floor: attaches empty tp_btf programs to the tracepoints it is given (those a
// tool hooks), through the same loader the tools use, and keeps them attached until Ctrl-C,
// SIGTERM or -d. bench/run_bench.py compares each tool with it on the same hooks.
#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "bench_empty.skel.h"
#include "loader.h"
#include "options.h"
#include "run_loop.h"

using namespace memlat;

namespace {

// The hooks bpf/bench_empty.bpf.c has an empty program for: a tracepoint's name is its tp_btf
// program (e_NAME); SYSTEM/NAME is the classic tracepoint (e_tp_NAME), for the probes that the
// tools read that way.
constexpr std::array<std::string_view, 28> known_hooks{
    "tlb_flush",
    "csd_function_entry",
    "csd_function_exit",
    "mm_vmscan_direct_reclaim_begin",
    "mm_vmscan_direct_reclaim_end",
    "mm_vmscan_memcg_reclaim_begin",
    "mm_vmscan_memcg_reclaim_end",
    "mm_vmscan_memcg_softlimit_reclaim_begin",
    "mm_vmscan_memcg_softlimit_reclaim_end",
    "mm_vmscan_node_reclaim_begin",
    "mm_vmscan_node_reclaim_end",
    "mm_compaction_begin",
    "mm_compaction_end",
    "mm_compaction_migratepages",
    "compaction/mm_compaction_migratepages",
    "mm_compaction_try_to_compact_pages",
    "mm_compaction_deferred",
    "mm_compaction_kcompactd_wake",
    "mm_migrate_pages_start",
    "mm_migrate_pages",
    "mm_filemap_add_to_page_cache",
    "writeback_dirty_folio",
    "mm_filemap_get_pages",
    "mm_filemap_map_pages",
    "mm_filemap_fault",
    "sched_switch",
    "balance_dirty_pages",
    "sched_process_exit",
};

HookChoice empty_program(const std::string &hook) {
    auto slash = hook.find('/');
    if (slash == std::string::npos)
        return HookChoice{.kind = HookKind::TpBtf, .programs = {"e_" + hook}};
    return HookChoice{.kind = HookKind::Tracepoint, .programs = {"e_tp_" + hook.substr(slash + 1)}};
}

std::string known_list() {
    std::string list;
    for (auto hook : known_hooks)
        list += (list.empty() ? "" : ", ") + std::string(hook);
    return list;
}

} // namespace

int main(int argc, char **argv) {
    return run_tool("bench_empty", [&] {
        CommonOptions o;
        std::string hooks = "tlb_flush";
        CommandLine cli("bench_empty",
                        "Attach empty tp_btf programs to tracepoints (the floor for bench/).",
                        "  bench_empty -e tlb_flush\n"
                        "  bench_empty -e mm_compaction_begin,mm_compaction_end\n");
        cli.option('e', "hooks", "LIST",
                   "Comma-separated tracepoints to attach an empty program to: NAME for tp_btf, "
                   "SYSTEM/NAME for the classic tracepoint (default: tlb_flush). Known: " +
                       known_list(),
                   hooks);
        add_common_options(cli, o, false);
        cli.parse(argc, argv);
        std::vector<Probe> probes;
        for (const auto &hook : split_list(hooks, "-e")) {
            if (std::find(known_hooks.begin(), known_hooks.end(), hook) == known_hooks.end())
                throw UsageError("-e: no empty program for tracepoint '" + hook +
                                 "'; known: " + known_list());
            // Not required: a tracepoint this kernel lacks is one the tools cannot hook either.
            probes.emplace_back(hook, "", std::vector{empty_program(hook)}, false);
        }
        check_environment("bench_empty");
        Loaded<bench_empty_bpf> skel(
            bench_empty_bpf__open_opts, bench_empty_bpf__destroy, [](bench_empty_bpf &) {}, probes,
            o.verbosity());
        std::string attached;
        for (const auto &probe : probes)
            if (probe.choice() != nullptr)
                attached += (attached.empty() ? "" : ", ") + probe.name;
        if (attached.empty())
            throw RuntimeError("None of the tracepoints could be hooked on this kernel.");
        install_stop_signals();
        announce_tracing("Attached empty programs to " + attached + ".");
        run_until_stopped(o, sleep_for, [] {});
        return 0;
    });
}
