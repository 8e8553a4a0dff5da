#include "exporter.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fmt/format.h>
#include <mutex>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "errors.h"
#include "run_loop.h"

namespace memlat {

namespace asio = boost::asio;
namespace http = boost::beast::http;

std::string ListenAddress::describe() const {
    if (host.empty())
        return fmt::format("*:{}", port);
    if (host.find(':') != std::string::npos)
        return fmt::format("[{}]:{}", host, port);
    return fmt::format("{}:{}", host, port);
}

ListenAddress parse_listen_address(std::string_view text) {
    ListenAddress where;
    std::string_view host, port = text;
    if (text.starts_with('[')) {
        auto close = text.find(']');
        if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
            throw UsageError(
                fmt::format("--prometheus '{}': an IPv6 address goes in brackets, then :PORT (e.g. "
                            "[::1]:9847)",
                            text));
        host = text.substr(1, close - 1);
        port = text.substr(close + 2);
    } else if (auto colon = text.rfind(':'); colon != std::string_view::npos) {
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
        if (host.find(':') != std::string_view::npos)
            throw UsageError(fmt::format(
                "--prometheus '{}': put an IPv6 address in brackets (e.g. [::1]:9847)", text));
    }
    unsigned number = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), number);
    if (port.empty() || ec != std::errc{} || end != port.data() + port.size() || number > 65535)
        throw UsageError(fmt::format(
            "--prometheus '{}': the port must be a number from 0 to 65535, not '{}'", text, port));
    where.port = static_cast<uint16_t>(number);
    if (host == "localhost")
        host = "127.0.0.1";
    if (!host.empty()) {
        const std::string h(host);
        unsigned char address[sizeof(in6_addr)];
        const int family = h.find(':') != std::string::npos ? AF_INET6 : AF_INET;
        if (inet_pton(family, h.c_str(), address) != 1)
            throw UsageError(fmt::format("--prometheus '{}': '{}' is not an IP address (give "
                                         "one, e.g. 127.0.0.1:9847, or only :PORT for all)",
                                         text, host));
        // The canonical spelling, as the kernel would print it.
        char text[INET6_ADDRSTRLEN];
        inet_ntop(family, address, text, sizeof(text));
        where.host = text;
    }
    return where;
}

bool PrometheusOptions::label(std::string_view name) const {
    return std::find(labels.begin(), labels.end(), name) != labels.end();
}

void add_prometheus_options(CommandLine &cli, PrometheusOptions &options,
                            std::vector<std::string> allowed) {
    cli.option(
        0, "prometheus", "[ADDR:]PORT",
        "Serve the counters and histograms as Prometheus metrics on ADDR:PORT "
        "(http://ADDR:PORT/metrics; no ADDR: every address) instead of printing "
        "them; runs until SIGTERM or Ctrl-C",
        [&options](const std::string &text) { options.listen = parse_listen_address(text); });
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

// A connected socket as Beast's synchronous stream: Beast parses and writes the HTTP, this
// moves the bytes. (Asio's own socket would bring its reactor and scheduler, about 100 KB of
// every static binary, for a server that needs neither.)
class SocketStream {
  public:
    explicit SocketStream(int fd) : fd_(fd) {}

    template <typename Buffers>
    size_t read_some(const Buffers &buffers, boost::system::error_code &error) {
        for (auto it = asio::buffer_sequence_begin(buffers);
             it != asio::buffer_sequence_end(buffers); ++it) {
            asio::mutable_buffer b = *it;
            if (b.size() == 0)
                continue;
            ssize_t n;
            do
                n = ::recv(fd_, b.data(), b.size(), 0);
            while (n < 0 && errno == EINTR);
            if (n < 0)
                error.assign(errno, boost::system::system_category());
            else if (n == 0)
                error = asio::error::eof;
            else
                error = {};
            return n > 0 ? static_cast<size_t>(n) : 0;
        }
        error = {};
        return 0;
    }
    template <typename Buffers>
    size_t read_some(const Buffers &buffers) {
        boost::system::error_code error;
        size_t n = read_some(buffers, error);
        if (error)
            throw boost::system::system_error(error);
        return n;
    }

    template <typename Buffers>
    size_t write_some(const Buffers &buffers, boost::system::error_code &error) {
        for (auto it = asio::buffer_sequence_begin(buffers);
             it != asio::buffer_sequence_end(buffers); ++it) {
            asio::const_buffer b = *it;
            if (b.size() == 0)
                continue;
            ssize_t n;
            do
                n = ::send(fd_, b.data(), b.size(), MSG_NOSIGNAL);
            while (n < 0 && errno == EINTR);
            if (n < 0) {
                error.assign(errno, boost::system::system_category());
                return 0;
            }
            error = {};
            return static_cast<size_t>(n);
        }
        error = {};
        return 0;
    }
    template <typename Buffers>
    size_t write_some(const Buffers &buffers) {
        boost::system::error_code error;
        size_t n = write_some(buffers, error);
        if (error)
            throw boost::system::system_error(error);
        return n;
    }

  private:
    int fd_;
};

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

struct Fd {
    int fd = -1;
    explicit Fd(int f) : fd(f) {}
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    ~Fd() {
        if (fd >= 0)
            close(fd);
    }
};

} // namespace

