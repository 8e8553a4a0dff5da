// TLS for the exporter (--web.config.file's tls_server_config), with mbedTLS: a server
// configuration made once from the certificate and key files, and a session per connection
// that reads and writes its socket without blocking (tls_stream.h drives it from Asio). A
// build without mbedTLS (-DMEMLAT_TLS=OFF) refuses a TLS configuration, saying so.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace memlat {

// What a TLS call did: finished (Done), or needs the socket readable or writable before it is
// called again, or the peer closed the session, or the session failed.
enum class TlsIo { Done, WantRead, WantWrite, Closed, Failed };

class TlsServer {
  public:
    // Reads the PEM certificate (chain) and key; a RuntimeError names the file and mbedTLS's
    // reason when either cannot be used.
    TlsServer(const std::string &cert_file, const std::string &key_file);
    ~TlsServer();
    TlsServer(const TlsServer &) = delete;
    TlsServer &operator=(const TlsServer &) = delete;

    struct State; // mbedTLS's contexts, out of this header

  private:
    friend class TlsSession;
    std::unique_ptr<State> state_;
};

class TlsSession {
  public:
    // A server session on the connected socket `fd` (not owned).
    TlsSession(TlsServer &server, int fd);
    ~TlsSession();
    TlsSession(const TlsSession &) = delete;
    TlsSession &operator=(const TlsSession &) = delete;

    TlsIo handshake();
    TlsIo read(void *data, size_t size, size_t &read);
    TlsIo write(const void *data, size_t size, size_t &written);
    // Tells the peer the session ends (once, without waiting).
    void close_notify();

    struct State;

  private:
    std::unique_ptr<State> state_;
};

} // namespace memlat
