// Error types shared by every front-end. main() maps them to exit statuses: a UsageError
// (bad options or arguments) exits 2, a RuntimeError (the kernel or the machine refused)
// exits 1. Messages are whole sentences that say what to do.
#pragma once

#include <stdexcept>
#include <string>

namespace memlat {

struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct RuntimeError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The text of an errno value, positive or negative, libbpf's own (LIBBPF_ERRNO__*) included.
std::string error_text(int err);

} // namespace memlat
