#include "prometheus/metrics_serving.h"

#include <chrono>
#include <string>

#include "cli/run_loop.h"
#include "loading/loader.h"
#include "prometheus/process_metrics.h"

namespace memlat {

void write_tool_metrics(prometheus::Exposition &out, CountingSide &tool, bool run_stats_held) {
    const auto began = std::chrono::steady_clock::now();
    const CountedLosses lost = tool.collect(out);
    prometheus::loss_metrics(out, lost.dropped_events, lost.table_full, lost.unpaired_ends,
                             lost.stacks_lost);
    prometheus::self_metrics(out, tool.probes(), tool.object(), run_stats_held);
    std::vector<const bpf_object *> objects{tool.object()};
    for (const bpf_object *helper : tool.helper_objects())
        objects.push_back(helper);
    prometheus::map_memory_metrics(out, objects);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - began;
    out.family("memlat_scrape_duration_seconds", prometheus::Type::Gauge,
               "Time this scrape took to read the tool's counters and write its metrics",
               "seconds");
    out.sample(out.with_tool({}), took.count());
}

void write_server_metrics(prometheus::Exposition &out, std::string_view tool) {
    prometheus::build_info(out, tool);
    prometheus::process_metrics(out);
}

int serve_tool_metrics(std::string_view tool, const PrometheusOptions &prom,
                       const CommonOptions &common, CountingSide &side) {
    // Before the capabilities are dropped (serve_until_stopped): BPF_ENABLE_STATS needs
    // CAP_SYS_ADMIN, and the kernel keeps timing until the descriptor is closed, at the end.
    const OwnedFd run_stats = prom.bpf_stats ? enable_bpf_run_stats() : OwnedFd{};
    Exporter exporter(
        *prom.listen, std::string(tool),
        [&, held = prom.bpf_stats](prometheus::Exposition &out) {
            write_server_metrics(out, tool);
            write_tool_metrics(out, side, held);
        },
        prom.web.value_or(WebConfig{}),
        side.profile_source() != nullptr
            ? ProfileSources{{std::string(tool), side.profile_source()}}
            : ProfileSources{});
    serve_until_stopped(tool, exporter, common, sleep_for);
    return 0;
}

} // namespace memlat
