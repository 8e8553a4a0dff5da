#include "prometheus/exporter.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fmt/format.h>
#include <future>
#include <list>
#include <pthread.h>
#include <sys/socket.h>
#include <variant>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "base/capabilities.h"
#include "base/errors.h"
#include "base/parsing.h"
#include "cli/run_loop.h"
#include "prometheus/tls_stream.h"

namespace memlat {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

using Clock = std::chrono::steady_clock;

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

    // How long a profile may take to build once its seconds are over (symbolizing).
    static constexpr auto kProfileBuildTime = std::chrono::seconds(60);

    Server(const ListenAddress &where, std::string tool, Collect collect, const WebConfig &web,
           ProfileSources profiles)
        : tool_(std::move(tool)), collect_(std::move(collect)), web_(web),
          profiles_(std::move(profiles)), acceptor_(io_), sweep_(io_), profile_timer_(io_) {
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
        // A profile being built reads its tool's maps: done before the tool goes.
        if (profile_worker_.joinable())
            profile_worker_.join();
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
            plain(res, http::status::bad_request,
                  fmt::format("Bad request: {}\n", error.message()));
        } else if (respond(c)) {
            return; // a profile: answered when its seconds are over
        }
        write_response(c);
    }

    void write_response(const ConnectionPtr &c) {
        auto &res = c->response;
        res.keep_alive(false);
        res.prepare_payload();
        if (c->parser.get().method() == http::verb::head) {
            // The headers of the GET, Content-Length included, and no body (RFC 9110 9.3.2).
            const auto length = res.body().size();
            res.body().clear();
            res.content_length(length);
        }
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

    static void plain(http::response<http::string_body> &res, http::status status,
                      std::string body) {
        res.result(status);
        res.set(http::field::content_type, "text/plain; charset=utf-8");
        res.body() = std::move(body);
    }

    // The seconds a profile request asks for ("seconds=N" in its query), or why they are
    // refused.
    static std::variant<int, std::string> profile_seconds(std::string_view query) {
        int seconds = Exporter::default_profile_seconds;
        while (!query.empty()) {
            const auto amp = query.find('&');
            const std::string_view param = query.substr(0, amp);
            query = amp == std::string_view::npos ? "" : query.substr(amp + 1);
            if (!param.starts_with("seconds="))
                continue;
            const std::string_view value = param.substr(8);
            int parsed = 0;
            try {
                parsed = parse_number<int>(value, "seconds");
            } catch (const UsageError &) {
                parsed = 0; // refused below, with the limit
            }
            if (parsed < 1 || parsed > Exporter::max_profile_seconds)
                return fmt::format("seconds must be a whole number from 1 to {} (the limit of "
                                   "one profile's time); got '{}'",
                                   Exporter::max_profile_seconds, value);
            seconds = parsed;
        }
        return seconds;
    }

    // GET /debug/pprof/NAME: begins the profile, and answers when its seconds are over (true),
    // or answers now (false): its time out of range, or another profile being taken.
    bool begin_profile(const ConnectionPtr &c, ProfileSource &source, std::string_view query) {
        auto &res = c->response;
        const auto seconds = profile_seconds(query);
        if (const auto *why = std::get_if<std::string>(&seconds)) {
            plain(res, http::status::bad_request, *why + "\n");
            return false;
        }
        if (profiling_) {
            const auto left = std::chrono::ceil<std::chrono::seconds>(profile_ends_ - Clock::now());
            res.set(http::field::retry_after, std::to_string(std::max<int64_t>(1, left.count())));
            plain(res, http::status::too_many_requests,
                  fmt::format("one profile at a time: another is being taken, for {} s more\n",
                              std::max<int64_t>(0, left.count())));
            return false;
        }
        try {
            source.begin();
        } catch (const std::exception &e) {
            plain(res, http::status::internal_server_error,
                  fmt::format("cannot begin the profile: {}\n", e.what()));
            return false;
        }
        const int n = std::get<int>(seconds);
        profiling_ = true;
        profile_ends_ = Clock::now() + std::chrono::seconds(n);
        c->answering = true; // never closed to make room: it has sent its request
        c->deadline = profile_ends_ + kProfileBuildTime + kResponseTime;
        profile_timer_.expires_after(std::chrono::seconds(n));
        profile_timer_.async_wait([this, c, &source](boost::system::error_code error) {
            if (error)
                return;
            if (profile_worker_.joinable())
                profile_worker_.join();
            profile_worker_ = std::thread([this, c, &source] {
                std::string body, failure;
                try {
                    body = source.end();
                } catch (const std::exception &e) {
                    failure = e.what();
                }
                asio::post(io_, [this, c, body = std::move(body), failure = std::move(failure)] {
                    profiling_ = false;
                    if (c->closed)
                        return;
                    auto &res = c->response;
                    if (!failure.empty()) {
                        plain(res, http::status::internal_server_error,
                              fmt::format("cannot build the profile: {}\n", failure));
                    } else {
                        res.result(http::status::ok);
                        res.set(http::field::content_type, "application/octet-stream");
                        res.set(http::field::content_disposition,
                                "attachment; filename=\"profile\"");
                        res.body() = body;
                    }
                    write_response(c);
                });
            });
        });
        return true;
    }

    // Fills the connection's response; true when it is a profile's, written later.
    bool respond(const ConnectionPtr &c) {
        const auto &req = c->parser.get();
        auto &res = c->response;
        res.version(req.version());
        res.set(http::field::server, "memlat");
        if (!web_.auth().allows(req[http::field::authorization])) { // --web.config.file's users
            res.result(http::status::unauthorized);
            res.set(http::field::www_authenticate, "Basic realm=\"memlat\"");
            res.body() = "Unauthorized\n";
            return false;
        }
        const bool head = req.method() == http::verb::head;
        if (req.method() != http::verb::get && !head) {
            res.set(http::field::allow, "GET, HEAD");
            plain(res, http::status::method_not_allowed, "Only GET and HEAD are served.\n");
            return false;
        }
        std::string_view target = req.target();
        const auto question = target.find('?');
        const std::string_view query =
            question == std::string_view::npos ? "" : target.substr(question + 1);
        target = target.substr(0, question);
        for (auto &[name, source] : profiles_) {
            if (target != "/debug/pprof/" + name)
                continue;
            if (head) { // a HEAD would take a profile for nothing
                res.set(http::field::allow, "GET");
                plain(res, http::status::method_not_allowed,
                      "A profile is taken by GET only: HEAD would take one for nothing.\n");
                return false;
            }
            return begin_profile(c, *source, query);
        }
        if (target == "/metrics") {
            const auto format = prometheus::negotiate(req[http::field::accept]);
            try {
                prometheus::Exposition exposition;
                collect_(exposition);
                res.body() = exposition.render(format);
                res.set(http::field::content_type, prometheus::content_type(format));
            } catch (const std::exception &e) {
                plain(res, http::status::internal_server_error,
                      fmt::format("{}: cannot read the counters: {}\n", tool_, e.what()));
            }
        } else if (target == "/") {
            res.set(http::field::content_type, "text/html; charset=utf-8");
            res.body() =
                fmt::format("<!DOCTYPE html>\n<html><head><title>memlat {0}</title></head>\n<body>"
                            "<h1>memlat {0}</h1>\n<p>Prometheus exporter of the memlat tool {0}: "
                            "<a href=\"/metrics\">/metrics</a></p>{1}</body></html>\n",
                            tool_, profile_links());
        } else {
            plain(res, http::status::not_found, "Not found: the metrics are at /metrics\n");
        }
        return false;
    }

    std::string profile_links() const {
        std::string links;
        for (const auto &[name, source] : profiles_)
            links += fmt::format("\n<p>Profile of {0} (pprof, ?seconds=N, 1 to {1}): <a "
                                 "href=\"/debug/pprof/{0}\">/debug/pprof/{0}</a></p>",
                                 name, Exporter::max_profile_seconds);
        return links;
    }

    std::string tool_;
    Collect collect_;
    WebAccess web_;
    ProfileSources profiles_;
    bool profiling_ = false; // a profile is being taken or built
    Clock::time_point profile_ends_;
    ListenAddress bound_;
    asio::io_context io_{1};
    tcp::acceptor acceptor_;
    asio::steady_timer sweep_;
    std::optional<asio::steady_timer> retry_;
    asio::steady_timer profile_timer_;
    std::thread profile_worker_;           // builds the profile whose seconds are over
    std::list<ConnectionPtr> connections_; // oldest first
};

