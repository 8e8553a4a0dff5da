// The names people use for what runs in a cgroup: a Kubernetes namespace, pod and container, a
// Docker or Podman container's name and image, a systemd unit. They come from the cgroup's path
// (kernel/cgroup_names.h) and from the records the container runtimes and the kubelet keep on
// the node's disk, in this order of trust, never from a socket, an API or the network:
//   1. the runtime's bundle of the container: containerd's config.json (the CRI plugin's
//      io.kubernetes.cri.* annotations), CRI-O's (io.kubernetes.pod.*, .container.name);
//   2. the runtime's own records: Docker's config.v2.json (its Name, Image and, under
//      cri-dockerd, the io.kubernetes.* labels), containers/storage's containers.json
//      (Podman's and CRI-O's names and images);
//   3. the kubelet's log directories: /var/log/pods/NAMESPACE_POD_UID and the links
//      /var/log/containers/POD_NAMESPACE_CONTAINER-ID.log;
//   4. the path alone (ids, QoS class, unit).
// docs/names.md has the files and the kernels' and runtimes' formats.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/verbosity.h"
#include "kernel/cgroups.h"

namespace memlat {

struct Workload {
    std::string kind;    // "container", "pod", "unit", or "" when nothing is known
    std::string runtime; // "containerd", "cri-o", "docker", "podman", "lxc"
    std::string k8s_namespace, pod, pod_uid, qos;
    std::string container, container_id, image;
    std::string unit;   // a systemd unit or slice, where the path is one
    std::string source; // what named it: "path", or the record read (docs/names.md)

    // What a screen or a column shows: "shop/checkout-7d9f/web" (namespace/pod/container),
    // "shop/checkout-7d9f" (a pod's own cgroup), "podman web", "docker 4d5e6f7a8b9c" (no
    // record found: the id `docker ps` prints), "k8s pod 3f2a9c1e (burstable)",
    // "nginx.service"; "" when nothing is known.
    std::string display() const;
};

// Whether the records gave all they will for `w`: true when one named it, or when its path
// names neither a container nor a pod (no record to read); false when a later lookup may
// name it (a runtime writes its records around the time it makes the cgroup).
bool records_answered(const Workload &w);

// JSON's "workload": the non-empty fields by their names in docs/output.md (`namespace`,
// `pod`, `container`, ...), null when nothing is known.
nlohmann::json workload_json(const Workload &w);

// The root of the host's files: MEMLAT_HOST_ROOT (a container that mounts the node's root at
// /host gives /host), "" for the machine's own.
std::string host_root();

// What the lookups read that names many containers at once, kept while the file stays (its
// modification time): the listings of the kubelet's /var/log/pods and /var/log/containers (an
// entry per pod and per container of the node) and containers/storage's containers.json
// (every Podman container's names): a node's thousand new containers cost one read, not one
// each.
class RecordCache {
  public:
    const std::vector<std::string> &listing(const std::string &dir);
    struct Named {
        std::string name, image;
    };
    // containers.json by container id ({} when unreadable).
    const std::map<std::string, Named> &podman_containers(const std::string &file);

  private:
    struct Stamp {
        int64_t mtime_ns = -1; // the file's when read (-2: none)
        int64_t read_ns = 0;   // when it was read (CLOCK_REALTIME, as the stamps)
        uint64_t inode = 0, size = 0;
        // Whether `path` changed since it was read, at least 100 ms ago; when it did, the
        // stamp is renewed and the caller reads it again. A directory read too close to its
        // stamp to tell counts as changed.
        bool renew(const std::string &path);
    };
    std::map<std::string, std::pair<Stamp, std::vector<std::string>>> listings_;
    std::map<std::string, std::pair<Stamp, std::map<std::string, Named>>> podman_;
};

// The workload of the cgroup at `path` (its path in its hierarchy), looked up now; through
// `records` when given.
Workload find_workload(std::string_view path, const std::string &root = host_root(),
                       RecordCache *records = nullptr);

// -G's argument: a cgroup directory (resolve_cgroup()), or what runs in a cgroup as memlat
// names it (docs/names.md): NAMESPACE/POD (the pod's cgroup), NAMESPACE/POD/CONTAINER, a
// container's name (Docker's, Podman's, or a Kubernetes container's when one pod has it), or
// the first 12 hex digits or more of its id. Throws UsageError when it names no cgroup of the
// memory hierarchy, or more than one (each named in the message).
CgroupTarget resolve_cgroup_target(const std::string &arg, const std::string &root = host_root());

// find_workload() with a cache by cgroup id, for tools that name the same cgroups every
// interval. A name not found for a container or a pod is looked for again a second later (the
// runtime writes its records around the time it makes the cgroup), then after 2, 4, ... and at
// most 64 s (records that are not on this root will not appear); one found is kept until
// forget_others() says its cgroup is gone. At most max_entries cgroups are kept.
//
// `Lookups::once`: a cgroup's first answer is its answer for good (the exporter: a series'
// labels cannot change, or one cgroup would have two series). The records are written before
// the container's first process runs, so the first answer is almost always the names.
class WorkloadNames {
  public:
    enum class Lookups { retried, once };
    explicit WorkloadNames(Verbosity verbosity = {}, Lookups lookups = Lookups::retried,
                           std::string root = host_root())
        : verbosity_(verbosity), lookups_(lookups), root_(std::move(root)) {}
    const Workload &of(uint64_t cgroup_id, std::string_view path);
    // Names found elsewhere (loading/cgroup_births.h reads a new cgroup's as it is made):
    // kept for good when a record gave them and nothing kept for the cgroup did.
    void learn(uint64_t cgroup_id, std::string_view path, const Workload &w);
    // What was found for the cgroup, if it was looked up (a removed cgroup's last names).
    std::optional<Workload> known(uint64_t cgroup_id) const;
    // Forgets the cgroups not among `live` (by id: what cgroup_paths() returned).
    void forget_others(const std::map<uint64_t, std::string> &live);
    // The workloads of the cgroups of `paths` (by id, their paths: a scrape's), and forgets
    // the other cgroups kept whose path `exists` says is gone (CgroupPathCache::exists).
    std::map<uint64_t, Workload> of_each(const std::map<uint64_t, std::string> &paths,
                                         const std::function<bool(const std::string &)> &exists);
    size_t size() const { return cache_.size(); }
    static constexpr size_t max_entries = 4096;

  private:
    struct Entry {
        Workload workload;
        std::string path;
        std::chrono::steady_clock::time_point retry_at; // max(): found, never again
        std::chrono::seconds retry_after{1};            // the next wait when not found
    };
    Verbosity verbosity_;
    Lookups lookups_;
    std::string root_;
    std::map<uint64_t, Entry> cache_;
    RecordCache records_;
};

} // namespace memlat
