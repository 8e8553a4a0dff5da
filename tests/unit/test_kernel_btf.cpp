// The choice of BTF (kernel/btf.h) with injected host identities, paths and indexes; the
// error text when nothing fits; and the real embedded index this binary links (tlbflush's).
#include <bpf/btf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/errors.h"
#include "kernel/btf.h"

using namespace memlat;

namespace {

const unsigned char no_data[1] = {0};

// Index entries whose data is never read by the choice.
constexpr std::array<EmbeddedBtf, 3> fake_index{{
    {"debian", "11", "Debian 11", "5.10.0-46-amd64", no_data, 0, 0},
    {"debian", "12", "Debian 12", "6.1.0-56-amd64", no_data, 0, 0},
    {"ubuntu", "22.04", "Ubuntu 22.04", "6.1.0-56-amd64", no_data, 0, 0},
}};

HostIdentity host(std::string release, std::string_view os_release) {
    return HostIdentity::from_os_release(std::move(release), os_release);
}

const char *debian12 = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian "
                       "GNU/Linux\"\nVERSION_ID=\"12\"\nID=debian\n";

// A request that sees no sysfs BTF (a path that cannot exist).
BtfRequest without_kernel_btf() {
    BtfRequest r;
    r.sysfs_path = "/nonexistent/sys/kernel/btf/vmlinux";
    r.kernel_has_btf = false;
    return r;
}

std::string error_of(const BtfRequest &r, const HostIdentity &h) {
    try {
        choose_btf(r, h, fake_index);
    } catch (const RuntimeError &e) {
        return e.what();
    }
    return "";
}

TEST(KernelBtf, ParsesOsRelease) {
    auto h = host("6.1.0-56-amd64", debian12);
    EXPECT_EQ(h.distro_id, "debian");
    EXPECT_EQ(h.distro_version, "12");
    EXPECT_EQ(h.distro_name, "Debian GNU/Linux 12 (bookworm)");
    auto bare = host("5.4.0-216-generic", "ID=ubuntu\nNAME='Ubuntu'\nVERSION_ID=20.04\n");
    EXPECT_EQ(bare.distro_id, "ubuntu");
    EXPECT_EQ(bare.distro_name, "Ubuntu 20.04");
    EXPECT_EQ(host("x", "").distro_name, "unknown distribution");
}

TEST(KernelBtf, RunningHostReadsTheGivenOsRelease) {
    char name[] = "/tmp/memlat-os-release-XXXXXX";
    int fd = mkstemp(name);
    ASSERT_GE(fd, 0);
    std::string text = "ID=rhel\nVERSION_ID=\"8.10\"\nNAME=\"Red Hat Enterprise Linux\"\n";
    ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    close(fd);
    auto h = HostIdentity::running(name);
    unlink(name);
    EXPECT_EQ(h.distro_id, "rhel");
    EXPECT_EQ(h.distro_name, "Red Hat Enterprise Linux 8.10");
    EXPECT_FALSE(h.release.empty()); // uname -r of this machine
}

TEST(KernelBtf, OptionBeatsEnvironmentBeatsKernel) {
    BtfRequest r;
    r.sysfs_path = "/proc/self/exe"; // readable: stands for the kernel's own BTF
    r.option_path = "/a.btf";
    r.environment_path = "/b.btf";
    auto h = host("6.1.0-56-amd64", debian12);
    auto c = choose_btf(r, h, fake_index);
    EXPECT_EQ(c.origin, BtfChoice::Origin::Option);
    EXPECT_EQ(c.describe(), "BTF: /a.btf (--btf)");
    r.option_path.clear();
    c = choose_btf(r, h, fake_index);
    EXPECT_EQ(c.origin, BtfChoice::Origin::Environment);
    EXPECT_EQ(c.describe(), "BTF: /b.btf (MEMLAT_BTF)");
    r.environment_path.clear();
    c = choose_btf(r, h, fake_index);
    EXPECT_EQ(c.origin, BtfChoice::Origin::Kernel);
    EXPECT_EQ(c.describe(), "BTF: /proc/self/exe");
}

TEST(KernelBtf, KernelBtfDisabledFallsToEmbedded) {
    BtfRequest r;
    r.sysfs_path = "/proc/self/exe";
    r.kernel_has_btf = false; // MEMLAT_DISABLE_FEATURES=kernel_btf
    auto c = choose_btf(r, host("5.10.0-46-amd64", debian12), fake_index);
    ASSERT_EQ(c.origin, BtfChoice::Origin::Embedded);
    EXPECT_EQ(c.describe(), "BTF: embedded, Debian 11, 5.10.0-46-amd64");
}

TEST(KernelBtf, EmbeddedMatchesTheReleaseAndUsesTheDistroOnlyToBreakTies) {
    auto r = without_kernel_btf();
    // A Debian 12 host running Debian 11's kernel (or an Ubuntu container on a Debian 11
    // host): the release decides.
    EXPECT_STREQ(
        choose_btf(r, host("5.10.0-46-amd64", "ID=ubuntu\n"), fake_index).embedded->distro_name,
        "Debian 11");
    // No os-release at all (initramfs).
    EXPECT_STREQ(choose_btf(r, host("5.10.0-46-amd64", ""), fake_index).embedded->release,
                 "5.10.0-46-amd64");
    // Two distributions with one release string: the host's ID picks.
    EXPECT_STREQ(
        choose_btf(r, host("6.1.0-56-amd64", "ID=ubuntu\n"), fake_index).embedded->distro_name,
        "Ubuntu 22.04");
    EXPECT_STREQ(choose_btf(r, host("6.1.0-56-amd64", debian12), fake_index).embedded->distro_name,
                 "Debian 12");
    EXPECT_EQ(error_of(r, host("6.1.0-56-amd64", "ID=fedora\n")).empty(), false);
    EXPECT_EQ(find_embedded(fake_index, host("6.1.0-57-amd64", debian12)), nullptr);
}

TEST(KernelBtf, ErrorNamesKernelPlacesCommandAndOption) {
    auto text = error_of(without_kernel_btf(),
                         host("5.4.0-216-generic", "PRETTY_NAME=\"Ubuntu 20.04.6 LTS\"\n"
                                                   "ID=ubuntu\nVERSION_ID=\"20.04\"\n"));
    EXPECT_NE(text.find("No BTF for this kernel (5.4.0-216-generic, Ubuntu 20.04.6 LTS)"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("--btf FILE or MEMLAT_BTF=FILE: not given"), std::string::npos);
    EXPECT_NE(text.find("/nonexistent/sys/kernel/btf/vmlinux: missing"), std::string::npos);
    EXPECT_NE(text.find("BTF embedded in this tool: Debian 11 5.10.0-46-amd64, Debian 12 "
                        "6.1.0-56-amd64, Ubuntu 22.04 6.1.0-56-amd64 (none for "
                        "5.4.0-216-generic)"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("  pahole --btf_encode_detached=5.4.0-216-generic.btf "
                        "/usr/lib/debug/boot/vmlinux-5.4.0-216-generic\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("--btf 5.4.0-216-generic.btf"), std::string::npos);
}

TEST(KernelBtf, ErrorSaysWhenTheKernelBtfIsOnlyHidden) {
    auto r = without_kernel_btf();
    r.sysfs_path = "/proc/self/exe";
    auto text = error_of(r, host("6.18.0", debian12));
    EXPECT_NE(text.find("present, but ignored (MEMLAT_DISABLE_FEATURES=kernel_btf)"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("the kernel's own BTF can still be given as a file: cp "),
              std::string::npos);
}

// The index linked into this binary is tlbflush's, built from btf/kernels.txt.
TEST(EmbeddedIndex, ListsTheKernelsOfKernelsTxt) {
    auto index = embedded_btfs();
    std::vector<std::string> kernels;
    for (const auto &e : index)
        kernels.push_back(std::string(e.distro_name) + " " + e.release);
    EXPECT_EQ(kernels,
              (std::vector<std::string>{"Debian 11 5.10.0-46-amd64", "Debian 12 6.1.0-56-amd64"}));
}

TEST(EmbeddedIndex, EveryEntryDecompressesToBtfWithTheUserSpaceTypes) {
    for (const auto &entry : embedded_btfs()) {
        SCOPED_TRACE(entry.release);
        auto raw = decompress(entry);
        ASSERT_EQ(raw.size(), entry.raw_size);
        std::unique_ptr<btf, decltype(&btf__free)> types(btf__new(raw.data(), raw.size()),
                                                         btf__free);
        ASSERT_TRUE(types);
        // What user space reads (btf/user-types.txt).
        EXPECT_GT(btf__find_by_name_kind(types.get(), "tlb_flush_reason", BTF_KIND_ENUM), 0);
        EXPECT_GT(btf__find_by_name_kind(types.get(), "zone_type", BTF_KIND_ENUM), 0);
        EXPECT_GT(
            btf__find_by_name_kind(types.get(), "btf_trace_mm_migrate_pages", BTF_KIND_TYPEDEF), 0);
    }
}

TEST(EmbeddedIndex, DamagedDataIsReported) {
    EmbeddedBtf broken = embedded_btfs().front();
    broken.compressed_size /= 2;
    EXPECT_THROW(decompress(broken), RuntimeError);
}

// What libbpf gets for embedded BTF: a /proc/self/fd path it can parse like a file.
TEST(EmbeddedIndex, LibbpfPathIsAReadableMemfd) {
    BtfChoice choice{BtfChoice::Origin::Embedded, "", &embedded_btfs().back()};
    KernelBtf kernel_btf(choice);
    std::string path = kernel_btf.libbpf_path();
    ASSERT_TRUE(path.starts_with("/proc/self/fd/")) << path;
    std::unique_ptr<btf, decltype(&btf__free)> parsed(btf__parse(path.c_str(), nullptr), btf__free);
    ASSERT_TRUE(parsed);
    EXPECT_EQ(btf__type_cnt(parsed.get()), btf__type_cnt(&kernel_btf.types()));
    kernel_btf.release();
    EXPECT_NE(access(path.c_str(), F_OK), 0); // the memfd is closed
}

TEST(KernelBtf, NotBtfIsAClearError) {
    char name[] = "/tmp/memlat-not-btf-XXXXXX";
    int fd = mkstemp(name);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "not btf", 7), 7);
    close(fd);
    KernelBtf kernel_btf({BtfChoice::Origin::Option, name});
    try {
        kernel_btf.types();
        ADD_FAILURE() << "parsed garbage";
    } catch (const RuntimeError &e) {
        EXPECT_NE(std::string(e.what()).find("it is not a BTF file"), std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("(given with --btf)"), std::string::npos);
    }
    unlink(name);
}

} // namespace

// ---- a given BTF file against the running kernel's

namespace {

// A BTF with struct task_struct of `task_size` bytes and enum tlb_flush_reason's values.
std::unique_ptr<btf, void (*)(btf *)> made_btf(uint32_t task_size,
                                               std::vector<std::string> reasons) {
    std::unique_ptr<btf, void (*)(btf *)> b(btf__new_empty(), btf__free);
    btf__add_struct(b.get(), "task_struct", task_size);
    btf__add_enum(b.get(), "tlb_flush_reason", 4);
    for (size_t i = 0; i < reasons.size(); ++i)
        btf__add_enum_value(b.get(), reasons[i].c_str(), static_cast<int64_t>(i));
    return b;
}

} // namespace

TEST(BtfMismatch, SameTypesMatch) {
    auto kernel = made_btf(3264, {"flush_on_task_switch", "remote_shootdown", "local_shootdown"});
    auto file = made_btf(3264, {"flush_on_task_switch", "remote_shootdown", "local_shootdown"});
    EXPECT_EQ(btf_mismatch(*file, *kernel), "");
}

TEST(BtfMismatch, AnotherKernelsStructSizeIsNamed) {
    auto kernel = made_btf(3264, {"a"});
    auto file = made_btf(9792, {"a"});
    EXPECT_EQ(btf_mismatch(*file, *kernel),
              "struct task_struct is 9792 bytes in it and 3264 in the running kernel");
}

TEST(BtfMismatch, EnumValuesThatDifferAreNamed) {
    auto kernel = made_btf(1, {"a", "b", "remote_wrong_cpu"});
    EXPECT_EQ(btf_mismatch(*made_btf(1, {"a", "b"}), *kernel),
              "enum tlb_flush_reason has 2 values in it and 3 in the running kernel");
    EXPECT_EQ(btf_mismatch(*made_btf(1, {"a", "x", "remote_wrong_cpu"}), *kernel),
              "enum tlb_flush_reason has x = 1 in it, b = 1 in the running kernel");
}

TEST(BtfMismatch, TypesOnlyOneSideHasAreNotCompared) {
    std::unique_ptr<btf, void (*)(btf *)> reduced(btf__new_empty(), btf__free);
    EXPECT_EQ(btf_mismatch(*reduced, *made_btf(3264, {"a"})), "");
}

TEST(BtfMismatch, TheRunningKernelMatchesItself) {
    if (access(kernel_btf_sysfs_path, R_OK) != 0)
        GTEST_SKIP() << "no " << kernel_btf_sysfs_path;
    std::unique_ptr<btf, void (*)(btf *)> a(btf__parse(kernel_btf_sysfs_path, nullptr), btf__free);
    std::unique_ptr<btf, void (*)(btf *)> b(btf__parse(kernel_btf_sysfs_path, nullptr), btf__free);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(btf_mismatch(*a, *b), "");
}
