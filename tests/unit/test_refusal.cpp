// Messages for a kernel that refuses a BPF object or program: they name the map or program and
// the kernel feature it needs, never only an errno.
#include <gtest/gtest.h>

#include "kernel/features.h"
#include "loading/fallback.h"

using namespace memlat;

namespace {

// What libbpf 1.1 prints when Linux 5.4 cannot create a ring buffer.
const std::vector<std::string> ringbuf_refused{
    "libbpf: Error in bpf_create_map_xattr(events):Invalid argument(-22). Retrying without BTF.",
    "libbpf: map 'events': failed to create: Invalid argument(-22)",
    "libbpf: failed to load object 'drsnoop_bpf'",
    "libbpf: failed to load BPF skeleton 'drsnoop_bpf': -22",
};

std::string requirement_of_events(const std::string &map) {
    return map == "events" ? map_type_requirement(BPF_MAP_TYPE_RINGBUF, false) : "";
}

} // namespace

TEST(Refusal, FindsTheMapLibbpfNames) {
    auto map = refused_map(ringbuf_refused);
    ASSERT_TRUE(map.has_value());
    EXPECT_EQ("events", map->name);
    EXPECT_EQ("Invalid argument(-22)", map->reason);
}

TEST(Refusal, NoMapInOtherFailures) {
    EXPECT_FALSE(refused_map({"libbpf: prog 'x': failed to load: -22"}).has_value());
    EXPECT_FALSE(refused_map({}).has_value());
}

TEST(Refusal, MessageNamesMapFeatureAndKernel) {
    std::string text =
        object_refusal_message(EINVAL, ringbuf_refused, "5.4.0-150-generic", requirement_of_events);
    EXPECT_EQ("The running kernel (5.4.0-150-generic) could not create the BPF map 'events' (a "
              "BPF ring buffer: Linux 5.8): Invalid argument(-22).",
              text);
}

TEST(Refusal, TaskStorageNeeds511) {
    std::vector<std::string> lines{"libbpf: map 'starts': failed to create: Invalid argument(-22)"};
    std::string text = object_refusal_message(EINVAL, lines, "5.10.0-46-amd64", [](auto &) {
        return map_type_requirement(BPF_MAP_TYPE_TASK_STORAGE, false);
    });
    EXPECT_NE(std::string::npos, text.find("'starts'"));
    EXPECT_NE(std::string::npos, text.find("task-local storage: Linux 5.11"));
    EXPECT_NE(std::string::npos, text.find("5.10.0-46-amd64"));
}

TEST(Refusal, WithoutAMapQuotesLibbpf) {
    std::string text =
        object_refusal_message(EINVAL, {"libbpf: something else"}, "5.4.0", requirement_of_events);
    EXPECT_EQ("The running kernel (5.4.0) refused the BPF object: Invalid argument.\nlibbpf said: "
              "libbpf: something else",
              text);
}

TEST(Refusal, GlobalVariablesAndProgramKinds) {
    EXPECT_NE(std::string::npos,
              map_type_requirement(BPF_MAP_TYPE_ARRAY, true).find("global variables: Linux 5.2"));
    EXPECT_EQ("", map_type_requirement(BPF_MAP_TYPE_HASH, false));
    EXPECT_EQ("tp_btf programs need Linux 5.5 and the kernel's own BTF",
              program_requirement(BPF_PROG_TYPE_TRACING, BPF_TRACE_RAW_TP));
    EXPECT_NE(std::string::npos,
              program_requirement(BPF_PROG_TYPE_TRACING, BPF_TRACE_FENTRY).find("Linux 5.5"));
    EXPECT_EQ("raw_tp programs need Linux 4.17",
              program_requirement(BPF_PROG_TYPE_RAW_TRACEPOINT, BPF_CGROUP_INET_INGRESS));
}

TEST(Refusal, ThisKernelIsAboveTheFloor) {
    // Run as root by the test suite: this kernel (5.5+) has every floor feature; unprivileged,
    // the probe cannot tell and says nothing either.
    EXPECT_EQ("", missing_floor_feature());
}
