#include "kernel/cgroups.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <vector>

#include "base/errors.h"
#include "base/files.h"

namespace memlat {

namespace {

struct Mount {
    std::string point, fstype, super_options;
};

// Every mount of /proc/self/mountinfo, in its order.
std::vector<Mount> mounts() {
    std::vector<Mount> out;
    auto text = read_text_file("/proc/self/mountinfo");
    if (!text)
        return out;
    std::string_view rest = *text, line;
    while (next_line(rest, line)) {
        // id parent major:minor root mountpoint options [optional...] - fstype source superopts
        std::vector<std::string_view> fields;
        for (size_t pos = 0; pos <= line.size();) {
            size_t space = line.find(' ', pos);
            if (space == std::string_view::npos)
                space = line.size();
            fields.push_back(line.substr(pos, space - pos));
            pos = space + 1;
        }
        size_t dash = 0;
        while (dash < fields.size() && fields[dash] != "-")
            ++dash;
        if (fields.size() < 5 || dash + 3 >= fields.size())
            continue;
        out.push_back(Mount{std::string(fields[4]), std::string(fields[dash + 1]),
                            std::string(fields[dash + 3])});
    }
    return out;
}

// The mount that contains `path` (the longest mount point that is a prefix of it).
Mount mount_of(const std::string &path) {
    Mount best;
    for (auto &m : mounts()) {
        bool contains = path == m.point || (path.starts_with(m.point) &&
                                            (m.point == "/" || path[m.point.size()] == '/'));
        if (contains && m.point.size() >= best.point.size())
            best = std::move(m);
    }
    return best;
}

bool has_option(const std::string &options, std::string_view option) {
    size_t pos = 0;
    while (pos <= options.size()) {
        size_t comma = options.find(',', pos);
        if (comma == std::string::npos)
            comma = options.size();
        if (std::string_view(options).substr(pos, comma - pos) == option)
            return true;
        pos = comma + 1;
    }
    return false;
}

} // namespace

namespace {

// The kernfs node id of a cgroup directory, which the kernel reports as the cgroup's id; its
// file handle carries it. 0 when it cannot be read.
uint64_t directory_cgroup_id(const std::string &path) {
    struct {
        file_handle handle;
        uint64_t id;
    } fh{};
    fh.handle.handle_bytes = sizeof(uint64_t);
    int mount_id = 0;
    if (name_to_handle_at(AT_FDCWD, path.c_str(), &fh.handle, &mount_id, 0) != 0)
        return 0;
    return fh.id;
}

void scan_cgroups(const std::string &dir, std::map<uint64_t, std::string> &out, int depth) {
    if (uint64_t id = directory_cgroup_id(dir); id != 0)
        out[id] = dir;
    if (depth > 64)
        return; // deeper than any real hierarchy: a loop would end here
    DIR *d = opendir(dir.c_str());
    if (d == nullptr)
        return; // removed meanwhile
    std::vector<std::string> children;
    while (dirent *e = readdir(d))
        if (e->d_type == DT_DIR && strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            children.push_back(dir + "/" + e->d_name);
    closedir(d);
    for (const auto &child : children)
        scan_cgroups(child, out, depth + 1);
}

} // namespace

std::string hierarchy_mount(bool v1_memory) {
    for (const auto &m : mounts())
        if (v1_memory ? m.fstype == "cgroup" && has_option(m.super_options, "memory")
                      : m.fstype == "cgroup2")
            return m.point;
    return "";
}

std::string hierarchy_path(std::string_view dir, std::string_view mount) {
    std::string_view below = dir.starts_with(mount) ? dir.substr(mount.size()) : dir;
    return below.empty() ? "/" : std::string(below);
}

namespace {

// Every cgroup of the hierarchy mounted at `mount` (none for ""), by id: its directory.
std::map<uint64_t, std::string> scan_hierarchy(const std::string &mount) {
    std::map<uint64_t, std::string> out;
    if (!mount.empty())
        scan_cgroups(mount, out, 0);
    return out;
}

} // namespace

std::map<uint64_t, std::string> cgroup_dirs(bool v1_memory) {
    return scan_hierarchy(hierarchy_mount(v1_memory));
}

std::map<uint64_t, std::string> cgroup_paths(bool v1_memory) {
    const std::string mount = hierarchy_mount(v1_memory);
    std::map<uint64_t, std::string> out = scan_hierarchy(mount);
    for (auto &[id, dir] : out)
        dir = hierarchy_path(dir, mount);
    return out;
}

std::map<uint64_t, std::string> CgroupPathCache::paths_of(std::span<const uint64_t> ids) {
    std::map<uint64_t, std::string> out;
    std::set<uint64_t> missing;
    bool walked = false;
    for (const uint64_t id : std::set<uint64_t>(ids.begin(), ids.end())) {
        auto known = known_.find(id);
        // A directory's id changes when it is removed and made again: then it is another
        // cgroup, and this one is gone.
        if (known != known_.end() && directory_cgroup_id(known->second) != id) {
            known_.erase(known);
            known = known_.end();
        }
        if (known == known_.end() && !walked && !missing_.contains(id)) {
            mount_ = hierarchy_mount(v1_memory_);
            known_ = scan_hierarchy(mount_);
            walked = true;
            ++walks_;
            known = known_.find(id);
        }
        if (known != known_.end())
            out.emplace(id, hierarchy_path(known->second, mount_));
        else
            missing.insert(id);
    }
    // Kept across calls, so that ids of removed cgroups met in turn cost no walk each; ids are
    // never reused, and the bound only costs a walk.
    if (missing_.size() + missing.size() > 4096)
        missing_.clear();
    missing_.merge(missing);
    return out;
}

bool CgroupPathCache::exists(const std::string &path) const {
    struct stat st {};
    const std::string dir = mount_ + (path == "/" ? "" : path);
    return !mount_.empty() && stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

CgroupTarget resolve_cgroup(const std::string &path) {
    char real[PATH_MAX];
    struct stat st {};
    if (stat(path.c_str(), &st) != 0 || realpath(path.c_str(), real) == nullptr)
        throw UsageError(fmt::format("cannot use cgroup '{}': {}", path,
                                     errno == ENOENT ? "it does not exist" : strerror(errno)));
    if (!S_ISDIR(st.st_mode))
        throw UsageError(
            fmt::format("'{}' is a file, not a cgroup (a cgroup is a directory)", path));
    struct statfs fs {};
    if (statfs(real, &fs) != 0 ||
        (fs.f_type != CGROUP2_SUPER_MAGIC && fs.f_type != CGROUP_SUPER_MAGIC))
        throw UsageError(fmt::format("'{}' is not a cgroup directory (not on a cgroup file "
                                     "system)",
                                     path));
    CgroupTarget target;
    target.v1 = fs.f_type == CGROUP_SUPER_MAGIC;
    Mount mount = mount_of(real);
    if (mount.point.empty())
        throw UsageError(fmt::format("cannot find the cgroup mount that holds '{}'", path));
    if (target.v1 && !has_option(mount.super_options, "memory"))
        throw UsageError(fmt::format(
            "'{}' is in the cgroup v1 hierarchy at {}, which has no memory controller; give a "
            "cgroup of the memory hierarchy (e.g. under /sys/fs/cgroup/memory) or of cgroup v2",
            path, mount.point));
    target.path = hierarchy_path(real, mount.point);
    for (char c : target.path)
        target.level += c == '/';
    if (target.path == "/")
        target.level = 0;

    target.id = directory_cgroup_id(real);
    if (target.id == 0)
        throw RuntimeError(
            fmt::format("cannot read the id of cgroup '{}': {}", path, strerror(errno)));
    return target;
}

bool memory_controller_on_v1() {
    for (const auto &m : mounts())
        if (m.fstype == "cgroup" && has_option(m.super_options, "memory"))
            return true;
    return false;
}

std::optional<int> cgroup_v1_hierarchy_id(std::string_view controller) {
    // "#subsys_name hierarchy num_cgroups enabled", a line per controller, tab-separated.
    // (No std::istringstream: iostreams would add 460 KB to the static binary.)
    const std::string text = read_text_file("/proc/cgroups").value_or("");
    std::string_view rest = text;
    while (!rest.empty()) {
        std::string_view line = rest.substr(0, rest.find('\n'));
        rest.remove_prefix(std::min(rest.size(), line.size() + 1));
        const size_t tab = line.find('\t');
        if (tab == std::string_view::npos || line.substr(0, tab) != controller)
            continue;
        line.remove_prefix(tab + 1);
        int id = 0;
        const auto [end, err] = std::from_chars(line.data(), line.data() + line.size(), id);
        if (err == std::errc() && id > 0)
            return id;
    }
    return std::nullopt;
}

} // namespace memlat