Exporter::Exporter(const ListenAddress &where, std::string tool, Collect collect,
                   const WebConfig &web, ProfileSources profiles)
    : server_(std::make_unique<Server>(where, std::move(tool), std::move(collect), web,
                                       std::move(profiles))) {
    // SIGINT and SIGTERM are the main thread's (they stop the tool): the server's thread
    // blocks them, and inherits that mask from here.
    sigset_t stop_signals, before;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, &before);
    // The server answers clients without any capability; the constructor returns once it has
    // dropped them, so that nothing after it (the line saying where it serves) sees a thread
    // that still holds them.
    std::promise<void> dropped;
    std::future<void> server_ready = dropped.get_future();
    thread_ = std::thread([server = server_.get(), &dropped] {
        drop_capabilities();
        dropped.set_value();
        server->serve();
    });
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    server_ready.wait();
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
    // Dropped before the line that says where it serves: a client that reads that line (the
    // tests do) finds no thread holding a capability.
    const std::string kept = drop_capabilities();
    fmt::print(stderr, "{}: serving Prometheus metrics on {}://{}/metrics\n", tool,
               exporter.tls() ? "https" : "http", exporter.bound().describe());
    if (kept.empty())
        verbose(common.verbosity(), "every capability dropped: the programs are attached, and "
                                    "reading their maps needs none");
    else
        verbose(common.verbosity(),
                fmt::format("every capability dropped but {}: this kernel refuses bpf() to a "
                            "process without it while kernel.unprivileged_bpf_disabled is set, "
                            "and the maps are read through bpf()",
                            kept));
    announce_tracing("Counting for Prometheus...");
    CommonOptions run = common;
    run.interval = 0;
    run_until_stopped(run, wait, [] {});
}

} // namespace memlat
