// A tool's --prometheus mode: its own families, then what every tool exports about its losses
// and itself, served until a stop signal or -d.
#pragma once

#include <bpf/libbpf.h>

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "exporter.h"
#include "hooks.h"
#include "options.h"
#include "prometheus.h"

namespace memlat {

// What the BPF side lost, as it counted: events it could not submit, entries that found a
// table full.
struct CountedLosses {
    uint64_t dropped_events = 0;
    uint64_t table_full = 0;
};

// Serves /metrics until stopped: at each scrape `collect` writes the tool's families and
// returns its losses; the loss metrics and the self metrics (hooks chosen, BPF program stats
// of `obj`) follow. Returns the tool's exit status.
int serve_tool_metrics(std::string_view tool, const PrometheusOptions &prom,
                       const CommonOptions &common, const std::vector<Probe> &probes,
                       bpf_object *obj,
                       const std::function<CountedLosses(prometheus::Exposition &)> &collect);

} // namespace memlat
