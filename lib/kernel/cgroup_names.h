// What a cgroup's path says about what runs in it, as the managers that made it named it:
// Kubernetes pods and their containers (kubelet's systemd and cgroupfs drivers, containerd,
// CRI-O and Docker as runtimes), Docker and Podman containers, LXC, and systemd units. Only the
// path is read: a pod's name lives in the kubelet, a container's in its runtime, neither of
// which a copied binary can ask; the ids shown are those `crictl ps` and `docker ps` print.
#pragma once

#include <string>
#include <string_view>

namespace memlat {

// "k8s pod 3f2a9c1e/4d5e6f7a8b9c" (pod uid's first 8 characters / container id's first 12),
// "k8s pod 3f2a9c1e (burstable)" for a pod's own cgroup, "docker 4d5e6f7a8b9c",
// "podman 4d5e6f7a8b9c", "lxc web", "nginx.service"; "" when the path names nothing known.
std::string workload_name(std::string_view cgroup_path);

} // namespace memlat
