#include "prometheus/metrics_serving.h"

#include <string>

#include "cli/run_loop.h"

namespace memlat {

void write_tool_metrics(prometheus::Exposition &out, CountingSide &tool) {
    const CountedLosses lost = tool.collect(out);
    prometheus::loss_metrics(out, lost.dropped_events, lost.table_full, lost.unpaired_ends);
    prometheus::self_metrics(out, tool.probes(), tool.object());
}

int serve_tool_metrics(std::string_view tool, const PrometheusOptions &prom,
                       const CommonOptions &common, CountingSide &side) {
    Exporter exporter(
        *prom.listen, std::string(tool),
        [&](prometheus::Exposition &out) {
            prometheus::build_info(out, tool);
            write_tool_metrics(out, side);
        },
        prom.web.value_or(WebConfig{}),
        side.profile_source() != nullptr
            ? ProfileSources{{std::string(tool), side.profile_source()}}
            : ProfileSources{});
    serve_until_stopped(tool, exporter, common, sleep_for);
    return 0;
}

} // namespace memlat