// One listening socket and a loop that answers one request per connection.
class Exporter::Server {
  public:
    Server(const ListenAddress &where, std::string tool, Collect collect)
        : tool_(std::move(tool)), collect_(std::move(collect)) {
        SocketAddress address = socket_address(where, false);
        listener_ = socket(address.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (listener_ < 0 && where.host.empty() && errno == EAFNOSUPPORT) {
            // A kernel without IPv6: every IPv4 address.
            address = socket_address(where, true);
            listener_ = socket(address.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        }
        if (listener_ < 0)
            throw RuntimeError(fmt::format("--prometheus {}: cannot open a socket: {}",
                                           where.describe(), strerror(errno)));
        const int on = 1, off = 0;
        setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
        if (address.family == AF_INET6 && where.host.empty())
            setsockopt(listener_, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
        if (bind(listener_, reinterpret_cast<sockaddr *>(&address.storage), address.length) != 0) {
            const int err = errno;
            close(listener_);
            if (err == EADDRINUSE)
                throw RuntimeError(fmt::format("--prometheus {}: the port is in use (another "
                                               "exporter on it?); choose another port",
                                               where.describe()));
            throw RuntimeError(
                fmt::format("--prometheus {}: cannot listen there: {}", where.describe(),
                            err == EADDRNOTAVAIL ? "no interface of this machine has that address"
                                                 : strerror(err)));
        }
        if (listen(listener_, 64) != 0) {
            const int err = errno;
            close(listener_);
            throw RuntimeError(
                fmt::format("--prometheus {}: cannot listen: {}", where.describe(), strerror(err)));
        }
        sockaddr_storage local{};
        socklen_t length = sizeof(local);
        getsockname(listener_, reinterpret_cast<sockaddr *>(&local), &length);
        bound_.host = where.host;
        bound_.port =
            ntohs(local.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6 *>(&local)->sin6_port
                                              : reinterpret_cast<sockaddr_in *>(&local)->sin_port);
    }
    Server(const Server &) = delete;
    Server &operator=(const Server &) = delete;
    ~Server() { close(listener_); }

    void serve() {
        while (!stopping_) {
            Fd client(accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC));
            if (stopping_)
                return;
            if (client.fd < 0) {
                // Out of descriptors or memory: wait instead of spinning, then try again. A
                // connection that went away before it was accepted is simply skipped.
                if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                    poll(nullptr, 0, 100);
                continue;
            }
            {
                std::lock_guard lock(mutex_);
                client_ = client.fd;
            }
            answer(client.fd);
            std::lock_guard lock(mutex_);
            client_ = -1;
        }
    }

    void stop() {
        stopping_ = true;
        std::lock_guard lock(mutex_);
        // shutdown() wakes a thread blocked in accept() or in a read on these sockets.
        ::shutdown(listener_, SHUT_RDWR);
        if (client_ >= 0)
            ::shutdown(client_, SHUT_RDWR);
    }

    ListenAddress bound() const { return bound_; }

  private:
    void answer(int fd) {
        // A client that stops sending or reading must not hold the only server thread.
        timeval timeout{5, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
        SocketStream stream(fd);
        boost::beast::flat_buffer buffer;
        http::request_parser<http::empty_body> parser;
        parser.header_limit(16 * 1024);
        parser.body_limit(0);
        boost::system::error_code error;
        http::read(stream, buffer, parser, error);
        http::response<http::string_body> res;
        if (error) {
            if (error == http::error::end_of_stream || error == asio::error::eof || stopping_ ||
                error.category() == boost::system::system_category())
                return; // the client went away, timed out, or the tool is stopping
            res.result(http::status::bad_request);
            res.set(http::field::content_type, "text/plain; charset=utf-8");
            res.body() = fmt::format("Bad request: {}\n", error.message());
        } else {
            res = respond(parser.get());
        }
        res.keep_alive(false);
        res.prepare_payload();
        http::write(stream, res, error);
        ::shutdown(fd, SHUT_WR);
    }

    http::response<http::string_body> respond(const http::request<http::empty_body> &req) {
        http::response<http::string_body> res;
        res.version(req.version());
        res.set(http::field::server, "memlat");
        if (req.method() != http::verb::get) {
            res.result(http::status::method_not_allowed);
            res.set(http::field::allow, "GET");
            res.set(http::field::content_type, "text/plain; charset=utf-8");
            res.body() = "Only GET is served.\n";
            return res;
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
        return res;
    }

    std::string tool_;
    Collect collect_;
    int listener_ = -1;
    ListenAddress bound_;
    std::atomic<bool> stopping_{false};
    std::mutex mutex_;
    int client_ = -1;
};

Exporter::Exporter(const ListenAddress &where, std::string tool, Collect collect)
    : server_(std::make_unique<Server>(where, std::move(tool), std::move(collect))) {
    // SIGINT and SIGTERM are the main thread's (they stop the tool): the server's thread
    // blocks them, and inherits that mask from here.
    sigset_t stop_signals, before;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, &before);
    thread_ = std::thread([server = server_.get()] { server->serve(); });
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

void serve_until_stopped(std::string_view tool, const Exporter &exporter,
                         const CommonOptions &common,
                         const std::function<void(std::chrono::milliseconds)> &wait) {
    fmt::print(stderr, "{}: serving Prometheus metrics on http://{}/metrics\n", tool,
               exporter.bound().describe());
    announce_tracing("Counting for Prometheus...");
    CommonOptions run = common;
    run.interval = 0;
    run_until_stopped(run, wait, [] {});
}

} // namespace memlat
