// The names of what runs in a cgroup from the records of a node (lib/kernel/workloads.h), in a
// scratch root laid out as the runtimes and the kubelet lay out theirs:
// - containerd's CRI plugin: /run/containerd/io.containerd.runtime.v2.task/NAMESPACE/ID/
//   config.json, the OCI spec with the annotations of internal/cri/annotations/annotations.go;
// - CRI-O: /run/containers/storage/overlay-containers/ID/userdata/config.json, with the
//   kubelet's labels (pkg/kubelet/types/labels.go) as annotations;
// - Docker: /var/lib/docker/containers/ID/config.v2.json (Name "/web", Config.Image,
//   Config.Labels; cri-dockerd puts the kubelet's labels there);
// - containers/storage (Podman): /var/lib/containers/storage/overlay-containers/
//   containers.json, a list of {id, names, image, metadata (a JSON string)};
// - the kubelet: /var/log/pods/NAMESPACE_POD_UID/CONTAINER/ (pkg/kubelet/kuberuntime/
//   helpers.go) and /var/log/containers/POD_NAMESPACE_CONTAINER-ID.log
//   (kuberuntime_container.go).
#include <gtest/gtest.h>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "kernel/workloads.h"

namespace fs = std::filesystem;
using memlat::find_workload;
using memlat::Workload;
using nlohmann::json;

namespace {

const std::string id_a = "4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e";
const std::string id_b = "b802bb55fb948beb8d3c787f6cd1b136b9da891d972cd44f1535c8cc5edf46a9";
const std::string uid = "3f2a9c1e-7b6d-4c2a-9e1f-0123456789ab";

std::string underscored(std::string s) {
    std::replace(s.begin(), s.end(), '-', '_');
    return s;
}

std::string pod_path(const std::string &qos) {
    return "/kubepods.slice/kubepods-" + qos + ".slice/kubepods-" + qos + "-pod" +
           underscored(uid) + ".slice";
}

class ScratchRoot : public ::testing::Test {
  protected:
    void SetUp() override {
        char dir[] = "/tmp/memlat_workloads_XXXXXX";
        ASSERT_NE(nullptr, mkdtemp(dir));
        root = dir;
    }
    void TearDown() override { fs::remove_all(root); }
    void write(const std::string &path, const std::string &text) {
        fs::create_directories(fs::path(root + path).parent_path());
        std::ofstream(root + path) << text;
    }
    void write_json(const std::string &path, const json &j) { write(path, j.dump()); }
    std::string root;
};

} // namespace

TEST_F(ScratchRoot, ContainerdBundleNamesPodAndContainer) {
    write_json("/run/containerd/io.containerd.runtime.v2.task/k8s.io/" + id_a + "/config.json",
               {{"ociVersion", "1.1.0"},
                {"annotations",
                 {{"io.kubernetes.cri.container-type", "container"},
                  {"io.kubernetes.cri.container-name", "web"},
                  {"io.kubernetes.cri.sandbox-name", "checkout-7d9f"},
                  {"io.kubernetes.cri.sandbox-namespace", "shop"},
                  {"io.kubernetes.cri.sandbox-uid", uid},
                  {"io.kubernetes.cri.image-name", "registry.local/web:1.2"}}}});
    const Workload w =
        find_workload(pod_path("burstable") + "/cri-containerd-" + id_a + ".scope", root);
    EXPECT_EQ("container", w.kind);
    EXPECT_EQ("containerd", w.runtime);
    EXPECT_EQ("shop", w.k8s_namespace);
    EXPECT_EQ("checkout-7d9f", w.pod);
    EXPECT_EQ("web", w.container);
    EXPECT_EQ(id_a, w.container_id);
    EXPECT_EQ("registry.local/web:1.2", w.image);
    EXPECT_EQ("burstable", w.qos);
    EXPECT_EQ("shop/checkout-7d9f/web", w.display());
    EXPECT_EQ("/run/containerd/io.containerd.runtime.v2.task/k8s.io/" + id_a + "/config.json",
              w.source);
    const json j = workload_json(w);
    EXPECT_EQ("shop", j["namespace"]);
    EXPECT_EQ("checkout-7d9f", j["pod"]);
    EXPECT_FALSE(j.contains("unit")); // empty fields are left out
}

TEST_F(ScratchRoot, ContainerdSandboxIsThePodsInfrastructure) {
    write_json("/run/containerd/io.containerd.runtime.v2.task/k8s.io/" + id_b + "/config.json",
               {{"annotations",
                 {{"io.kubernetes.cri.container-type", "sandbox"},
                  {"io.kubernetes.cri.sandbox-name", "checkout-7d9f"},
                  {"io.kubernetes.cri.sandbox-namespace", "shop"}}}});
    EXPECT_EQ("shop/checkout-7d9f/POD",
              find_workload(pod_path("besteffort") + "/cri-containerd-" + id_b + ".scope", root)
                  .display());
}

