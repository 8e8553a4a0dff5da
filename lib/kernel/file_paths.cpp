#include "kernel/file_paths.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <fmt/format.h>
#include <string_view>

#include "base/files.h"

namespace memlat {

namespace {

uint32_t kernel_dev(dev_t dev) {
    return (major(dev) << 20) | minor(dev);
}

// The name kept for `key` if it still names that file; " (deleted)" appended once the
// name is gone (the interval still counts what the file did before); nothing when the
// name now belongs to another file.
std::optional<std::string> recheck(const FileIdentity &key, const std::string &path) {
    constexpr std::string_view deleted = " (deleted)";
    if (path.ends_with(deleted))
        return path;
    struct stat st {};
    if (stat(path.c_str(), &st) != 0)
        return errno == ENOENT ? std::optional(path + std::string(deleted)) : std::nullopt;
    if (kernel_dev(st.st_dev) != key.dev || st.st_ino != key.ino)
        return std::nullopt;
    return path;
}

// Whether the file behind `link` has inode generation `generation`, where the file
// system tells (FS_IOC_GETVERSION: ext2/3/4, btrfs...). Where it does not (tmpfs, or
// the hook gave no generation) the (dev, ino) match has to do.
bool same_generation(const std::string &link, uint32_t generation) {
    if (generation == 0)
        return true;
    const int fd = open(link.c_str(), O_RDONLY | O_NOATIME | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return true;
    int version = 0;
    const bool told = ioctl(fd, FS_IOC_GETVERSION, &version) == 0;
    close(fd);
    return !told || static_cast<uint32_t>(version) == generation;
}

} // namespace

std::optional<std::string> FilePaths::find(const FileIdentity &key, uint32_t pid) {
    if (auto it = known_.find(key); it != known_.end()) {
        if (auto still = recheck(key, it->second))
            return still;
        known_.erase(it);
    }
    if (pid == 0 || key.dev == 0)
        return std::nullopt;
    if (!scanned_.contains(pid)) {
        scanned_.insert(pid);
        scan(pid);
    }
    auto [first, last] = candidates_.equal_range({key.dev, key.ino});
    for (auto it = first; it != last; ++it) {
        if (!same_generation(it->second.link, key.generation))
            continue;
        known_[key] = it->second.path;
        return it->second.path;
    }
    return std::nullopt;
}

void FilePaths::scan(uint32_t pid) {
    std::string fd_dir = fmt::format("/proc/{}/fd", pid);
    if (DIR *dir = opendir(fd_dir.c_str())) {
        while (dirent *e = readdir(dir)) {
            if (e->d_name[0] == '.')
                continue;
            std::string link = fd_dir + "/" + e->d_name;
            struct stat st {};
            if (stat(link.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
                continue;
            char target[PATH_MAX];
            ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
            if (n > 0)
                candidates_.emplace(std::pair{kernel_dev(st.st_dev), uint64_t(st.st_ino)},
                                    Candidate{std::string(target, n), link});
        }
        closedir(dir);
    }
    // address perms offset major:minor inode path (major and minor in hex)
    auto maps = read_text_file(fmt::format("/proc/{}/maps", pid));
    if (!maps)
        return;
    std::string_view rest = *maps, line;
    while (next_line(rest, line)) {
        unsigned long long inode = 0;
        unsigned maj = 0, min = 0;
        int range_end = 0, path_at = 0;
        std::string text(line);
        if (sscanf(text.c_str(), "%*s%n %*s %*s %x:%x %llu %n", &range_end, &maj, &min, &inode,
                   &path_at) < 3 ||
            inode == 0 || path_at <= 0 || static_cast<size_t>(path_at) >= text.size() ||
            text[path_at] != '/')
            continue;
        candidates_.emplace(
            std::pair{(maj << 20) | min, uint64_t(inode)},
            Candidate{text.substr(path_at),
                      fmt::format("/proc/{}/map_files/{}", pid, text.substr(0, range_end))});
    }
}

} // namespace memlat
