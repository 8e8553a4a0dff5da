// Where an exporter listens: --prometheus [ADDR:]PORT, parsed and printed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memlat {

// Where to listen: an IP address (empty: every address of the machine) and a port.
struct ListenAddress {
    std::string host;
    uint16_t port = 0;
    std::string describe() const; // "127.0.0.1:9847", "[::1]:9847", "*:9847"
};

// "9847", ":9847", "127.0.0.1:9847", "[::1]:9847", "localhost:9847". Host names other than
// localhost are refused (a static binary cannot use the system's resolver). A UsageError
// names what is wrong.
ListenAddress parse_listen_address(std::string_view text);

// A listening socket on `where` (non-blocking, close-on-exec), made by hand so that each
// failure gets its own message (a RuntimeError); the server's acceptor then adopts it.
int open_listener(const ListenAddress &where);

} // namespace memlat
