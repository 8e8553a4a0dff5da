#include "prometheus/listen_address.h"

#include <charconv>
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

} // namespace memlat
