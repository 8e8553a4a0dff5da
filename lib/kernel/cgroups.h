// Cgroups as the BPF side identifies them: a cgroup's id is its kernfs node id, the same on
// cgroup v1 and v2, and its level is its depth below the hierarchy's root.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memlat {

struct CgroupTarget {
    uint64_t id = 0;
    int level = 0;
    bool v1 = false;  // in a cgroup v1 hierarchy (then always the memory controller's)
    std::string path; // in its hierarchy (hierarchy_path())
};

// Fills the -G filter of a BPF object's read-only data: the filter_cgroup_on, filter_cgroup_id,
// filter_cgroup_level and filter_on_v1 fields each BPF side passes to cgroup_is_under(). Without
// a target the filter stays off (the fields keep their zeroes).
template <typename Rodata>
void set_cgroup_filter(Rodata &ro, const std::optional<CgroupTarget> &target) {
    if (!target)
        return;
    ro.filter_cgroup_on = true;
    ro.filter_cgroup_id = target->id;
    ro.filter_cgroup_level = target->level;
    ro.filter_on_v1 = target->v1;
}

// Resolves a cgroup directory for -G. Throws UsageError when the path is not a cgroup, or is
// in a v1 hierarchy other than the memory controller's.
CgroupTarget resolve_cgroup(const std::string &path);

// Whether the memory controller is mounted as a cgroup v1 hierarchy (then a task's memory
// cgroup lives there, not in its cgroup v2 cgroup).
bool memory_controller_on_v1();

// The id of the cgroup v1 hierarchy `controller` is mounted in, as /proc/cgroups lists it
// (the cgroup tracepoints' `root`); nullopt when the kernel has no such controller or it is
// on cgroup v2 (id 0).
std::optional<int> cgroup_v1_hierarchy_id(std::string_view controller);

// Every cgroup of the hierarchy the BPF side names a task's cgroup in (the memory
// controller's cgroup v1 hierarchy when `v1_memory`, else cgroup v2), by id: its directory.
// Empty when that hierarchy is not mounted.
std::map<uint64_t, std::string> cgroup_dirs(bool v1_memory);

// The same cgroups by id with their paths in the hierarchy: the form in which every memlat
// output names a cgroup (docs/output.md).
std::map<uint64_t, std::string> cgroup_paths(bool v1_memory);

// Where that hierarchy is mounted ("" when it is not).
std::string hierarchy_mount(bool v1_memory);

// The path of cgroup directory `dir` in the hierarchy mounted at `mount`: "/" for its root,
// "/system.slice/cron.service" below it. It is what /proc/PID/cgroup, systemd and the
// container runtimes show, and the same on cgroup v1 and v2.
std::string hierarchy_path(std::string_view dir, std::string_view mount);

// cgroup_paths() for the few cgroups a scrape names. The hierarchy is walked only when an id
// appears that the last walk did not list: a walk costs every cgroup of the host (35 ms for
// 1,000 cgroup v1 directories on a 2-CPU guest), a known id one name_to_handle_at().
class CgroupPathCache {
  public:
    explicit CgroupPathCache(bool v1_memory) : v1_memory_(v1_memory) {}
    // The live cgroups among `ids`, by id. An id not found by a walk is not looked for again
    // (a removed cgroup's id is never given to another).
    std::map<uint64_t, std::string> paths_of(std::span<const uint64_t> ids);
    // The same for the cgroups of a table's entries: `id_of(entry)` is an entry's cgroup id.
    template <typename Entries, typename IdOf>
    std::map<uint64_t, std::string> paths_of(const Entries &entries, IdOf id_of) {
        std::vector<uint64_t> ids;
        ids.reserve(entries.size());
        for (const auto &entry : entries)
            ids.push_back(id_of(entry));
        return paths_of(ids);
    }
    // Whether the cgroup at `path` (in the hierarchy) is still there (a cgroup named by a
    // series that stalled before).
    bool exists(const std::string &path) const;
    // Walks of the hierarchy so far.
    uint64_t walks() const { return walks_; }

  private:
    bool v1_memory_;
    std::string mount_;                     // the hierarchy's, at the last walk
    std::map<uint64_t, std::string> known_; // directories: the last walk's, less those removed
    std::set<uint64_t> missing_;            // ids a walk did not find (at most 4,096)
    uint64_t walks_ = 0;
};

} // namespace memlat
