#include "prometheus/tls.h"

#include <fmt/format.h>

#include "base/errors.h"

#ifdef MEMLAT_TLS

#include <cerrno>
#include <sys/socket.h>
#include <utility>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

namespace memlat {

namespace {

std::string mbedtls_text(int code) {
    char text[160];
    mbedtls_strerror(code, text, sizeof(text));
    return text;
}

} // namespace

struct TlsServer::State {
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context random;
    mbedtls_x509_crt certificate;
    mbedtls_pk_context key;
    mbedtls_ssl_config config;

    State() {
        mbedtls_entropy_init(&entropy);
        mbedtls_ctr_drbg_init(&random);
        mbedtls_x509_crt_init(&certificate);
        mbedtls_pk_init(&key);
        mbedtls_ssl_config_init(&config);
    }
    ~State() {
        mbedtls_ssl_config_free(&config);
        mbedtls_pk_free(&key);
        mbedtls_x509_crt_free(&certificate);
        mbedtls_ctr_drbg_free(&random);
        mbedtls_entropy_free(&entropy);
    }
    State(const State &) = delete;
    State &operator=(const State &) = delete;
};

TlsServer::TlsServer(const std::string &cert_file, const std::string &key_file)
    : state_(std::make_unique<State>()) {
    State &s = *state_;
    static constexpr unsigned char kPersonalization[] = "memlat exporter";
    if (int err = mbedtls_ctr_drbg_seed(&s.random, mbedtls_entropy_func, &s.entropy,
                                        kPersonalization, sizeof(kPersonalization));
        err != 0)
        throw RuntimeError(fmt::format("TLS: no random numbers: {}", mbedtls_text(err)));
    if (int err = mbedtls_x509_crt_parse_file(&s.certificate, cert_file.c_str()); err != 0)
        throw RuntimeError(fmt::format("--web.config.file: the certificate {} cannot be used: {}",
                                       cert_file, mbedtls_text(err)));
    if (int err = mbedtls_pk_parse_keyfile(&s.key, key_file.c_str(), nullptr); err != 0)
        throw RuntimeError(fmt::format("--web.config.file: the key {} cannot be used: {}", key_file,
                                       mbedtls_text(err)));
    if (int err =
            mbedtls_ssl_config_defaults(&s.config, MBEDTLS_SSL_IS_SERVER,
                                        MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT);
        err != 0)
        throw RuntimeError(fmt::format("TLS: {}", mbedtls_text(err)));
    mbedtls_ssl_conf_rng(&s.config, mbedtls_ctr_drbg_random, &s.random);
    // TLS 1.2 at least, as the exporter-toolkit's default.
    mbedtls_ssl_conf_min_version(&s.config, MBEDTLS_SSL_MAJOR_VERSION_3,
                                 MBEDTLS_SSL_MINOR_VERSION_3);
    if (int err = mbedtls_ssl_conf_own_cert(&s.config, &s.certificate, &s.key); err != 0)
        throw RuntimeError(fmt::format("--web.config.file: {} and {} do not make a TLS "
                                       "identity: {}",
                                       cert_file, key_file, mbedtls_text(err)));
}

TlsServer::~TlsServer() = default;

struct TlsSession::State {
    int fd;
    mbedtls_ssl_context ssl;
    bool closing = false;

    explicit State(int socket) : fd(socket) { mbedtls_ssl_init(&ssl); }
    ~State() { mbedtls_ssl_free(&ssl); }
    State(const State &) = delete;
    State &operator=(const State &) = delete;

    // The socket never blocks here (MSG_DONTWAIT): "try again" goes back to Asio, which
    // waits for the socket on the event loop.
    static int send(void *self, const unsigned char *data, size_t size) {
        const ssize_t n =
            ::send(static_cast<State *>(self)->fd, data, size, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n >= 0)
            return static_cast<int>(n);
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return MBEDTLS_ERR_SSL_WANT_WRITE;
        return MBEDTLS_ERR_NET_SEND_FAILED;
    }
    static int receive(void *self, unsigned char *data, size_t size) {
        const ssize_t n = ::recv(static_cast<State *>(self)->fd, data, size, MSG_DONTWAIT);
        if (n >= 0)
            return static_cast<int>(n); // 0: the peer closed the connection
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return MBEDTLS_ERR_SSL_WANT_READ;
        return MBEDTLS_ERR_NET_RECV_FAILED;
    }

    static TlsIo outcome(int result) {
        if (result >= 0)
            return TlsIo::Done;
        if (result == MBEDTLS_ERR_SSL_WANT_READ)
            return TlsIo::WantRead;
        if (result == MBEDTLS_ERR_SSL_WANT_WRITE)
            return TlsIo::WantWrite;
        if (result == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY)
            return TlsIo::Closed;
        return TlsIo::Failed;
    }
};

TlsSession::TlsSession(TlsServer &server, int fd) : state_(std::make_unique<State>(fd)) {
    if (int err = mbedtls_ssl_setup(&state_->ssl, &server.state_->config); err != 0)
        throw RuntimeError(fmt::format("TLS session: {}", mbedtls_text(err)));
    mbedtls_ssl_set_bio(&state_->ssl, state_.get(), State::send, State::receive, nullptr);
}

TlsSession::~TlsSession() = default;

TlsIo TlsSession::handshake() {
    return State::outcome(mbedtls_ssl_handshake(&state_->ssl));
}

TlsIo TlsSession::read(void *data, size_t size, size_t &read) {
    const int n = mbedtls_ssl_read(&state_->ssl, static_cast<unsigned char *>(data), size);
    read = n > 0 ? static_cast<size_t>(n) : 0;
    return n == 0 ? TlsIo::Closed : State::outcome(n);
}

TlsIo TlsSession::write(const void *data, size_t size, size_t &written) {
    const int n = mbedtls_ssl_write(&state_->ssl, static_cast<const unsigned char *>(data), size);
    written = n > 0 ? static_cast<size_t>(n) : 0;
    return State::outcome(n);
}

void TlsSession::close_notify() {
    if (!std::exchange(state_->closing, true))
        mbedtls_ssl_close_notify(&state_->ssl);
}

} // namespace memlat

#else // a build without mbedTLS (-DMEMLAT_TLS=OFF)

namespace memlat {

struct TlsServer::State {};
struct TlsSession::State {};

TlsServer::TlsServer(const std::string &cert_file, const std::string &) {
    throw UsageError(fmt::format("--web.config.file: TLS ({}) needs a memlat built with "
                                 "mbedTLS (-DMEMLAT_TLS=ON); this one has none",
                                 cert_file));
}
TlsServer::~TlsServer() = default;
TlsSession::TlsSession(TlsServer &, int) {}
TlsSession::~TlsSession() = default;
TlsIo TlsSession::handshake() {
    return TlsIo::Failed;
}
TlsIo TlsSession::read(void *, size_t, size_t &read) {
    read = 0;
    return TlsIo::Failed;
}
TlsIo TlsSession::write(const void *, size_t, size_t &written) {
    written = 0;
    return TlsIo::Failed;
}
void TlsSession::close_notify() {}

} // namespace memlat

#endif