TEST_F(ScratchRoot, CrioAnnotations) {
    write_json("/run/containers/storage/overlay-containers/" + id_a + "/userdata/config.json",
               {{"annotations",
                 {{"io.kubernetes.pod.name", "db-0"},
                  {"io.kubernetes.pod.namespace", "data"},
                  {"io.kubernetes.pod.uid", uid},
                  {"io.kubernetes.container.name", "postgres"},
                  {"io.kubernetes.cri-o.ImageName", "postgres:16"}}}});
    const Workload w = find_workload("/kubepods/burstable/pod" + uid + "/crio-" + id_a, root);
    EXPECT_EQ("data/db-0/postgres", w.display());
    EXPECT_EQ("cri-o", w.runtime);
    EXPECT_EQ("postgres:16", w.image);
}

TEST_F(ScratchRoot, DockerConfigAndCriDockerdLabels) {
    write_json("/var/lib/docker/containers/" + id_a + "/config.v2.json",
               {{"ID", id_a}, {"Name", "/web"}, {"Config", {{"Image", "nginx:1.25"}}}});
    Workload w = find_workload("/docker/" + id_a, root);
    EXPECT_EQ("docker web", w.display());
    EXPECT_EQ("nginx:1.25", w.image);
    EXPECT_EQ("/var/lib/docker/containers/" + id_a + "/config.v2.json", w.source);
    // cri-dockerd: the kubelet's labels name the pod.
    write_json("/var/lib/docker/containers/" + id_b + "/config.v2.json",
               {{"Name", "/k8s_app_api-5c_prod_" + uid + "_0"},
                {"Config",
                 {{"Image", "api:3"},
                  {"Labels",
                   {{"io.kubernetes.pod.name", "api-5c"},
                    {"io.kubernetes.pod.namespace", "prod"},
                    {"io.kubernetes.container.name", "app"}}}}}});
    w = find_workload("/kubepods/pod" + uid + "/" + id_b, root);
    EXPECT_EQ("prod/api-5c/app", w.display());
    EXPECT_EQ("docker", w.runtime);
}

TEST_F(ScratchRoot, PodmanStorageList) {
    const json list = json::array(
        {{{"id", id_b},
          {"names", {"memlat-web"}},
          {"image", "fe2b7cfc"},
          {"metadata", R"({"image-name":"localhost/memlat-busybox:test","name":"memlat-web"})"}}});
    write_json("/var/lib/containers/storage/overlay-containers/containers.json", list);
    const Workload w = find_workload("/libpod_parent/libpod-" + id_b, root);
    EXPECT_EQ("podman memlat-web", w.display());
    EXPECT_EQ("localhost/memlat-busybox:test", w.image);
    EXPECT_EQ("podman", w.runtime);
    // A container the list does not hold keeps the id its path gives.
    EXPECT_EQ("podman 4d5e6f7a8b9c",
              find_workload("/libpod_parent/libpod-" + id_a, root).display());
}

TEST_F(ScratchRoot, KubeletLogDirectoriesNameWhatTheRuntimeDoesNot) {
    fs::create_directories(root + "/var/log/pods/shop_checkout-7d9f_" + uid + "/web");
    fs::create_directories(root + "/var/log/containers");
    fs::create_symlink("/var/log/pods/shop_checkout-7d9f_" + uid + "/web/0.log",
                       root + "/var/log/containers/checkout-7d9f_shop_web-" + id_a + ".log");
    Workload w = find_workload(pod_path("burstable") + "/cri-containerd-" + id_a + ".scope", root);
    EXPECT_EQ("shop/checkout-7d9f/web", w.display());
    EXPECT_EQ("/var/log/containers/checkout-7d9f_shop_web-" + id_a + ".log", w.source);
    // The pod's own cgroup: its directory.
    w = find_workload(pod_path("burstable"), root);
    EXPECT_EQ("pod", w.kind);
    EXPECT_EQ("shop/checkout-7d9f", w.display());
    EXPECT_EQ("/var/log/pods/shop_checkout-7d9f_" + uid, w.source);
}

