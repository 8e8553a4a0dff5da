#include "prometheus/exporter.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fmt/format.h>
#include <list>
#include <pthread.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "base/capabilities.h"
#include "base/errors.h"
#include "cli/run_loop.h"
#include "prometheus/tls_stream.h"

namespace memlat {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

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
}

void add_web_config_option(CommandLine &cli, std::optional<WebConfig> &web) {
    cli.option(0, "web.config.file", "FILE",
               "Serve HTTPS and ask for a user and password as FILE says (the Prometheus "
               "exporter-toolkit's format: tls_server_config, basic_auth_users; builds made "
               "with cmake -DMEMLAT_TLS=ON)",
               [&web](const std::string &path) { web = read_web_config(path); });
}

void add_series_options(CommandLine &cli, PrometheusOptions &options,
                        std::vector<std::string> allowed) {
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
               "With --prometheus: at most N series per metric for the labels of "
               "--prometheus-labels; counts beyond go to a series labelled \"other\" "
               "(default 1000)",
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

namespace {

// A socket address for `where`: IPv6 or IPv4 by the form of the host; every address is
// IPv6's any (which takes IPv4 too) unless `v4_any`.
struct SocketAddress {
    sockaddr_storage storage{};
    socklen_t length = 0;
    int family = AF_INET;
};

SocketAddress socket_address(const ListenAddress &where, bool v4_any) {
    SocketAddress a;
    if (where.host.empty() ? !v4_any : where.host.find(':') != std::string::npos) {
        auto *in6 = reinterpret_cast<sockaddr_in6 *>(&a.storage);
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(where.port);
        in6->sin6_addr = in6addr_any;
        if (!where.host.empty())
            inet_pton(AF_INET6, where.host.c_str(), &in6->sin6_addr);
        a.length = sizeof(*in6);
        a.family = AF_INET6;
    } else {
        auto *in = reinterpret_cast<sockaddr_in *>(&a.storage);
        in->sin_family = AF_INET;
        in->sin_port = htons(where.port);
        in->sin_addr.s_addr = htonl(INADDR_ANY);
        if (!where.host.empty())
            inet_pton(AF_INET, where.host.c_str(), &in->sin_addr);
        a.length = sizeof(*in);
        a.family = AF_INET;
    }
    return a;
}

// A listening socket on `where`, made by hand so that each failure gets its own message
// (Asio's acceptor then adopts it).
int open_listener(const ListenAddress &where) {
    SocketAddress address = socket_address(where, false);
    int listener = socket(address.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listener < 0 && where.host.empty() && errno == EAFNOSUPPORT) {
        // A kernel without IPv6: every IPv4 address.
        address = socket_address(where, true);
        listener = socket(address.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    }
    if (listener < 0)
        throw RuntimeError(fmt::format("--prometheus {}: cannot open a socket: {}",
                                       where.describe(), strerror(errno)));
    const int on = 1, off = 0;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (address.family == AF_INET6 && where.host.empty())
        setsockopt(listener, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    if (bind(listener, reinterpret_cast<sockaddr *>(&address.storage), address.length) != 0) {
        const int err = errno;
        close(listener);
        if (err == EADDRINUSE)
            throw RuntimeError(fmt::format("--prometheus {}: the port is in use (another "
                                           "exporter on it?); choose another port",
                                           where.describe()));
        throw RuntimeError(fmt::format("--prometheus {}: cannot listen there: {}", where.describe(),
                                       err == EADDRNOTAVAIL
                                           ? "no interface of this machine has that address"
                                           : strerror(err)));
    }
    if (listen(listener, SOMAXCONN) != 0) {
        const int err = errno;
        close(listener);
        throw RuntimeError(
            fmt::format("--prometheus {}: cannot listen: {}", where.describe(), strerror(err)));
    }
    return listener;
}

using Clock = std::chrono::steady_clock;

} // namespace

// The HTTP side, on one thread running an Asio event loop: every connection is served
// concurrently, so no client can hold up another. One request per connection (the response
// says Connection: close), which is all a Prometheus scrape needs.
//
// What a client can take, and for how long:
// - kMaxConnections open connections. At the cap a new connection closes the oldest one
//   still sending its request; refusing the new one instead would let anyone who holds the
//   cap's worth of idle connections turn every scrape away. A scraper sends its request as
//   soon as it connects, so it is never the oldest one waiting for long; only when every
//   connection is being answered is the new one refused.
// - kRequestTime from accept to the end of the request's header (a deadline for the whole
//   header, not per byte: a client sending one byte a second is dropped all the same), and
//   kResponseTime to take the response.
// - kHeaderLimit bytes of header; no body. A request Beast cannot parse, or beyond those
//   limits, is answered 400 Bad Request.
class Exporter::Server {
  public:
    static constexpr size_t kMaxConnections = 256;
    static constexpr auto kRequestTime = std::chrono::seconds(5);
    static constexpr auto kResponseTime = std::chrono::seconds(10);
    static constexpr uint32_t kHeaderLimit = 16 * 1024;

    Server(const ListenAddress &where, std::string tool, Collect collect, const WebConfig &web)
        : tool_(std::move(tool)), collect_(std::move(collect)), web_(web), acceptor_(io_),
          sweep_(io_) {
        const int listener = open_listener(where);
        sockaddr_storage local{};
        socklen_t length = sizeof(local);
        getsockname(listener, reinterpret_cast<sockaddr *>(&local), &length);
        const bool v6 = local.ss_family == AF_INET6;
        bound_.host = where.host;
        bound_.port = ntohs(v6 ? reinterpret_cast<sockaddr_in6 *>(&local)->sin6_port
                               : reinterpret_cast<sockaddr_in *>(&local)->sin_port);
        boost::system::error_code error;
        acceptor_.assign(v6 ? tcp::v6() : tcp::v4(), listener, error);
        if (error) {
            close(listener);
            throw RuntimeError(fmt::format("--prometheus {}: cannot serve: {}", where.describe(),
                                           error.message()));
        }
        accept();
        sweep();
    }
    Server(const Server &) = delete;
    Server &operator=(const Server &) = delete;
    ~Server() {
        // The loop has stopped: close every socket before the io_context goes.
        for (auto &c : connections_)
            c->stream.socket().close();
        connections_.clear();
        boost::system::error_code ignored;
        acceptor_.close(ignored);
    }

    void serve() { io_.run(); }
    // From another thread: the loop returns, and nothing is served from then on.
    void stop() { io_.stop(); }

    ListenAddress bound() const { return bound_; }
    bool tls() const { return web_.tls() != nullptr; }

  private:
    struct Connection {
        explicit Connection(asio::io_context &io) : stream(io) {}
        HttpStream stream; // the socket, or TLS over it (--web.config.file)
        boost::beast::flat_buffer buffer;
        http::request_parser<http::empty_body> parser;
        http::response<http::string_body> response;
        Clock::time_point deadline;
        bool answering = false; // the request is in; the response is being written
        bool closed = false;
    };
    using ConnectionPtr = std::shared_ptr<Connection>;

    void accept() {
        auto c = std::make_shared<Connection>(io_);
        acceptor_.async_accept(c->stream.socket(), [this, c](boost::system::error_code error) {
            if (error == asio::error::operation_aborted)
                return;
            if (error) {
                // Out of descriptors or memory: make room, wait a little instead of spinning,
                // then accept again. A connection gone before it was accepted is skipped.
                if (error == asio::error::no_descriptors || error.value() == ENFILE ||
                    error == asio::error::no_buffer_space || error == asio::error::no_memory) {
                    drop_oldest_waiting();
                    retry_.emplace(io_, std::chrono::milliseconds(100));
                    retry_->async_wait([this](boost::system::error_code e) {
                        if (!e)
                            accept();
                    });
                    return;
                }
                accept();
                return;
            }
            admit(c);
            accept();
        });
    }

    void admit(const ConnectionPtr &c) {
        if (connections_.size() >= kMaxConnections && !drop_oldest_waiting()) {
            boost::system::error_code ignored;
            c->stream.socket().close(ignored); // every connection is being answered: refuse
            return;
        }
        connections_.push_back(c);
        c->deadline = Clock::now() + kRequestTime;
        c->parser.header_limit(kHeaderLimit);
        c->parser.body_limit(0);
        if (web_.tls()) // the handshake is within the request's deadline
            c->stream.start_tls(*web_.tls());
        c->stream.async_handshake([this, c](boost::system::error_code error) {
            if (error)
                return read(c, error);
            http::async_read(
                c->stream, c->buffer, c->parser,
                [this, c](boost::system::error_code error, size_t) { read(c, error); });
        });
    }

    // Closes the connection that has waited longest for its request; false if none waits.
    bool drop_oldest_waiting() {
        for (auto &c : connections_)
            if (!c->answering) {
                finish(ConnectionPtr(c));
                return true;
            }
        return false;
    }

    void read(const ConnectionPtr &c, boost::system::error_code error) {
        if (c->closed)
            return;
        auto &res = c->response;
        if (error) {
            if (error == http::error::end_of_stream || error == asio::error::eof ||
                error.category() == boost::system::system_category()) {
                finish(c); // the client went away, or its time is up
                return;
            }
            res.version(11);
            res.result(http::status::bad_request);
            res.set(http::field::content_type, "text/plain; charset=utf-8");
            res.body() = fmt::format("Bad request: {}\n", error.message());
        } else {
            respond(c->parser.get(), res);
        }
        res.keep_alive(false);
        res.prepare_payload();
        c->answering = true;
        c->deadline = Clock::now() + kResponseTime;
        http::async_write(c->stream, res, [this, c](boost::system::error_code, size_t) {
            if (c->closed)
                return;
            boost::system::error_code ignored;
            c->stream.close_notify();
            c->stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
            finish(c);
        });
    }

    void finish(const ConnectionPtr &c) {
        if (c->closed)
            return;
        c->closed = true;
        boost::system::error_code ignored;
        c->stream.socket().close(ignored); // its pending read or write completes as aborted
        connections_.remove(c);
    }

    // Four times a second: close the connections past their deadline.
    void sweep() {
        sweep_.expires_after(std::chrono::milliseconds(250));
        sweep_.async_wait([this](boost::system::error_code error) {
            if (error)
                return;
            const auto now = Clock::now();
            std::vector<ConnectionPtr> late;
            for (auto &c : connections_)
                if (c->deadline <= now)
                    late.push_back(c);
            for (auto &c : late)
                finish(c);
            sweep();
        });
    }

    void respond(const http::request<http::empty_body> &req,
                 http::response<http::string_body> &res) {
        res.version(req.version());
        res.set(http::field::server, "memlat");
        if (!web_.auth().allows(req[http::field::authorization])) { // --web.config.file's users
            res.result(http::status::unauthorized);
            res.set(http::field::www_authenticate, "Basic realm=\"memlat\"");
            res.body() = "Unauthorized\n";
            return;
        }
        if (req.method() != http::verb::get) {
            res.result(http::status::method_not_allowed);
            res.set(http::field::allow, "GET");
            res.set(http::field::content_type, "text/plain; charset=utf-8");
            res.body() = "Only GET is served.\n";
            return;
        }
        std::string_view target = req.target();
        target = target.substr(0, target.find('?'));
        if (target == "/metrics") {
            const auto format = prometheus::negotiate(req[http::field::accept]);
            try {
                prometheus::Exposition exposition;
                collect_(exposition);
                res.body() = exposition.render(format);
                res.set(http::field::content_type, prometheus::content_type(format));
            } catch (const std::exception &e) {
                res.result(http::status::internal_server_error);
                res.set(http::field::content_type, "text/plain; charset=utf-8");
                res.body() = fmt::format("{}: cannot read the counters: {}\n", tool_, e.what());
            }
        } else if (target == "/") {
            res.set(http::field::content_type, "text/html; charset=utf-8");
            res.body() =
                fmt::format("<!DOCTYPE html>\n<html><head><title>memlat {0}</title></head>\n<body>"
                            "<h1>memlat {0}</h1>\n<p>Prometheus exporter of the memlat tool {0}: "
                            "<a href=\"/metrics\">/metrics</a></p></body></html>\n",
                            tool_);
        } else {
            res.result(http::status::not_found);
            res.set(http::field::content_type, "text/plain; charset=utf-8");
            res.body() = "Not found: the metrics are at /metrics\n";
        }
    }

    std::string tool_;
    Collect collect_;
    WebAccess web_;
    ListenAddress bound_;
    asio::io_context io_{1};
    tcp::acceptor acceptor_;
    asio::steady_timer sweep_;
    std::optional<asio::steady_timer> retry_;
    std::list<ConnectionPtr> connections_; // oldest first
};

Exporter::Exporter(const ListenAddress &where, std::string tool, Collect collect,
                   const WebConfig &web)
    : server_(std::make_unique<Server>(where, std::move(tool), std::move(collect), web)) {
    // SIGINT and SIGTERM are the main thread's (they stop the tool): the server's thread
    // blocks them, and inherits that mask from here.
    sigset_t stop_signals, before;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, &before);
    thread_ = std::thread([server = server_.get()] {
        drop_capabilities();
        server->serve();
    });
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

Exporter::~Exporter() {
    server_->stop();
    if (thread_.joinable())
        thread_.join();
}

ListenAddress Exporter::bound() const {
    return server_->bound();
}

bool Exporter::tls() const {
    return server_->tls();
}

void serve_until_stopped(std::string_view tool, const Exporter &exporter,
                         const CommonOptions &common,
                         const std::function<void(std::chrono::milliseconds)> &wait) {
    fmt::print(stderr, "{}: serving Prometheus metrics on {}://{}/metrics\n", tool,
               exporter.tls() ? "https" : "http", exporter.bound().describe());
    drop_capabilities();
    verbose(common.verbosity(), "every capability dropped: the programs are attached, and "
                                "reading their maps needs none");
    announce_tracing("Counting for Prometheus...");
    CommonOptions run = common;
    run.interval = 0;
    run_until_stopped(run, wait, [] {});
}

} // namespace memlat
