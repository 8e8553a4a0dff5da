// The benchmark's floor: attaches empty tp_btf programs to the tracepoints it is given (those a
// tool hooks), through the same loader the tools use, and keeps them attached until Ctrl-C,
// SIGTERM or -d. bench/run_bench.py compares each tool with it on the same hooks. With -b the
// programs run one of the primitives the tools are built of instead (bench_empty.bpf.c): what
// each costs on a tool's hooks, beside the floor (run_bench.py --primitives).
#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "bench_empty.skel.h"
#include "cli/options.h"
#include "cli/run_loop.h"
#include "loading/loader.h"

using namespace memlat;

namespace {

// The hooks bench_empty.bpf.c has an empty program for: a tracepoint's name is its tp_btf
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

// -b's names for the bodies bench_empty.bpf.c can run (its BODY_* bits).
constexpr std::array<std::pair<std::string_view, uint32_t>, 4> body_parts{{
    {"store", 0},  // only the store to a global that every body ends with
    {"clock", 1},  // bpf_ktime_get_ns()
    {"lookup", 2}, // the current thread's entry in a preallocated hash map keyed by TID
    {"atomic", 4}, // a locked add instead of a store
}};

uint32_t parse_body(const std::string &list) {
    uint32_t bits = 0;
    for (const auto &part : split_list(list, "-b")) {
        auto it = std::find_if(body_parts.begin(), body_parts.end(),
                               [&](const auto &p) { return p.first == part; });
        if (it == body_parts.end())
            throw UsageError("-b: unknown body part '" + part +
                             "'; known: store, clock, lookup, atomic");
        bits |= it->second;
    }
    return bits;
}

HookChoice empty_program(const std::string &hook, bool with_body) {
    auto slash = hook.find('/');
    if (slash == std::string::npos)
        return HookChoice{.kind = HookKind::TpBtf, .programs = {(with_body ? "b_" : "e_") + hook}};
    // Classic tracepoints keep their empty program under -b: bodies are tp_btf programs.
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
        std::string body;
        CommandLine cli("bench_empty",
                        "Attach empty tp_btf programs to tracepoints (the floor for bench/).",
                        "  bench_empty -e tlb_flush\n"
                        "  bench_empty -e mm_compaction_begin,mm_compaction_end\n");
        cli.option('e', "hooks", "LIST",
                   "Comma-separated tracepoints to attach an empty program to: NAME for tp_btf, "
                   "SYSTEM/NAME for the classic tracepoint (default: tlb_flush). Known: " +
                       known_list(),
                   hooks);
        cli.option(
            'b', "body", "LIST",
            "Instead of empty programs, programs that run these primitives, comma-separated: "
            "store (nothing else), clock (bpf_ktime_get_ns), lookup (the thread's entry in a hash "
            "map by TID), "
            "atomic (a locked add of the result); a store to a global in every case",
            body);
        add_common_options(cli, o, false);
        cli.parse(argc, argv);
        const bool with_body = !body.empty();
        const uint32_t body_bits = with_body ? parse_body(body) : 0;
        std::vector<Probe> probes;
        for (const auto &hook : split_list(hooks, "-e")) {
            if (std::find(known_hooks.begin(), known_hooks.end(), hook) == known_hooks.end())
                throw UsageError("-e: no empty program for tracepoint '" + hook +
                                 "'; known: " + known_list());
            // Not required: a tracepoint this kernel lacks is one the tools cannot hook either.
            probes.emplace_back(hook, "", std::vector{empty_program(hook, with_body)}, false);
        }
        check_environment("bench_empty");
        Loaded<bench_empty_bpf> skel(
            bench_empty_bpf__open_opts, bench_empty_bpf__destroy,
            [&](bench_empty_bpf &s) {
                s.rodata->body = body_bits;
                // The floor's start-up and memory stay those of empty programs.
                if (!(body_bits & 2))
                    bpf_map__set_max_entries(s.maps.body_threads, 1);
            },
            probes, o.verbosity());
        std::string attached;
        for (const auto &probe : probes)
            if (probe.choice() != nullptr)
                attached += (attached.empty() ? "" : ", ") + probe.name;
        if (attached.empty())
            throw RuntimeError("None of the tracepoints could be hooked on this kernel.");
        install_stop_signals();
        announce_tracing((with_body ? "Attached programs running -b's body to "
                                    : "Attached empty programs to ") +
                         attached + ".");
        run_until_stopped(o, sleep_for, [] {});
        return 0;
    });
}
