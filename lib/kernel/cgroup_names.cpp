#include "kernel/cgroup_names.h"

#include <algorithm>
#include <optional>
#include <vector>

namespace memlat {

namespace {

std::vector<std::string_view> components(std::string_view path) {
    std::vector<std::string_view> out;
    while (!path.empty()) {
        const size_t slash = path.find('/');
        std::string_view part = path.substr(0, slash);
        if (!part.empty())
            out.push_back(part);
        if (slash == std::string_view::npos)
            break;
        path.remove_prefix(slash + 1);
    }
    return out;
}

bool is_hex_id(std::string_view s) {
    return s.size() >= 12 && std::all_of(s.begin(), s.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
}

// `part` without `prefix` and `suffix`, if it has both.
std::optional<std::string_view> between(std::string_view part, std::string_view prefix,
                                        std::string_view suffix) {
    if (part.size() <= prefix.size() + suffix.size() || !part.starts_with(prefix) ||
        !part.ends_with(suffix))
        return std::nullopt;
    return part.substr(prefix.size(), part.size() - prefix.size() - suffix.size());
}

struct RuntimePrefix {
    std::string_view prefix;
    std::string_view runtime;
};
// The runtimes' names for a container's cgroup: "PREFIXID.scope" under systemd, and (podman
// with cgroupfs) "libpod-ID".
constexpr RuntimePrefix runtime_prefixes[] = {
    {"cri-containerd-", "containerd"},
    {"crio-", "cri-o"},
    {"docker-", "docker"},
    {"libpod-", "podman"},
};

// A container's id and runtime in one path component: a runtime's scope or a bare id.
std::optional<std::pair<std::string_view, std::string_view>> container_in(std::string_view part) {
    for (const auto &[prefix, runtime] : runtime_prefixes) {
        for (std::string_view suffix : {".scope", ""})
            if (auto id = between(part, prefix, suffix); id && is_hex_id(*id))
                return std::pair{*id, runtime};
    }
    if (is_hex_id(part))
        return std::pair{part, std::string_view{}};
    return std::nullopt;
}

// A pod's uid in one component: kubepods-QOS-podUID.slice (systemd driver; the uid's dashes
// written as underscores), kubepods-podUID.slice (guaranteed), or podUID (cgroupfs driver).
std::optional<std::string> pod_uid(std::string_view part) {
    std::optional<std::string_view> uid;
    for (std::string_view prefix :
         {"kubepods-burstable-pod", "kubepods-besteffort-pod", "kubepods-pod"})
        if (!uid)
            uid = between(part, prefix, ".slice");
    if (!uid && part.starts_with("pod") && part.size() > 3 + 8)
        uid = part.substr(3);
    if (!uid)
        return std::nullopt;
    std::string out(*uid);
    std::replace(out.begin(), out.end(), '_', '-');
    return out;
}

void kubernetes_names(std::vector<std::string_view>::const_iterator kube,
                      std::vector<std::string_view>::const_iterator end, PathNames &out) {
    out.manager = PathNames::Manager::Kubernetes;
    out.qos = "guaranteed";
    for (auto it = kube; it != end; ++it) {
        if (it->find("burstable") != std::string_view::npos)
            out.qos = "burstable";
        else if (it->find("besteffort") != std::string_view::npos)
            out.qos = "besteffort";
        auto uid = pod_uid(*it);
        if (!uid)
            continue;
        out.pod_uid = *uid;
        if (it + 1 != end)
            if (auto c = container_in(*(it + 1))) {
                out.container_id = std::string(c->first);
                out.runtime = std::string(c->second);
            }
        return;
    }
    out.unit = std::string(*(end - 1));
}

} // namespace

PathNames names_in_path(std::string_view cgroup_path) {
    PathNames out;
    const auto parts = components(cgroup_path);
    // Kubernetes: anything under a kubepods component.
    const auto kube = std::find_if(parts.begin(), parts.end(), [](std::string_view p) {
        return p == "kubepods" || p.starts_with("kubepods.") || p.starts_with("kubepods-");
    });
    if (kube != parts.end()) {
        kubernetes_names(kube, parts.end(), out);
        return out;
    }
    if (parts.empty())
        return out;
    // A container's cgroup, or one below it (crun under systemd puts the container's tasks
    // in SCOPE/container): the nearest runtime's component from the end.
    for (size_t i = parts.size(); i-- > 0;) {
        const std::string_view above = i > 0 ? parts[i - 1] : "";
        if (auto c = container_in(parts[i]); c && (!c->second.empty() || above == "docker")) {
            out.container_id = std::string(c->first);
            out.runtime = c->second.empty() ? "docker" : std::string(c->second);
            out.manager = PathNames::Manager::Container;
            return out;
        }
    }
    const std::string_view last = parts.back();
    const std::string_view parent = parts.size() >= 2 ? parts[parts.size() - 2] : "";
    if (auto name = between(last, "lxc.payload.", ""); name) {
        out.manager = PathNames::Manager::Lxc;
        out.unit = std::string(*name);
        return out;
    }
    if (parent == "lxc") {
        out.manager = PathNames::Manager::Lxc;
        out.unit = std::string(last);
        return out;
    }
    for (std::string_view unit : {".service", ".scope", ".slice"})
        if (last.ends_with(unit)) {
            out.manager = PathNames::Manager::Systemd;
            out.unit = std::string(last);
        }
    return out;
}

} // namespace memlat
