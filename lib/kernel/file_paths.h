// The path of a file the kernel names by device, inode and generation (the page-cache
// tracepoints' view of a file), found from the fds and mappings of a process that used it.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace memlat {

// A file as the kernel's tracepoints name it: the device as the kernel encodes it (major <<
// 20 | minor), the inode number, and the inode's generation (0: not known).
struct FileIdentity {
    uint32_t dev;
    uint64_t ino;
    uint32_t generation;
    auto operator<=>(const FileIdentity &) const = default;
};

// Paths of files, from the fds and mappings of the processes that used them (the BPF side
// keeps the last one per file). A path is checked before it is trusted: the inode number of
// a deleted file is often handed to the next file created at once, so a name found for
// (dev, ino) may belong to another file, and a name kept from an earlier interval may have
// been deleted or renamed since.
class FilePaths {
  public:
    // The path of `file`, kept from before if it still names it, else looked for among the
    // fds and mappings of process `pid` (once an interval); nullopt when none is found.
    std::optional<std::string> find(const FileIdentity &file, uint32_t pid);
    // The processes' fds and mappings change between intervals: look again.
    void new_interval() {
        scanned_.clear();
        candidates_.clear();
    }

  private:
    struct Candidate {
        std::string path; // as the process sees it
        std::string link; // /proc/PID/fd/N or /proc/PID/map_files/RANGE: the file itself
    };
    void scan(uint32_t pid);

    std::map<FileIdentity, std::string> known_; // names found, rechecked before each use
    std::multimap<std::pair<uint32_t, uint64_t>, Candidate> candidates_; // this interval's
    std::set<uint32_t> scanned_;
};

} // namespace memlat
