// The exporter's connection as Beast reads and writes it: the TCP socket itself, or, once
// start_tls() is called, a TLS session over it (tls.h). Asio has TLS only through OpenSSL,
// whose static libraries would not fit the binary's budget; this is the small part of its
// ssl::stream the exporter needs: a handshake, then reads and writes that wait for the
// socket on the event loop whenever mbedTLS asks (it never blocks the loop). A build without
// TLS (-DMEMLAT_TLS=OFF) uses the socket as it is, and costs no more than it did.
#pragma once

#include <cerrno>
#include <optional>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>

#include "prometheus/tls.h"

namespace memlat {

#ifdef MEMLAT_TLS

class HttpStream {
  public:
    using socket_type = boost::asio::ip::tcp::socket;
    using executor_type = socket_type::executor_type;

    explicit HttpStream(boost::asio::io_context &io) : socket_(io) {}

    socket_type &socket() { return socket_; }
    executor_type get_executor() { return socket_.get_executor(); }

    // From now on, everything goes through TLS (after the accept).
    void start_tls(TlsServer &server) { tls_.emplace(server, socket_.native_handle()); }
    // Tells a TLS peer the session ends (plain TCP: nothing to say).
    void close_notify() {
        if (tls_)
            tls_->close_notify();
    }

    // handler(error_code): the TLS handshake is done (at once without TLS).
    template <class Handler>
    void async_handshake(Handler handler) {
        if (!tls_) {
            boost::asio::post(get_executor(), [handler = std::move(handler)]() mutable {
                handler(boost::system::error_code{});
            });
            return;
        }
        drive([this](size_t &) { return tls_->handshake(); },
              [handler = std::move(handler)](boost::system::error_code error, size_t) mutable {
                  handler(error);
              });
    }

    template <class Buffers, class Token>
    auto async_read_some(const Buffers &buffers, Token &&token) {
        return boost::asio::async_initiate<Token, void(boost::system::error_code, size_t)>(
            [this](auto handler, const Buffers &buffers) {
                if (!tls_)
                    return socket_.async_read_some(buffers, std::move(handler));
                const boost::asio::mutable_buffer b = first(buffers);
                drive([this, b](size_t &n) { return tls_->read(b.data(), b.size(), n); },
                      std::move(handler));
            },
            token, buffers);
    }

    template <class Buffers, class Token>
    auto async_write_some(const Buffers &buffers, Token &&token) {
        return boost::asio::async_initiate<Token, void(boost::system::error_code, size_t)>(
            [this](auto handler, const Buffers &buffers) {
                if (!tls_)
                    return socket_.async_write_some(buffers, std::move(handler));
                const boost::asio::const_buffer b = first(buffers);
                drive([this, b](size_t &n) { return tls_->write(b.data(), b.size(), n); },
                      std::move(handler));
            },
            token, buffers);
    }

  private:
    // The first non-empty buffer of a sequence: one TLS record call takes one buffer.
    template <class Buffers>
    static auto first(const Buffers &buffers) {
        auto it = boost::asio::buffer_sequence_begin(buffers);
        const auto end = boost::asio::buffer_sequence_end(buffers);
        using Buffer = std::decay_t<decltype(*it)>;
        for (; it != end; ++it)
            if (Buffer(*it).size() > 0)
                return Buffer(*it);
        return Buffer();
    }

    // Calls `attempt` (a TLS call) until it is done, waiting for the socket to be readable or
    // writable as it asks; then handler(error, bytes), never from inside this call.
    template <class Attempt, class Handler>
    void drive(Attempt attempt, Handler handler) {
        size_t n = 0;
        const TlsIo io = attempt(n);
        if (io == TlsIo::WantRead || io == TlsIo::WantWrite) {
            socket_.async_wait(
                io == TlsIo::WantRead ? socket_type::wait_read : socket_type::wait_write,
                [this, attempt,
                 handler = std::move(handler)](boost::system::error_code error) mutable {
                    if (error)
                        handler(error, size_t{0});
                    else
                        drive(attempt, std::move(handler));
                });
            return;
        }
        boost::system::error_code error;
        if (io == TlsIo::Closed)
            error = boost::asio::error::eof;
        else if (io == TlsIo::Failed)
            error = boost::system::error_code(ECONNABORTED, boost::system::system_category());
        boost::asio::post(get_executor(), [handler = std::move(handler), error, n]() mutable {
            handler(error, n);
        });
    }

    socket_type socket_;
    std::optional<TlsSession> tls_;
};

#else

// A build without TLS: the stream is the socket itself, as Beast used it before (no
// configuration with TLS gets past read_web_config(), so start_tls() is never called).
class HttpStream : public boost::asio::ip::tcp::socket {
  public:
    using socket_type = boost::asio::ip::tcp::socket;
    using socket_type::basic_stream_socket;
    socket_type &socket() { return *this; }
    void start_tls(TlsServer &) {}
    void close_notify() {}
    template <class Handler>
    void async_handshake(Handler handler) {
        boost::asio::post(get_executor(), [handler = std::move(handler)]() mutable {
            handler(boost::system::error_code{});
        });
    }
};

#endif

} // namespace memlat
