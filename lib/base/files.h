// Files and file descriptors. Small text files (/proc, /sys) are read without iostreams:
// std::ifstream would pull the iostream machinery into the static binaries and cost about
// 1 MB each.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace memlat {

// The whole file, or nullopt with errno set.
std::optional<std::string> read_text_file(const std::string &path);

// Writes `content` whole to the file `path` (created with mode 0644, or truncated), and makes
// it durable (fsync): a report kept for after a crash. Returns why it failed (a full disk's
// short write included), nullopt when it did not.
std::optional<std::string> write_whole_file(const std::string &path, std::string_view content);

// The first `count` bytes of the file (fewer where it is shorter), or nullopt when it cannot
// be read.
std::optional<std::string> read_file_prefix(const std::string &path, size_t count);

// Takes the next line (without its newline) off the front of `text`; false at the end.
bool next_line(std::string_view &text, std::string_view &line);

// A file descriptor, closed when destroyed; -1 holds nothing.
class OwnedFd {
  public:
    OwnedFd() = default;
    explicit OwnedFd(int fd) : fd_(fd) {}
    OwnedFd(OwnedFd &&other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    OwnedFd &operator=(OwnedFd &&other) noexcept;
    OwnedFd(const OwnedFd &) = delete;
    OwnedFd &operator=(const OwnedFd &) = delete;
    ~OwnedFd();
    int get() const { return fd_; }
    // Gives the descriptor up without closing it.
    int release() { return std::exchange(fd_, -1); }

  private:
    int fd_ = -1;
};

} // namespace memlat
