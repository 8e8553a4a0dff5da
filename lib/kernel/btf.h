// The one BTF a run uses, for CO-RE in libbpf and for what user space reads from kernel types
// (enum names, GFP bits, tracepoint prototypes). It is, in this order: the file given with
// --btf or MEMLAT_BTF; the kernel's own /sys/kernel/btf/vmlinux; the BTF embedded in the tool
// for the running kernel (uname release and /etc/os-release ID). Each tool embeds, per kernel
// in btf/kernels.txt, the types its BPF object relocates against plus those user space reads,
// zlib-compressed (see Makefile.btf and cmake/EmbeddedBtf.cmake).
#pragma once

#include <bpf/btf.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/files.h"
#include "kernel/btf_compare.h"
#include "kernel/features.h"

namespace memlat {

// One kernel's BTF as built into a tool.
struct EmbeddedBtf {
    const char *distro_id;           // os-release ID: "debian"
    const char *distro_version;      // os-release VERSION_ID: "11"
    const char *distro_name;         // for people: "Debian 11"
    const char *release;             // uname -r: "5.10.0-46-amd64"
    const unsigned char *compressed; // the raw BTF, zlib-compressed
    size_t compressed_size;
    size_t raw_size;
};

// The tool's index of embedded BTF. Every executable that links memlat_common defines it:
// each tool in its generated TOOL_btf.cpp, the others as an empty list.
std::span<const EmbeddedBtf> embedded_btfs();

// The raw BTF of an entry, decompressed; throws RuntimeError when the data is damaged.
std::vector<unsigned char> decompress(const EmbeddedBtf &entry);

// What identifies the running system for the embedded index.
struct HostIdentity {
    std::string release;        // uname -r
    std::string distro_id;      // os-release ID, "" when unknown
    std::string distro_version; // os-release VERSION_ID
    std::string distro_name;    // os-release PRETTY_NAME, else NAME VERSION_ID, else "unknown"
    // The running host: uname(2) and the os-release file (/etc/os-release, else
    // /usr/lib/os-release).
    static HostIdentity running(const std::string &os_release = "");
    // Parses the text of an os-release file.
    static HostIdentity from_os_release(std::string release, std::string_view text);
};

// Where the BTF of a run was asked for, and what the machine offers.
struct BtfRequest {
    std::string option_path;      // --btf FILE, "" when not given
    std::string environment_path; // MEMLAT_BTF, "" when not set
    bool kernel_has_btf = true;   // kernel_features().kernel_btf
    std::string sysfs_path = kernel_btf_sysfs_path;
};

// The BTF chosen for a run, before anything is read.
struct BtfChoice {
    enum class Origin { Option, Environment, Kernel, Embedded };
    Origin origin;
    std::string path;                      // Option, Environment, Kernel
    const EmbeddedBtf *embedded = nullptr; // Embedded
    // "BTF: /sys/kernel/btf/vmlinux", "BTF: embedded, Debian 11, 5.10.0-46-amd64",
    // "BTF: FILE (--btf)", "BTF: FILE (MEMLAT_BTF)".
    std::string describe() const;
};

// The embedded entry for the host's kernel: the one of the same release, or, when several
// distributions' kernels share that release, the one of the host's distro ID. The release
// decides, not os-release: in a container /etc/os-release describes the image, not the host
// whose kernel runs, and minimal systems (initramfs, the VM tests) have none. VERSION_ID
// plays no part: a kernel from another release of the same distribution (backports) is the
// same build.
const EmbeddedBtf *find_embedded(std::span<const EmbeddedBtf> index, const HostIdentity &host);

// Chooses the BTF, or throws RuntimeError with the full explanation (no_btf_message) when
// nothing fits. A path given is taken as is: whether it holds BTF shows when it is read.
BtfChoice choose_btf(const BtfRequest &request, const HostIdentity &host,
                     std::span<const EmbeddedBtf> index);

// The error when no BTF fits: the running kernel and distro, every place looked at, the
// command that makes a BTF file for this kernel and how to pass it.
std::string no_btf_message(const BtfRequest &request, const HostIdentity &host,
                           std::span<const EmbeddedBtf> index);

// The run's BTF: chosen once, parsed on first use, shared by everything that reads kernel
// types, and released when the BPF objects are loaded.
//
// The same BTF is what libbpf relocates against, and it parses it itself for every bpf_object
// it loads (btf__load_vmlinux_btf for the kernel's own, also for tp_btf programs; btf__parse of
// btf_custom_path otherwise) and frees it after. The tools link libbpf statically with
// -Wl,--wrap for btf__load_vmlinux_btf, btf__parse and btf__free (CMakeLists.txt): libbpf's
// calls come to kernel_btf.cpp, which lends it this object's parse (and ignores libbpf's free
// of it), so that a run parses its BTF once, however many objects the hook fall-back loads.
// libbpf only reads a target BTF. The kernel's own is parsed by libbpf's
// btf__load_vmlinux_btf, which maps /sys/kernel/btf/vmlinux where the kernel allows it (libbpf
// 1.6+, Linux 6.16+: no copy in the process) and reads it otherwise.
class KernelBtf {
  public:
    explicit KernelBtf(BtfChoice choice) : choice_(std::move(choice)) {}
    KernelBtf(const KernelBtf &) = delete;
    KernelBtf &operator=(const KernelBtf &) = delete;

    const BtfChoice &choice() const { return choice_; }
    // The parsed types; throws RuntimeError when the file is missing or holds no valid BTF.
    const btf &types();
    // What libbpf gets as bpf_object_open_opts.btf_custom_path: empty for the kernel's own
    // BTF (libbpf finds it itself), the file for --btf/MEMLAT_BTF, and /proc/self/fd/N of a
    // memfd holding the decompressed embedded BTF.
    std::string libbpf_path();
    // Frees the parsed types and the memfd; both come back if asked for again.
    void release();
    // What libbpf's btf__load_vmlinux_btf (path nullptr) or btf__parse(path) gets: this
    // object's parse when it is the BTF asked for (the kernel's own; the file libbpf_path()
    // named), else nullptr (libbpf then reads what it asked for itself).
    btf *lend_to_libbpf(const char *path);
    // Whether `b` is this object's parse (which libbpf must not free).
    bool owns(const btf *b) const { return b != nullptr && b == types_.get(); }
    // " (BTF from FILE, given with --btf: ...)" when the BTF is a file the user gave, for the
    // message of a load that failed (a file of another kernel is then the likely cause); ""
    // otherwise.
    std::string given_file_note() const;

  private:
    // Frees with libbpf's own btf__free, past the wrapper that protects the lent parse.
    struct BtfFree {
        void operator()(btf *b) const;
    };
    // The name the given file (--btf, MEMLAT_BTF) is read by: the file itself, or, for a pipe
    // or a process substitution (<(xzcat k.btf.xz)), which can be read once only and not
    // by offset, /proc/self/fd/N of a memfd holding what it gave. Throws RuntimeError for a
    // directory or an empty file.
    const std::string &given_file();

    BtfChoice choice_;
    std::unique_ptr<btf, BtfFree> types_;
    OwnedFd stream_copy_;    // what a given pipe held; kept by release(): it is read once
    std::string given_path_; // given_file(), once found
    OwnedFd memfd_;
    std::string memfd_path_; // libbpf_path() of the memfd
};

// --btf FILE: remembered for kernel_btf(); call before its first use.
void set_btf_option(std::string path);

// The process's KernelBtf, chosen on first call from --btf, MEMLAT_BTF, the kernel and the
// embedded index; throws RuntimeError (every time) when nothing fits.
KernelBtf &kernel_btf();

} // namespace memlat
