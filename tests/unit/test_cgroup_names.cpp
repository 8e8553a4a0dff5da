// Names of workloads from cgroup paths alone (lib/kernel/cgroup_names.h), as the kubelet's
// drivers, the container runtimes and systemd write them: no record of the host is read (the
// root given is empty), so what is shown is what the path holds.
#include <gtest/gtest.h>

#include <algorithm>

#include "kernel/workloads.h"

namespace {
const std::string id64 = "4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e";
const std::string uid = "3f2a9c1e-7b6d-4c2a-9e1f-0123456789ab";
std::string systemd_uid() {
    std::string u = uid;
    std::replace(u.begin(), u.end(), '-', '_');
    return u;
}
std::string workload_name(const std::string &path) {
    return memlat::find_workload(path, "/nonexistent-memlat-root").display();
}
} // namespace

TEST(CgroupNames, KubernetesSystemdDriver) {
    const std::string pod = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                            systemd_uid() + ".slice";
    EXPECT_EQ("k8s pod 3f2a9c1e (burstable)", workload_name(pod));
    EXPECT_EQ("k8s pod 3f2a9c1e/4d5e6f7a8b9c",
              workload_name(pod + "/cri-containerd-" + id64 + ".scope"));
    EXPECT_EQ("k8s pod 3f2a9c1e/4d5e6f7a8b9c", workload_name(pod + "/crio-" + id64 + ".scope"));
    EXPECT_EQ("k8s pod 3f2a9c1e (guaranteed)",
              workload_name("/kubepods.slice/kubepods-pod" + systemd_uid() + ".slice"));
    EXPECT_EQ("k8s kubepods-besteffort.slice",
              workload_name("/kubepods.slice/kubepods-besteffort.slice"));
    const auto w = memlat::find_workload(pod + "/crio-" + id64 + ".scope", "");
    EXPECT_EQ("container", w.kind);
    EXPECT_EQ("cri-o", w.runtime);
    EXPECT_EQ(uid, w.pod_uid);
    EXPECT_EQ("burstable", w.qos);
}

TEST(CgroupNames, KubernetesCgroupfsDriver) {
    EXPECT_EQ("k8s pod 3f2a9c1e/4d5e6f7a8b9c",
              workload_name("/kubepods/besteffort/pod" + uid + "/" + id64));
    EXPECT_EQ("k8s pod 3f2a9c1e (guaranteed)", workload_name("/kubepods/pod" + uid));
    EXPECT_EQ("k8s pod 3f2a9c1e (besteffort)", workload_name("/kubepods/besteffort/pod" + uid));
}

TEST(CgroupNames, ContainersOutsideKubernetes) {
    EXPECT_EQ("docker 4d5e6f7a8b9c", workload_name("/system.slice/docker-" + id64 + ".scope"));
    EXPECT_EQ("docker 4d5e6f7a8b9c", workload_name("/docker/" + id64));
    EXPECT_EQ("podman 4d5e6f7a8b9c", workload_name("/machine.slice/libpod-" + id64 + ".scope"));
    // Podman with the cgroupfs manager: no scope.
    EXPECT_EQ("podman 4d5e6f7a8b9c", workload_name("/libpod_parent/libpod-" + id64));
    EXPECT_EQ("lxc web", workload_name("/lxc.payload.web"));
    EXPECT_EQ("lxc web", workload_name("/lxc/web"));
}

TEST(CgroupNames, SystemdUnitsAndNothingKnown) {
    EXPECT_EQ("nginx.service", workload_name("/system.slice/nginx.service"));
    EXPECT_EQ("session-3.scope", workload_name("/user.slice/user-1000.slice/session-3.scope"));
    EXPECT_EQ("", workload_name("/"));
    EXPECT_EQ("", workload_name(""));
    EXPECT_EQ("", workload_name("/memlat_top_123"));
    // A docker- prefix without an id is nobody's container.
    EXPECT_EQ("docker-compose.scope", workload_name("/docker-compose.scope"));
    // A hex-looking directory outside a runtime's parent is not taken for a container.
    EXPECT_EQ("", workload_name("/" + id64));
    EXPECT_TRUE(memlat::find_workload("/memlat_top_123", "").kind.empty());
}

// crun under systemd puts a container's tasks in SCOPE/container: still that container's.
TEST(CgroupNames, BelowAContainersScope) {
    EXPECT_EQ("podman 4d5e6f7a8b9c",
              workload_name("/machine.slice/libpod-" + id64 + ".scope/container"));
    EXPECT_EQ("docker 4d5e6f7a8b9c",
              workload_name("/system.slice/docker-" + id64 + ".scope/container"));
}
