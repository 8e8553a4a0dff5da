// What a cgroup's path says about what runs in it, as the managers that made it named it:
// Kubernetes pods and their containers (kubelet's systemd and cgroupfs drivers, containerd,
// CRI-O and Docker as runtimes), Docker and Podman containers, LXC, and systemd units. Only the
// path is read here; the names the path does not hold (a pod's, a container's) are looked up
// in the host's records by kernel/workloads.h.
#pragma once

#include <string>
#include <string_view>

namespace memlat {

struct PathNames {
    enum class Manager { None, Kubernetes, Container, Lxc, Systemd };
    Manager manager = Manager::None;
    std::string runtime;      // "containerd", "cri-o", "docker", "podman" where the path says
    std::string pod_uid;      // Kubernetes: the pod's uid, with its dashes
    std::string qos;          // Kubernetes: "guaranteed", "burstable" or "besteffort"
    std::string container_id; // the runtime's id (hex, 12 characters at least); "" for a pod
    std::string unit;         // a systemd unit or slice; an LXC container's name; Kubernetes:
                              // the QoS slice or directory of a path above any pod
};

PathNames names_in_path(std::string_view cgroup_path);

} // namespace memlat