TEST_F(ScratchRoot, BrokenRecordsAreNotNames) {
    write("/run/containerd/io.containerd.runtime.v2.task/k8s.io/" + id_a + "/config.json",
          "{not json");
    write_json("/var/lib/docker/containers/" + id_a + "/config.v2.json",
               {{"Name", 42}, {"Config", "no object"}});
    write("/var/lib/containers/storage/overlay-containers/containers.json",
          "[{\"id\": \"" + id_a + "\", \"names\": \"not a list\"}]");
    const Workload w =
        find_workload(pod_path("burstable") + "/cri-containerd-" + id_a + ".scope", root);
    EXPECT_EQ("k8s pod 3f2a9c1e/4d5e6f7a8b9c", w.display());
    EXPECT_EQ("", w.pod);
}

TEST_F(ScratchRoot, CacheLooksAgainForANameNotYetWritten) {
    memlat::WorkloadNames names({}, memlat::WorkloadNames::Lookups::retried, root);
    const std::string path = "/docker/" + id_a;
    EXPECT_EQ("docker 4d5e6f7a8b9c", names.of(7, path).display());
    write_json("/var/lib/docker/containers/" + id_a + "/config.v2.json", {{"Name", "/late"}});
    // Within the second: the first answer.
    EXPECT_EQ("docker 4d5e6f7a8b9c", names.of(7, path).display());
    sleep(1);
    EXPECT_EQ("docker late", names.of(7, path).display());
    // Found: kept though the record goes (a container's records go before its cgroup).
    fs::remove_all(root + "/var/lib/docker");
    EXPECT_EQ("docker late", names.of(7, path).display());
    names.forget_others({{8, "/other"}});
    EXPECT_EQ(0u, names.size());
    EXPECT_FALSE(names.known(7).has_value());
}

// containers.json holds every Podman container of the node: parsed once while it stays, so
// a thousand containers named at once cost one parse. A file rewritten in place, its size
// and stamp kept (only a test does that), shows the cache is what answered.
TEST_F(ScratchRoot, PodmanListParsedOncePerChange) {
    const std::string file = "/var/lib/containers/storage/overlay-containers/containers.json";
    write(file, "[{\"id\": \"" + id_a + "\", \"names\": [\"alpha\"]}]");
    const auto stamp = fs::last_write_time(root + file);
    usleep(20'000); // past the file system's tick: the read is trusted
    memlat::RecordCache records;
    EXPECT_EQ("podman alpha",
              find_workload("/libpod_parent/libpod-" + id_a, root, &records).display());
    write(file, "[{\"id\": \"" + id_a + "\", \"names\": [\"bravo\"]}]");
    fs::last_write_time(root + file, stamp);
    EXPECT_EQ("podman alpha",
              find_workload("/libpod_parent/libpod-" + id_a, root, &records).display());
    fs::last_write_time(root + file, stamp + std::chrono::seconds(1));
    usleep(110'000); // read again at most every 100 ms
    EXPECT_EQ("podman bravo",
              find_workload("/libpod_parent/libpod-" + id_a, root, &records).display());
}

// Names read as a cgroup was made (loading/cgroup_births.h) stand for the cgroup once its
// records are gone; what only the path gives, or nothing, is not taught.
TEST_F(ScratchRoot, LearnedNamesOutliveTheirRecords) {
    memlat::WorkloadNames names({}, memlat::WorkloadNames::Lookups::retried, root);
    const std::string path = "/docker/" + id_a;
    write_json("/var/lib/docker/containers/" + id_a + "/config.v2.json", {{"Name", "/brief"}});
    const Workload at_birth = find_workload(path, root);
    fs::remove_all(root + "/var/lib/docker");
    names.learn(7, path, at_birth);
    EXPECT_EQ("docker brief", names.of(7, path).display());
    // A later answer from the path alone does not replace it...
    names.learn(7, path, find_workload(path, root));
    EXPECT_EQ("docker brief", names.of(7, path).display());
    // ...nor is a path's answer, or an empty one, kept in the cache.
    names.learn(8, "/docker/" + id_b, find_workload("/docker/" + id_b, root));
    names.learn(9, "/plain", Workload{});
    EXPECT_FALSE(names.known(8).has_value());
    EXPECT_FALSE(names.known(9).has_value());
}

// The kubelet's directories hold an entry per pod: listed once while they do not change, and
// an entry made in the same clock tick as the listing is not missed.
TEST_F(ScratchRoot, ListingsKeptWhileTheDirectoryStays) {
    memlat::RecordCache listings;
    fs::create_directories(root + "/pods/a");
    EXPECT_EQ(1u, listings.listing(root + "/pods").size());
    fs::create_directories(root + "/pods/b"); // within the tick of the listing, most likely
    usleep(110'000);                          // listed again at most every 100 ms
    EXPECT_EQ(2u, listings.listing(root + "/pods").size());
    EXPECT_EQ(0u, listings.listing(root + "/none").size());
}
