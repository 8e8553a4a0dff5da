#include "metrics_serving.h"

#include <string>

#include "run_loop.h"

namespace memlat {

int serve_tool_metrics(std::string_view tool, const PrometheusOptions &prom,
                       const CommonOptions &common, const std::vector<Probe> &probes,
                       bpf_object *obj,
                       const std::function<CountedLosses(prometheus::Exposition &)> &collect) {
    Exporter exporter(
        *prom.listen, std::string(tool),
        [&](prometheus::Exposition &out) {
            const CountedLosses lost = collect(out);
            prometheus::loss_metrics(out, lost.dropped_events, lost.table_full);
            prometheus::self_metrics(out, tool, probes, obj);
        },
        prom.web.value_or(WebConfig{}));
    serve_until_stopped(tool, exporter, common, sleep_for);
    return 0;
}

} // namespace memlat
