#include "prometheus/listen_address.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fmt/format.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "base/errors.h"

namespace memlat {

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

} // namespace

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

} // namespace memlat
