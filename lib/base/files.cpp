#include "base/files.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace memlat {

// Whole files through plain read(2): std::ifstream would pull iostreams into the static
// binaries and cost about 1 MB.
std::optional<std::string> read_text_file(const std::string &path) {
    OwnedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0)
        return std::nullopt;
    std::string text;
    char buf[65536];
    ssize_t n;
    while ((n = read(fd.get(), buf, sizeof(buf))) > 0)
        text.append(buf, static_cast<size_t>(n));
    if (n < 0) {
        // The caller reads errno: read's, not what closing might set.
        const int err = errno;
        fd = OwnedFd();
        errno = err;
        return std::nullopt;
    }
    return text;
}

std::optional<std::string> read_file_prefix(const std::string &path, size_t count) {
    OwnedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0)
        return std::nullopt;
    std::string bytes(count, '\0');
    const ssize_t n = read(fd.get(), bytes.data(), count);
    if (n < 0)
        return std::nullopt;
    bytes.resize(static_cast<size_t>(n));
    return bytes;
}

std::optional<std::string> write_whole_file(const std::string &path, std::string_view content) {
    OwnedFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0)
        return std::string(std::strerror(errno));
    while (!content.empty()) {
        ssize_t n = write(fd.get(), content.data(), content.size());
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return std::string(n < 0 ? std::strerror(errno) : "short write");
        content.remove_prefix(static_cast<size_t>(n));
    }
    if (fsync(fd.get()) != 0)
        return std::string(std::strerror(errno));
    return std::nullopt;
}

bool next_line(std::string_view &text, std::string_view &line) {
    if (text.empty())
        return false;
    auto newline = text.find('\n');
    line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    return true;
}

OwnedFd &OwnedFd::operator=(OwnedFd &&other) noexcept {
    if (this != &other) {
        if (fd_ >= 0)
            close(fd_);
        fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
}

OwnedFd::~OwnedFd() {
    if (fd_ >= 0)
        close(fd_);
}

} // namespace memlat
