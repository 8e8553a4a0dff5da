// The benchmark's floor: attaches an empty tp_btf program to tlb:tlb_flush through the same
// loader the tools use, and keeps it attached until Ctrl-C, SIGTERM or -d.
#include "bench_empty.skel.h"
#include "bpf_runtime.h"
#include "options.h"
#include "output.h"

using namespace memlat;

int main(int argc, char **argv) {
    return run_tool("bench_empty", [&] {
        CommonOptions o;
        CommandLine cli("bench_empty",
                        "Attach an empty program to tlb:tlb_flush (the floor for bench/).", "");
        add_common_options(cli, o, false);
        cli.parse(argc, argv);
        check_environment("bench_empty");
        std::vector<Probe> probes{Probe{
            "tlb:tlb_flush", "", {HookChoice{HookKind::TpBtf, {"empty_tlb_flush"}, "", "", ""}}}};
        Loaded<bench_empty_bpf> skel(
            bench_empty_bpf__open_opts, bench_empty_bpf__destroy, [](bench_empty_bpf &) {}, probes,
            o.verbosity());
        install_stop_signals();
        announce_tracing("Attached an empty program to tlb:tlb_flush.");
        run_until_stopped(o, sleep_for, [] {});
        return 0;
    });
}
