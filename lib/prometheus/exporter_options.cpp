// The options every exporter shares (exporter.h): --prometheus, --web.config.file,
// --prometheus-labels and --max-series, and the checks of their combinations.
#include <fmt/format.h>

#include <algorithm>

#include "base/errors.h"
#include "cli/run_loop.h"
#include "prometheus/exporter.h"

namespace memlat {

bool PrometheusOptions::label(std::string_view name) const {
    return std::find(labels.begin(), labels.end(), name) != labels.end();
}

void add_listen_option(CommandLine &cli, PrometheusOptions &options) {
    cli.option(
        0, "prometheus", "[ADDR:]PORT",
        "Serve the counters and histograms as Prometheus metrics on ADDR:PORT "
        "(http://ADDR:PORT/metrics; no ADDR: every address) instead of printing "
        "them; runs until SIGTERM or Ctrl-C",
        [&options](const std::string &text) { options.listen = parse_listen_address(text); });
    add_web_config_option(cli, options.web);
    add_bpf_stats_option(cli, options.bpf_stats);
}

void add_bpf_stats_option(CommandLine &cli, bool &bpf_stats) {
    cli.flag(0, "bpf-stats",
             "Also export the run time and runs of the BPF programs (a tool: with "
             "--prometheus); meanwhile the kernel times every BPF program of the host (two "
             "clock reads per run), without kernel.bpf_stats_enabled; needs CAP_SYS_ADMIN",
             bpf_stats);
}

void add_web_config_option(CommandLine &cli, std::optional<WebConfig> &web) {
    cli.option(0, "web.config.file", "FILE",
               "Serve HTTPS and ask for a user and password as FILE says (the Prometheus "
               "exporter-toolkit's format: tls_server_config, basic_auth_users; builds made "
               "with cmake -DMEMLAT_TLS=ON)",
               [&web](const std::string &path) { web = read_web_config(path); });
}

void add_series_options(CommandLine &cli, PrometheusOptions &options,
                        std::vector<std::string> allowed, std::string_view capped) {
    std::string names;
    for (const auto &a : allowed)
        names += (names.empty() ? "" : ", ") + a;
    if (!allowed.empty())
        cli.option(0, "prometheus-labels", "LIST",
                   fmt::format("With --prometheus: also label counts by these (one series per "
                               "value, at most --max-series): {}",
                               names),
                   [&options, allowed](const std::string &text) {
                       for (const auto &name : split_list(text, "--prometheus-labels")) {
                           if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
                               std::string known;
                               for (const auto &a : allowed)
                                   known += (known.empty() ? "" : ", ") + a;
                               throw UsageError(
                                   fmt::format("--prometheus-labels: unknown label '{}'; this "
                                               "tool has: {}",
                                               name, known));
                           }
                           options.labels.push_back(name);
                       }
                   });
    cli.option(0, "max-series", "N",
               fmt::format("With --prometheus: at most N series per metric for {}; counts "
                           "beyond go to a series labelled \"other\" (default 1000)",
                           capped),
               [&options](const std::string &text) {
                   options.max_series = parse_number<size_t>(text, "--max-series");
                   options.max_series_given = true;
                   if (options.max_series == 0)
                       throw UsageError("--max-series must be at least 1");
               });
}

void check_prometheus_options(const PrometheusOptions &options, const CommonOptions &common) {
    if (!options.on()) {
        if (!options.labels.empty())
            throw UsageError("--prometheus-labels goes with --prometheus");
        if (options.max_series_given)
            throw UsageError("--max-series goes with --prometheus (it bounds the series of "
                             "--prometheus-labels)");
        if (options.web)
            throw UsageError("--web.config.file goes with --prometheus");
        if (options.bpf_stats)
            throw UsageError("--bpf-stats goes with --prometheus (it exports the numbers)");
        require_stdout();
        return;
    }
    if (common.json)
        throw UsageError("--prometheus serves metrics instead of printing; it takes no -j");
    if (common.timestamp)
        throw UsageError("--prometheus serves metrics instead of printing; it takes no -T (the "
                         "scraper times each sample)");
    if (common.interval > 0)
        throw UsageError("--prometheus serves totals at each scrape; it takes no interval");
}

} // namespace memlat
