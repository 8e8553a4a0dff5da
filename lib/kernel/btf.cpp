#include "kernel/btf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <zlib.h>

#include <bpf/libbpf.h>
#include <cstdarg>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <optional>
#include <utility>

#include "base/errors.h"
#include "base/files.h"
#include "base/machine.h"
#include "kernel/btf_compare.h"
#include "kernel/features.h"

// libbpf's own functions, reached past the -Wl,--wrap wrappers at the end of this file.
extern "C" {
btf *__real_btf__load_vmlinux_btf(void);
btf *__real_btf__parse(const char *path, btf_ext **ext);
void __real_btf__free(btf *b);
}

namespace memlat {

namespace {

std::string origin_note(BtfChoice::Origin origin) {
    return origin == BtfChoice::Origin::Option ? "--btf" : "MEMLAT_BTF";
}

// os-release values may be quoted ("Debian GNU/Linux 12 (bookworm)").
std::string unquote(std::string_view value) {
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front())
        value = value.substr(1, value.size() - 2);
    return std::string(value);
}

std::string read_text(const std::string &path) {
    return read_text_file(path).value_or("");
}

std::string btf_error(const std::string &path, int err) {
    // libbpf answers a file that is neither BTF nor ELF with its own LIBBPF_ERRNO__FORMAT.
    const bool not_btf = err == EINVAL || err == EPROTO || err == ENODATA || err == ENOENT ||
                         err >= __LIBBPF_ERRNO__START;
    if (err == ENOENT && access(path.c_str(), F_OK) != 0)
        return fmt::format("Cannot read BTF from {}: no such file", path);
    // Raw BTF that libbpf's checks refuse: a type naming one that does not exist, a string
    // past the string section, or a kind this libbpf does not know (a newer kernel's).
    const auto magic = err == EINVAL ? read_file_prefix(path, 2) : std::nullopt; // raw BTF's
    if (magic == "\x9f\xeb" || magic == "\xeb\x9f") // in either byte order
        return fmt::format("Cannot read BTF from {}: it is BTF, but libbpf {}.{} refuses it (a "
                           "type that names a type or string that does not exist, or a kind "
                           "this libbpf does not know)",
                           path, libbpf_major_version(), libbpf_minor_version());
    return fmt::format("Cannot read BTF from {}: {}", path,
                       not_btf ? "it is not a BTF file (raw BTF, or an ELF vmlinux with a .BTF "
                                 "section)"
                               : std::strerror(err));
}

// Writes all of `data` to `fd` (a memfd); false, with errno set, when a write fails.
bool write_all(int fd, const unsigned char *data, size_t size) {
    for (size_t done = 0; done < size;) {
        ssize_t n = write(fd, data + done, size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

// libbpf prints its own complaint about a file it cannot parse ("failed to get EHDR"); the
// tool says it better, so libbpf is quiet while the BTF is read.
int quiet(enum libbpf_print_level, const char *, va_list) {
    return 0;
}

} // namespace

HostIdentity HostIdentity::from_os_release(std::string release, std::string_view text) {
    HostIdentity host;
    host.release = std::move(release);
    std::string name, pretty;
    while (!text.empty()) {
        auto newline = text.find('\n');
        std::string_view line = text.substr(0, newline);
        text = newline == std::string_view::npos ? std::string_view{} : text.substr(newline + 1);
        auto equals = line.find('=');
        if (equals == std::string_view::npos)
            continue;
        auto key = line.substr(0, equals);
        auto value = unquote(line.substr(equals + 1));
        if (key == "ID")
            host.distro_id = value;
        else if (key == "VERSION_ID")
            host.distro_version = value;
        else if (key == "NAME")
            name = value;
        else if (key == "PRETTY_NAME")
            pretty = value;
    }
    if (!pretty.empty())
        host.distro_name = pretty;
    else if (!name.empty())
        host.distro_name = host.distro_version.empty() ? name : name + " " + host.distro_version;
    else
        host.distro_name = "unknown distribution";
    return host;
}

HostIdentity HostIdentity::running(const std::string &os_release) {
    std::string text;
    if (!os_release.empty())
        text = read_text(os_release);
    else if (text = read_text("/etc/os-release"); text.empty())
        text = read_text("/usr/lib/os-release");
    return from_os_release(kernel_release(), text);
}

std::string BtfChoice::describe() const {
    switch (origin) {
    case Origin::Kernel:
        return "BTF: " + path;
    case Origin::Embedded:
        return fmt::format("BTF: embedded, {}, {}", embedded->distro_name, embedded->release);
    case Origin::Option:
    case Origin::Environment:
        return fmt::format("BTF: {} ({})", path, origin_note(origin));
    }
    return "BTF: ?";
}

const EmbeddedBtf *find_embedded(std::span<const EmbeddedBtf> index, const HostIdentity &host) {
    const EmbeddedBtf *found = nullptr;
    int same_release = 0;
    for (const auto &entry : index) {
        if (host.release != entry.release)
            continue;
        ++same_release;
        if (host.distro_id == entry.distro_id)
            return &entry;
        found = &entry;
    }
    return same_release == 1 ? found : nullptr;
}

std::string no_btf_message(const BtfRequest &request, const HostIdentity &host,
                           std::span<const EmbeddedBtf> index) {
    std::string embedded;
    for (const auto &entry : index)
        embedded +=
            fmt::format("{}{} {}", embedded.empty() ? "" : ", ", entry.distro_name, entry.release);
    if (embedded.empty())
        embedded = "none";
    const bool sysfs_present = access(request.sysfs_path.c_str(), F_OK) == 0;
    return fmt::format(
        "No BTF for this kernel ({release}, {distro}). The tools need the kernel's type "
        "information (BTF) and looked for it in:\n"
        "  --btf FILE or MEMLAT_BTF=FILE: not given\n"
        "  {sysfs}: {sysfs_state}\n"
        "  BTF embedded in this tool: {embedded} (none for {release})\n"
        "Make a BTF file from this kernel's debug information (the package "
        "linux-image-{release}-dbg on Debian, linux-image-unsigned-{release}-dbgsym on Ubuntu, "
        "kernel-debuginfo on RHEL, whose vmlinux is /usr/lib/debug/lib/modules/{release}/vmlinux) "
        "with pahole from dwarves:\n"
        "  pahole --btf_encode_detached={release}.btf /usr/lib/debug/boot/vmlinux-{release}\n"
        "then pass it with --btf {release}.btf (or MEMLAT_BTF={release}.btf).{ignored}",
        fmt::arg("release", host.release), fmt::arg("distro", host.distro_name),
        fmt::arg("ignored",
                 !request.kernel_has_btf && sysfs_present
                     ? fmt::format("\nWith kernel_btf disabled the kernel's own BTF can still be "
                                   "given as a file: cp {} /tmp/vmlinux.btf, then --btf "
                                   "/tmp/vmlinux.btf.",
                                   request.sysfs_path)
                     : ""),
        fmt::arg("sysfs", request.sysfs_path),
        fmt::arg("sysfs_state",
                 !request.kernel_has_btf && sysfs_present
                     ? "present, but ignored (MEMLAT_DISABLE_FEATURES=kernel_btf)"
                     : "missing (the kernel was built without CONFIG_DEBUG_INFO_BTF)"),
        fmt::arg("embedded", embedded));
}

BtfChoice choose_btf(const BtfRequest &request, const HostIdentity &host,
                     std::span<const EmbeddedBtf> index) {
    if (!request.option_path.empty())
        return {BtfChoice::Origin::Option, request.option_path};
    if (!request.environment_path.empty())
        return {BtfChoice::Origin::Environment, request.environment_path};
    // kernel_has_btf is false also when MEMLAT_DISABLE_FEATURES=kernel_btf hides the kernel's
    // own BTF, so that the tests reach the embedded path on a kernel that has BTF.
    if (request.kernel_has_btf && access(request.sysfs_path.c_str(), R_OK) == 0)
        return {BtfChoice::Origin::Kernel, request.sysfs_path};
    if (const EmbeddedBtf *entry = find_embedded(index, host))
        return {BtfChoice::Origin::Embedded, "", entry};
    throw RuntimeError(no_btf_message(request, host, index));
}

std::vector<unsigned char> decompress(const EmbeddedBtf &entry) {
    std::vector<unsigned char> raw(entry.raw_size);
    uLongf size = raw.size();
    int err = uncompress(raw.data(), &size, entry.compressed, entry.compressed_size);
    if (err != Z_OK || size != entry.raw_size)
        throw RuntimeError(fmt::format("The BTF embedded for {} {} is damaged ({}).",
                                       entry.distro_name, entry.release,
                                       err != Z_OK ? zError(err) : "wrong size"));
    return raw;
}

const std::string &KernelBtf::given_file() {
    if (!given_path_.empty())
        return given_path_;
    const std::string &path = choice_.path;
    const std::string given = fmt::format("{} (given with {})", path, origin_note(choice_.origin));
    struct stat st {};
    if (stat(path.c_str(), &st) != 0)
        throw RuntimeError(btf_error(path, errno) +
                           fmt::format(" (given with {})", origin_note(choice_.origin)));
    if (S_ISDIR(st.st_mode))
        throw RuntimeError(fmt::format("Cannot read BTF from {}: it is a directory, not a BTF "
                                       "file (raw BTF, or an ELF vmlinux with a .BTF section)",
                                       given));
    if (S_ISREG(st.st_mode)) {
        if (st.st_size == 0)
            throw RuntimeError(
                fmt::format("Cannot read BTF from {}: the file is empty, it holds no BTF", given));
        given_path_ = path;
        return given_path_;
    }
    // A pipe, a process substitution or a device: libbpf reads files by name and by offset,
    // and the tools read the BTF more than once, so what it gives is kept in a memfd.
    int in = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0)
        throw RuntimeError(fmt::format("Cannot read BTF from {}: {}", given, std::strerror(errno)));
    OwnedFd input(in);
    int fd = memfd_create("memlat-btf-given", MFD_CLOEXEC);
    if (fd < 0)
        throw RuntimeError(fmt::format("memfd_create: {}", std::strerror(errno)));
    OwnedFd copy(fd);
    std::vector<unsigned char> buffer(1 << 16);
    size_t total = 0;
    for (;;) {
        ssize_t n = read(in, buffer.data(), buffer.size());
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            throw RuntimeError(
                fmt::format("Cannot read BTF from {}: {}", given, std::strerror(errno)));
        if (n == 0)
            break;
        if (!write_all(fd, buffer.data(), static_cast<size_t>(n)))
            throw RuntimeError(
                fmt::format("Copying the BTF of {} to a memfd: {}", given, std::strerror(errno)));
        total += static_cast<size_t>(n);
    }
    if (total == 0)
        throw RuntimeError(
            fmt::format("Cannot read BTF from {}: it gave nothing, it holds no BTF", given));
    stream_copy_ = std::move(copy);
    given_path_ = fmt::format("/proc/self/fd/{}", stream_copy_.get());
    return given_path_;
}

std::string KernelBtf::given_file_note() const {
    if (choice_.origin != BtfChoice::Origin::Option &&
        choice_.origin != BtfChoice::Origin::Environment)
        return "";
    return fmt::format("\nThe BTF came from {} (given with {}): if it is not the BTF of this "
                       "kernel, that is the cause; without it the tool uses {} or its embedded "
                       "BTF.",
                       choice_.path, origin_note(choice_.origin), kernel_btf_sysfs_path);
}

const btf &KernelBtf::types() {
    if (types_)
        return *types_;
    btf *parsed = nullptr;
    if (choice_.origin == BtfChoice::Origin::Embedded) {
        auto raw = decompress(*choice_.embedded);
        parsed = btf__new(raw.data(), raw.size());
        if (parsed == nullptr)
            throw RuntimeError(fmt::format("The BTF embedded for {} {} does not parse: {}",
                                           choice_.embedded->distro_name, choice_.embedded->release,
                                           std::strerror(errno)));
    } else {
        // libbpf's loader of the kernel's BTF maps it where the kernel allows that; btf__parse
        // takes any raw BTF (as in sysfs or from pahole) or ELF file with .BTF, reading it.
        libbpf_print_fn_t previous = libbpf_set_print(quiet);
        const bool sysfs =
            choice_.origin == BtfChoice::Origin::Kernel && choice_.path == kernel_btf_sysfs_path;
        const bool given = choice_.origin != BtfChoice::Origin::Kernel;
        try {
            const std::string &path = given ? given_file() : choice_.path;
            parsed =
                sysfs ? __real_btf__load_vmlinux_btf() : __real_btf__parse(path.c_str(), nullptr);
        } catch (...) {
            libbpf_set_print(previous);
            throw;
        }
        const int err = errno;
        libbpf_set_print(previous);
        if (parsed == nullptr) {
            std::string message = btf_error(choice_.path, err);
            if (given)
                message += fmt::format(" (given with {})", origin_note(choice_.origin));
            else
                message += fmt::format(
                    ". The kernel publishes its BTF whether or not it can use it: give this "
                    "kernel's BTF as a file (pahole --btf_encode_detached=FILE on its vmlinux "
                    "with debug information), with --btf FILE or MEMLAT_BTF=FILE");
            throw RuntimeError(message);
        }
        std::unique_ptr<btf, BtfFree> owned(parsed);
        // Another kernel's BTF gives CO-RE wrong offsets and user space wrong enum names
        // (reason_5 for remote_wrong_cpu) without an error: where the running kernel has its
        // own BTF, a given file must agree with it on what the tools rely on.
        // (Not when MEMLAT_DISABLE_FEATURES=kernel_btf plays a kernel without its own BTF.)
        if (given && kernel_features().kernel_btf && access(kernel_btf_sysfs_path, R_OK) == 0) {
            libbpf_set_print(quiet);
            std::unique_ptr<btf, BtfFree> kernel(__real_btf__parse(kernel_btf_sysfs_path, nullptr));
            libbpf_set_print(previous);
            if (kernel) {
                if (auto why = btf_mismatch(*owned, *kernel); !why.empty())
                    throw RuntimeError(fmt::format(
                        "{} (given with {}) does not match the running kernel: {} ({}). Give "
                        "the BTF of this kernel, or leave {} out: this kernel has its own ({}).",
                        choice_.path, origin_note(choice_.origin), why, kernel_btf_sysfs_path,
                        origin_note(choice_.origin), kernel_btf_sysfs_path));
            }
        }
        parsed = owned.release();
    }
    types_.reset(parsed);
    return *types_;
}

btf *KernelBtf::lend_to_libbpf(const char *path) {
    bool same = false;
    switch (choice_.origin) {
    case BtfChoice::Origin::Kernel:
        same = path == nullptr;
        break;
    case BtfChoice::Origin::Option:
    case BtfChoice::Origin::Environment:
        same = path != nullptr && (choice_.path == path || given_path_ == path);
        break;
    case BtfChoice::Origin::Embedded:
        same = path != nullptr && !memfd_path_.empty() && memfd_path_ == path;
        break;
    }
    return same ? const_cast<btf *>(&types()) : nullptr;
}

void KernelBtf::BtfFree::operator()(btf *b) const {
    __real_btf__free(b);
}

std::string KernelBtf::libbpf_path() {
    switch (choice_.origin) {
    case BtfChoice::Origin::Kernel:
        return "";
    case BtfChoice::Origin::Option:
    case BtfChoice::Origin::Environment:
        return given_file();
    case BtfChoice::Origin::Embedded:
        break;
    }
    if (memfd_.get() < 0) {
        // libbpf reads btf_custom_path by name: the decompressed BTF goes into an anonymous
        // file rather than a temporary one that could be left behind.
        int fd = memfd_create("memlat-btf", MFD_CLOEXEC);
        if (fd < 0)
            throw RuntimeError(fmt::format("memfd_create: {}", std::strerror(errno)));
        memfd_ = OwnedFd(fd);
        auto raw = decompress(*choice_.embedded);
        if (!write_all(fd, raw.data(), raw.size()))
            throw RuntimeError(
                fmt::format("Writing the embedded BTF to a memfd: {}", std::strerror(errno)));
    }
    memfd_path_ = fmt::format("/proc/self/fd/{}", memfd_.get());
    return memfd_path_;
}

void KernelBtf::release() {
    types_.reset();
    memfd_ = OwnedFd();
    memfd_path_.clear();
}

namespace {

std::string &btf_option() {
    static std::string path;
    return path;
}

} // namespace

void set_btf_option(std::string path) {
    btf_option() = std::move(path);
}

namespace {

std::optional<KernelBtf> &chosen_btf() {
    static std::optional<KernelBtf> chosen;
    return chosen;
}

} // namespace

KernelBtf &kernel_btf() {
    // The choice, or why there is none, is made once; a failed choice throws every time.
    std::optional<KernelBtf> &chosen = chosen_btf();
    static std::string failure;
    if (chosen)
        return *chosen;
    if (failure.empty()) {
        try {
            BtfRequest request;
            request.option_path = btf_option();
            if (const char *env = getenv("MEMLAT_BTF"))
                request.environment_path = env;
            request.kernel_has_btf = kernel_features().kernel_btf;
            chosen.emplace(choose_btf(request, HostIdentity::running(), embedded_btfs()));
            return *chosen;
        } catch (const RuntimeError &e) {
            failure = e.what();
        }
    }
    throw RuntimeError(failure);
}

} // namespace memlat

// libbpf, linked statically with -Wl,--wrap=btf__load_vmlinux_btf,--wrap=btf__parse,
// --wrap=btf__free, calls these instead of its own functions (see KernelBtf in kernel/btf.h);
// so does our own code, whose btf__parse goes through too. Without the wrap (a dynamically
// linked libbpf) libbpf does not call them and parses the BTF itself.
namespace {

btf *lent(const char *path) {
    try {
        return memlat::kernel_btf().lend_to_libbpf(path);
    } catch (...) {
        // No BTF chosen, or it does not parse (or no memory): libbpf looks for itself and says
        // what it found. Nothing may be thrown through libbpf's C frames.
        return nullptr;
    }
}

} // namespace

extern "C" {

btf *__wrap_btf__load_vmlinux_btf(void) {
    if (btf *b = lent(nullptr))
        return b;
    return __real_btf__load_vmlinux_btf();
}

btf *__wrap_btf__parse(const char *path, btf_ext **ext) {
    // libbpf parses btf_custom_path without .BTF.ext; a caller that wants it gets a real parse.
    if (ext == nullptr)
        if (btf *b = lent(path))
            return b;
    return __real_btf__parse(path, ext);
}

void __wrap_btf__free(btf *b) {
    const auto &chosen = memlat::chosen_btf();
    if (chosen && chosen->owns(b))
        return; // lent to libbpf, freed by KernelBtf::release()
    __real_btf__free(b);
}

} // extern "C"
