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

// A container's id in one path component: a runtime's systemd scope or a bare id.
std::optional<std::string_view> container_id(std::string_view part) {
    for (std::string_view prefix : {"cri-containerd-", "crio-", "docker-", "libpod-"})
        if (auto id = between(part, prefix, ".scope"); id && is_hex_id(*id))
            return id;
    if (is_hex_id(part))
        return part;
    return std::nullopt;
}

// A pod's uid (and its QoS class) in one component: kubepods-QOS-podUID.slice (systemd
// driver; the uid's dashes written as underscores), kubepods-podUID.slice (guaranteed), or
// podUID (cgroupfs driver).
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

std::string short_id(std::string_view id, size_t n) {
    return std::string(id.substr(0, std::min(id.size(), n)));
}

} // namespace

std::string workload_name(std::string_view cgroup_path) {
    const auto parts = components(cgroup_path);
    // Kubernetes: anything under a kubepods component.
    const auto kube = std::find_if(parts.begin(), parts.end(), [](std::string_view p) {
        return p == "kubepods" || p.starts_with("kubepods.") || p.starts_with("kubepods-");
    });
    if (kube != parts.end()) {
        std::string qos = "guaranteed";
        for (auto it = kube; it != parts.end(); ++it) {
            if (it->find("burstable") != std::string_view::npos)
                qos = "burstable";
            else if (it->find("besteffort") != std::string_view::npos)
                qos = "besteffort";
            auto uid = pod_uid(*it);
            if (!uid)
                continue;
            const std::string pod = "k8s pod " + short_id(*uid, 8);
            if (it + 1 != parts.end())
                if (auto id = container_id(*(it + 1)))
                    return pod + "/" + short_id(*id, 12);
            return pod + " (" + qos + ")";
        }
        return "k8s " + std::string(parts.back());
    }
    if (parts.empty())
        return "";
    const std::string_view last = parts.back();
    if (auto id = between(last, "docker-", ".scope"); id && is_hex_id(*id))
        return "docker " + short_id(*id, 12);
    if (parts.size() >= 2 && parts[parts.size() - 2] == "docker" && is_hex_id(last))
        return "docker " + short_id(last, 12);
    if (auto id = between(last, "libpod-", ".scope"); id && is_hex_id(*id))
        return "podman " + short_id(*id, 12);
    if (auto name = between(last, "lxc.payload.", ""); name)
        return "lxc " + std::string(*name);
    if (parts.size() >= 2 && parts[parts.size() - 2] == "lxc")
        return "lxc " + std::string(last);
    for (std::string_view unit : {".service", ".scope", ".slice"})
        if (last.ends_with(unit))
            return std::string(last);
    return "";
}

} // namespace memlat
