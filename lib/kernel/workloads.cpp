#include "kernel/workloads.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/errors.h"
#include "base/files.h"
#include "kernel/cgroup_names.h"

namespace memlat {

namespace {

using nlohmann::json;

// A JSON file, or nullopt when it is missing or not JSON.
std::optional<json> read_json(const std::string &path) {
    auto text = read_text_file(path);
    if (!text)
        return std::nullopt;
    json parsed = json::parse(*text, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object())
        return std::nullopt;
    return parsed;
}

// The member `key` of object `obj`, null when absent.
const json &member(const json &obj, const char *key) {
    static const json none;
    if (!obj.is_object())
        return none;
    auto it = obj.find(key);
    return it != obj.end() ? *it : none;
}

// The string member `key` of object `obj`, "" when absent or not a string.
std::string text_of(const json &obj, const char *key) {
    if (!obj.is_object())
        return "";
    auto it = obj.find(key);
    return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

std::vector<std::string> list_dir(const std::string &dir) {
    std::vector<std::string> names;
    DIR *d = opendir(dir.c_str());
    if (!d)
        return names;
    while (const dirent *e = readdir(d))
        if (e->d_name[0] != '.')
            names.emplace_back(e->d_name);
    closedir(d);
    return names;
}

// The names Kubernetes gave a container, from a runtime's annotations or labels (`names`),
// under the keys of that runtime; true when the pod was named.
struct KubernetesKeys {
    const char *name_space, *pod, *uid, *container, *image;
};
// containerd's CRI plugin (internal/cri/annotations/annotations.go; pkg/cri/annotations before
// 2.0): a sandbox has no container name, and is the pod's infrastructure container.
constexpr KubernetesKeys containerd_keys{
    "io.kubernetes.cri.sandbox-namespace", "io.kubernetes.cri.sandbox-name",
    "io.kubernetes.cri.sandbox-uid", "io.kubernetes.cri.container-name",
    "io.kubernetes.cri.image-name"};
// The kubelet's labels (pkg/kubelet/types/labels.go), which CRI-O writes as annotations and
// cri-dockerd as Docker labels; CRI-O's image is its own annotation.
constexpr KubernetesKeys kubelet_keys{"io.kubernetes.pod.namespace", "io.kubernetes.pod.name",
                                      "io.kubernetes.pod.uid", "io.kubernetes.container.name",
                                      "io.kubernetes.cri-o.ImageName"};

bool take_kubernetes_names(const json &names, const KubernetesKeys &keys, Workload &w) {
    const std::string pod = text_of(names, keys.pod);
    if (pod.empty())
        return false;
    w.pod = pod;
    w.k8s_namespace = text_of(names, keys.name_space);
    if (std::string uid = text_of(names, keys.uid); !uid.empty())
        w.pod_uid = uid;
    if (!w.container_id.empty()) {
        w.container = text_of(names, keys.container);
        if (w.container.empty() && text_of(names, "io.kubernetes.cri.container-type") == "sandbox")
            w.container = "POD"; // the kubelet's name for the infrastructure container
        if (std::string image = text_of(names, keys.image); !image.empty())
            w.image = image;
    }
    return true;
}

// 1. The bundle a runtime runs the container from: containerd's shims (v2 tasks by namespace;
// the v1 shim's directory on containerd 1.x), CRI-O's and Podman's userdata.
bool from_bundles(const std::string &root, Workload &w) {
    for (const char *tasks : {"/run/containerd/io.containerd.runtime.v2.task",
                              "/run/containerd/io.containerd.runtime.v1.linux"})
        for (const std::string &ns : list_dir(root + tasks)) {
            const std::string file =
                fmt::format("{}{}/{}/{}/config.json", root, tasks, ns, w.container_id);
            if (auto config = read_json(file)) {
                if (w.runtime.empty())
                    w.runtime = "containerd";
                const json &notes = member(*config, "annotations");
                if (take_kubernetes_names(notes, containerd_keys, w)) {
                    w.source = file.substr(root.size());
                    return true;
                }
            }
        }
    for (const char *storage : {"/run/containers/storage", "/var/lib/containers/storage"}) {
        const std::string file = fmt::format("{}{}/overlay-containers/{}/userdata/config.json",
                                             root, storage, w.container_id);
        if (auto config = read_json(file))
            if (take_kubernetes_names(member(*config, "annotations"), kubelet_keys, w)) {
                w.runtime = "cri-o";
                w.source = file.substr(root.size());
                return true;
            }
    }
    return false;
}

// 2. The runtimes' own records: Docker's container config, and containers/storage's list of
// containers (Podman's, and CRI-O's), which holds their names and their images' names.
bool from_runtime_records(const std::string &root, Workload &w, RecordCache &records) {
    const std::string docker_file =
        fmt::format("{}/var/lib/docker/containers/{}/config.v2.json", root, w.container_id);
    if (auto config = read_json(docker_file)) {
        const json &cfg = member(*config, "Config");
        w.runtime = "docker";
        w.source = docker_file.substr(root.size());
        if (!take_kubernetes_names(member(cfg, "Labels"), kubelet_keys, w)) {
            w.container = text_of(*config, "Name");
            if (w.container.starts_with('/'))
                w.container.erase(0, 1);
        }
        if (w.image.empty())
            w.image = text_of(cfg, "Image");
        return !w.container.empty() || !w.pod.empty();
    }
    for (const char *storage : {"/var/lib/containers/storage", "/run/containers/storage"}) {
        const std::string file =
            fmt::format("{}{}/overlay-containers/containers.json", root, storage);
        const auto &containers = records.podman_containers(file);
        auto c = containers.find(w.container_id);
        if (c == containers.end())
            continue;
        if (c->second.name.empty())
            return false;
        w.container = c->second.name;
        if (!c->second.image.empty())
            w.image = c->second.image;
        if (w.runtime.empty())
            w.runtime = "podman";
        w.source = file.substr(root.size());
        return true;
    }
    return false;
}

// 3. The kubelet's log directories (pkg/kubelet/kuberuntime/helpers.go BuildPodLogsDirectory:
// NAMESPACE_POD_UID; kuberuntime_container.go's log links: POD_NAMESPACE_CONTAINER-ID.log).
// Namespaces and pods are DNS names, without '_'.
bool from_kubelet_logs(const std::string &root, Workload &w, RecordCache &records) {
    bool named = false;
    if (!w.container_id.empty()) {
        const std::string tail = "-" + w.container_id + ".log";
        for (const std::string &link : records.listing(root + "/var/log/containers")) {
            if (!link.ends_with(tail))
                continue;
            const std::string head = link.substr(0, link.size() - tail.size());
            const size_t first = head.find('_'), second = head.find('_', first + 1);
            if (first == std::string::npos || second == std::string::npos)
                continue;
            w.pod = head.substr(0, first);
            w.k8s_namespace = head.substr(first + 1, second - first - 1);
            w.container = head.substr(second + 1);
            w.source = "/var/log/containers/" + link;
            named = true;
            break;
        }
    }
    if (!w.pod_uid.empty() && w.pod.empty()) {
        const std::string tail = "_" + w.pod_uid;
        for (const std::string &dir : records.listing(root + "/var/log/pods")) {
            const size_t first = dir.find('_');
            if (!dir.ends_with(tail) || first == std::string::npos ||
                first + tail.size() >= dir.size())
                continue;
            w.k8s_namespace = dir.substr(0, first);
            w.pod = dir.substr(first + 1, dir.size() - tail.size() - first - 1);
            w.source = "/var/log/pods/" + dir;
            named = true;
            break;
        }
    }
    return named;
}

std::string short_id(const std::string &id, size_t n) {
    return id.substr(0, std::min(id.size(), n));
}

} // namespace

std::string Workload::display() const {
    if (!pod.empty()) {
        const std::string p = k8s_namespace.empty() ? pod : k8s_namespace + "/" + pod;
        return container.empty() ? p : p + "/" + container;
    }
    if (!pod_uid.empty()) {
        const std::string p = "k8s pod " + short_id(pod_uid, 8);
        return container_id.empty() ? p + " (" + qos + ")" : p + "/" + short_id(container_id, 12);
    }
    if (kind == "container")
        return runtime + " " + (container.empty() ? short_id(container_id, 12) : container);
    if (!qos.empty())
        return "k8s " + unit;
    return unit;
}

json workload_json(const Workload &w) {
    if (w.kind.empty())
        return nullptr;
    json out = json::object();
    const std::pair<const char *, const std::string *> fields[] = {
        {"kind", &w.kind},
        {"runtime", &w.runtime},
        {"namespace", &w.k8s_namespace},
        {"pod", &w.pod},
        {"pod_uid", &w.pod_uid},
        {"qos", &w.qos},
        {"container", &w.container},
        {"container_id", &w.container_id},
        {"image", &w.image},
        {"unit", &w.unit},
        {"source", &w.source}};
    for (const auto &[key, value] : fields)
        if (!value->empty())
            out[key] = *value;
    return out;
}

bool records_answered(const Workload &w) {
    return w.source != "path" || (w.container_id.empty() && w.pod_uid.empty());
}

std::string host_root() {
    const char *env = getenv("MEMLAT_HOST_ROOT");
    std::string root = env ? env : "";
    while (!root.empty() && root.back() == '/')
        root.pop_back();
    return root;
}

bool RecordCache::Stamp::renew(const std::string &path) {
    struct stat st {};
    const bool exists = stat(path.c_str(), &st) == 0;
    const int64_t now_mtime_ns =
        exists ? static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec : -2;
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    const int64_t now_ns = static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
    // A file system stamps a file with a coarse clock (a tick: up to 10 ms), so a change made
    // in the tick of the last read leaves the stamp as it was. A directory's entries change
    // in place: one read that close to its stamp is not trusted. A list of containers is
    // written anew and renamed over the old one (containers/storage's containers.go saves
    // through pkg/ioutils' atomic writes), with its own inode and, with a container more or
    // less, its own size.
    constexpr int64_t tick_ns = 10'000'000;
    // Read at most every 100 ms: while containers are made a hundred a second, each lookup
    // would otherwise list /var/log/pods again (2,000 entries: a third of a millisecond), or
    // parse a Podman list again; a name an older read lacks is looked for again (WorkloadNames,
    // CgroupBirths).
    constexpr int64_t min_age_ns = 100'000'000;
    if (read_ns != 0 && now_ns - read_ns < min_age_ns)
        return false;
    const bool same = mtime_ns == now_mtime_ns && inode == (exists ? st.st_ino : 0) &&
                      size == (exists ? static_cast<uint64_t>(st.st_size) : 0) &&
                      (!S_ISDIR(st.st_mode) || read_ns >= now_mtime_ns + tick_ns);
    if (same)
        return false;
    mtime_ns = now_mtime_ns;
    inode = exists ? st.st_ino : 0;
    size = exists ? static_cast<uint64_t>(st.st_size) : 0;
    read_ns = now_ns;
    return true;
}

const std::vector<std::string> &RecordCache::listing(const std::string &dir) {
    auto &[stamp, names] = listings_[dir];
    if (stamp.renew(dir))
        names = stamp.mtime_ns == -2 ? std::vector<std::string>{} : list_dir(dir);
    return names;
}

const std::map<std::string, RecordCache::Named> &
RecordCache::podman_containers(const std::string &file) {
    auto &[stamp, containers] = podman_[file];
    if (!stamp.renew(file))
        return containers;
    containers.clear();
    // containers/storage's containers.go: a list of {"id", "names", "metadata"} where metadata
    // is Podman's own JSON, a string, with the image's name.
    const json parsed = json::parse(read_text_file(file).value_or(""), nullptr, false);
    if (!parsed.is_array())
        return containers;
    for (const json &c : parsed) {
        const std::string id = text_of(c, "id");
        if (id.empty())
            continue;
        Named &n = containers[id];
        auto names = c.find("names");
        if (names != c.end() && names->is_array() && !names->empty() && (*names)[0].is_string())
            n.name = (*names)[0].get<std::string>();
        const json metadata = json::parse(text_of(c, "metadata"), nullptr, false);
        n.image = text_of(metadata, "image-name");
    }
    return containers;
}

Workload find_workload(std::string_view path, const std::string &root, RecordCache *records) {
    RecordCache own; // read for this lookup alone, without the caller's
    RecordCache &read = records != nullptr ? *records : own;
    const PathNames in_path = names_in_path(path);
    Workload w{.runtime = in_path.runtime,
               .pod_uid = in_path.pod_uid,
               .qos = in_path.qos,
               .container_id = in_path.container_id,
               .unit = in_path.unit};
    switch (in_path.manager) {
    case PathNames::Manager::None:
        return w;
    case PathNames::Manager::Systemd:
        w.kind = "unit";
        break;
    case PathNames::Manager::Lxc:
        w.kind = "container";
        w.runtime = "lxc";
        w.container = w.unit;
        w.unit.clear();
        break;
    case PathNames::Manager::Kubernetes:
        w.kind = !w.container_id.empty() ? "container" : !w.pod_uid.empty() ? "pod" : "unit";
        break;
    case PathNames::Manager::Container:
        w.kind = "container";
        break;
    }
    w.source = "path";
    if (w.kind == "unit" || w.runtime == "lxc")
        return w;
    if (!w.container_id.empty() && (from_bundles(root, w) || from_runtime_records(root, w, read)))
        return w;
    if (in_path.manager == PathNames::Manager::Kubernetes)
        from_kubelet_logs(root, w, read);
    return w;
}

namespace {

// Whether workload `w` is what `name` says (resolve_cgroup_target()).
bool named(const Workload &w, const std::string &name) {
    if (w.kind != "container" && w.kind != "pod")
        return false;
    const std::string pod = w.k8s_namespace + "/" + w.pod;
    if (!w.pod.empty() && name == (w.kind == "pod" ? pod : pod + "/" + w.container))
        return true;
    if (w.kind == "container" && (name == w.container || name == w.display()))
        return true;
    return name.size() >= 12 && w.container_id.starts_with(name);
}

} // namespace

CgroupTarget resolve_cgroup_target(const std::string &arg, const std::string &root) {
    if (arg.empty() || arg.starts_with('/') || arg.starts_with('.'))
        return resolve_cgroup(arg);
    // A relative path that names a cgroup directory keeps its meaning; a name that is also a
    // file or directory here (-G web, run where ./web exists) is still looked up as a name.
    std::optional<UsageError> as_path;
    try {
        return resolve_cgroup(arg);
    } catch (const UsageError &e) {
        as_path = e;
    }
    const bool v1 = memory_controller_on_v1();
    const std::string mount = hierarchy_mount(v1);
    RecordCache records;
    std::vector<std::pair<std::string, std::string>> found; // directory, name shown
    for (const auto &[id, dir] : cgroup_dirs(v1)) {
        const std::string path = hierarchy_path(dir, mount);
        const PathNames in_path = names_in_path(path);
        if (in_path.container_id.empty() && in_path.pod_uid.empty())
            continue; // neither a container's nor a pod's: no record to read
        const Workload w = find_workload(path, root, &records);
        if (named(w, arg))
            found.emplace_back(dir, w.display());
    }
    // A cgroup below another that matched is part of it (a container's own sub-cgroups,
    // CRI-O's conmon beside a pod's containers): -G takes the one above with what is below.
    std::erase_if(found, [&](const auto &f) {
        return std::any_of(found.begin(), found.end(), [&](const auto &other) {
            return f.first.starts_with(other.first + "/");
        });
    });
    if (found.size() == 1)
        return resolve_cgroup(found[0].first);
    struct stat st {};
    if (found.empty() && stat(arg.c_str(), &st) == 0)
        throw *as_path; // a file or directory here that is not a cgroup, and no such name
    if (found.empty())
        throw UsageError(fmt::format(
            "cannot use cgroup '{}': it is not a directory, nor a pod or a container this "
            "node runs (give NAMESPACE/POD, NAMESPACE/POD/CONTAINER, a container's name or "
            "id, as memlat top names them, or the cgroup's directory)",
            arg));
    std::string names;
    for (const auto &[dir, shown] : found)
        names += fmt::format("\n  {} ({})", shown, dir);
    throw UsageError(fmt::format("'{}' names {} cgroups; give NAMESPACE/POD/CONTAINER or the "
                                 "directory:{}",
                                 arg, found.size(), names));
}

const Workload &WorkloadNames::of(uint64_t cgroup_id, std::string_view path) {
    const auto now = std::chrono::steady_clock::now();
    auto it = cache_.find(cgroup_id);
    if (it != cache_.end() && now < it->second.retry_at)
        return it->second.workload;
    Workload found = find_workload(path, root_, &records_);
    // Named beyond the path's ids, or nothing to look for: kept; otherwise looked for again,
    // each time a little later.
    const bool final = lookups_ == Lookups::once || records_answered(found);
    std::chrono::seconds wait{1};
    if (it != cache_.end())
        wait = std::min(it->second.retry_after * 2, std::chrono::seconds(64));
    const auto retry = final ? std::chrono::steady_clock::time_point::max() : now + wait;
    if (it == cache_.end()) {
        if (cache_.size() >= max_entries)
            cache_.erase(cache_.begin()); // the oldest cgroup: ids grow as cgroups are made
        if (verbosity_.on() && !found.kind.empty())
            verbose(verbosity_,
                    fmt::format("names: {} is {} (from {})", path, found.display(), found.source));
        it = cache_.emplace(cgroup_id, Entry{std::move(found), std::string(path), retry, wait})
                 .first;
    } else {
        if (verbosity_.on() && found.source != it->second.workload.source)
            verbose(verbosity_,
                    fmt::format("names: {} is {} (from {})", path, found.display(), found.source));
        it->second = Entry{std::move(found), std::string(path), retry, wait};
    }
    return it->second.workload;
}

void WorkloadNames::learn(uint64_t cgroup_id, std::string_view path, const Workload &w) {
    if (w.kind.empty() || w.source == "path")
        return; // nothing, or what the path gives: of() finds it itself
    auto it = cache_.find(cgroup_id);
    if (it != cache_.end() && it->second.workload.source != "path")
        return;
    if (it == cache_.end() && cache_.size() >= max_entries)
        cache_.erase(cache_.begin());
    cache_[cgroup_id] = Entry{w, std::string(path), std::chrono::steady_clock::time_point::max(),
                              std::chrono::seconds(1)};
}

std::optional<Workload> WorkloadNames::known(uint64_t cgroup_id) const {
    auto it = cache_.find(cgroup_id);
    if (it == cache_.end())
        return std::nullopt;
    return it->second.workload;
}

std::map<uint64_t, Workload>
WorkloadNames::of_each(const std::map<uint64_t, std::string> &paths,
                       const std::function<bool(const std::string &)> &exists) {
    std::map<uint64_t, Workload> out;
    for (const auto &[id, path] : paths)
        out.emplace(id, of(id, path));
    std::erase_if(cache_, [&](const auto &entry) {
        return !paths.contains(entry.first) && !exists(entry.second.path);
    });
    return out;
}

void WorkloadNames::forget_others(const std::map<uint64_t, std::string> &live) {
    std::erase_if(cache_, [&](const auto &entry) { return !live.contains(entry.first); });
}

} // namespace memlat
