// --prometheus [ADDR:]PORT: the HTTP server that lets Prometheus scrape a tool. It serves
// GET /metrics (the exposition the tool's collect function builds at each scrape) and a `/`
// page that links it, one request per connection, every connection at once on an Asio event
// loop in a thread of its own, with a cap on connections and deadlines for each (exporter.cpp
// says which); HTTP parsing is Boost.Beast's (docs/exporter.md, "The HTTP server", says why).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli/options.h"
#include "prometheus/listen_address.h"
#include "prometheus/prometheus.h"
#include "prometheus/web_config.h"

namespace memlat {

// The options every exporter shares, set by add_listen_option() and add_series_options().
struct PrometheusOptions {
    std::optional<ListenAddress> listen; // --prometheus; none: the tool prints text
    std::vector<std::string> labels;     // --prometheus-labels
    size_t max_series = 1000;            // --max-series
    bool max_series_given = false;       // a usage error without --prometheus
    std::optional<WebConfig> web;        // --web.config.file: TLS, basic auth
    bool bpf_stats = false;              // --bpf-stats: BPF_ENABLE_STATS while serving
    bool on() const { return listen.has_value(); }
    bool label(std::string_view name) const;
};

// Adds --prometheus [ADDR:]PORT, --web.config.file FILE and --bpf-stats.
void add_listen_option(CommandLine &cli, PrometheusOptions &options);
// Adds --bpf-stats: the run time and runs of the tools' BPF programs, exported.
void add_bpf_stats_option(CommandLine &cli, bool &bpf_stats);
// Adds --web.config.file FILE (TLS and basic authentication, web_config.h) to `web`.
void add_web_config_option(CommandLine &cli, std::optional<WebConfig> &web);
// Adds --prometheus-labels (from `allowed`, e.g. {"comm"}) and --max-series: what a tool's
// metrics take, served by the tool (--prometheus) or by `memlat exporter`. `capped` says what
// --max-series bounds where it is not the labels of --prometheus-labels.
void add_series_options(CommandLine &cli, PrometheusOptions &options,
                        std::vector<std::string> allowed,
                        std::string_view capped = "the labels of --prometheus-labels");
// A UsageError when --prometheus-labels or --max-series was given without --prometheus, or
// --prometheus with -j or an interval (which shape the text output); a RuntimeError when the
// tool prints and stdout is closed (require_stdout).
void check_prometheus_options(const PrometheusOptions &options, const CommonOptions &common);

// A profile served on request at /debug/pprof/NAME?seconds=N (memstall's stall profile), as
// the continuous profilers scrape Go's /debug/pprof/profile: counting begins with the
// request, and the answer is the profile of the N seconds that follow.
class ProfileSource {
  public:
    virtual ~ProfileSource() = default;
    // Begins counting; on the server's thread, so quick.
    virtual void begin() = 0;
    // Ends counting and returns the profile since begin() as pprof's gzip-compressed
    // profile.proto. On a thread of its own (symbolizing takes time); an exception answers
    // 500 with its message.
    virtual std::string end() = 0;
};
// The profiles an exporter serves, by NAME.
using ProfileSources = std::vector<std::pair<std::string, ProfileSource *>>;

class Exporter {
  public:
    using Collect = std::function<void(prometheus::Exposition &)>;
    // Binds (a RuntimeError when the port is taken or the address is not the machine's, or
    // `web`'s certificate cannot be used) and starts serving, over TLS and to `web`'s users
    // only when it has them; `collect` runs on the server's thread at each scrape of /metrics.
    // `profiles` are served at /debug/pprof/NAME, one profile at a time, each for 1 to
    // max_profile_seconds (default default_profile_seconds).
    Exporter(const ListenAddress &where, std::string tool, Collect collect,
             const WebConfig &web = {}, ProfileSources profiles = {});
    static constexpr int max_profile_seconds = 300;
    static constexpr int default_profile_seconds = 30;
    Exporter(const Exporter &) = delete;
    Exporter &operator=(const Exporter &) = delete;
    // Stops serving: closes the listening socket and every connection.
    ~Exporter();
    // The bound address (the port the kernel chose when PORT was 0).
    ListenAddress bound() const;
    // Whether it serves HTTPS (--web.config.file's tls_server_config).
    bool tls() const;

    class Server; // Boost.Beast stays out of this header

  private:
    std::unique_ptr<Server> server_;
    std::thread thread_;
};

// The main loop of a tool in --prometheus mode, called once its programs are attached: drops
// every capability (the server's thread drops its own when it starts), says where it serves
// (stderr), announces
// tracing and waits for SIGINT, SIGTERM or -d. `wait` is the tool's usual wait (polling its
// events, or sleeping).
void serve_until_stopped(std::string_view tool, const Exporter &exporter,
                         const CommonOptions &common,
                         const std::function<void(std::chrono::milliseconds)> &wait);

} // namespace memlat
