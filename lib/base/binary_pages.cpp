#include "base/binary_pages.h"

#include <cerrno>
#include <cstdint>
#include <fcntl.h>
#include <link.h>
#include <linux/userfaultfd.h>
#include <string>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/parsing.h"

namespace memlat {

namespace {

// Linux 6.7's UFFD_FEATURE_WP_ASYNC and 5.11's UFFD_USER_MODE_ONLY, for older headers.
constexpr uint64_t uffd_feature_wp_async = uint64_t{1} << 15;
constexpr int uffd_user_mode_only = 1;

// Registers the binary's read-only segments (code and read-only data) with `uffd` for
// write-protect tracking, then drops the pages mapped so far, which come back one by one as
// they are used.
int register_read_only_segments(dl_phdr_info *info, size_t, void *uffd) {
    const uintptr_t page = static_cast<uintptr_t>(getpagesize());
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) &segment = info->dlpi_phdr[i];
        if (segment.p_type != PT_LOAD || (segment.p_flags & PF_W) != 0)
            continue;
        const uintptr_t start = (info->dlpi_addr + segment.p_vaddr) & ~(page - 1);
        const uintptr_t end =
            (info->dlpi_addr + segment.p_vaddr + segment.p_memsz + page - 1) & ~(page - 1);
        uffdio_register range{};
        range.range.start = start;
        range.range.len = end - start;
        range.mode = UFFDIO_REGISTER_MODE_WP;
        // Never written (no PF_W), so dropping them loses nothing: a later read maps the same
        // page of the file again.
        if (ioctl(*static_cast<int *>(uffd), UFFDIO_REGISTER, &range) == 0)
            madvise(reinterpret_cast<void *>(start), end - start, MADV_DONTNEED);
    }
    return 1; // the first object is the program itself
}

} // namespace

void map_binary_pages_singly() {
    for (const std::string &feature : environment_list("MEMLAT_DISABLE_FEATURES"))
        if (feature == "uffd_wp_async")
            return;
    int uffd =
        static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | uffd_user_mode_only));
    if (uffd < 0 && errno == EINVAL) // before 5.11
        uffd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
    if (uffd < 0)
        return;
    if (uffd <= STDERR_FILENO) {
        // Started with stdin, stdout or stderr closed: keep those numbers free, or the tool's
        // output would go to this descriptor.
        const int moved = fcntl(uffd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
        close(uffd);
        if (moved < 0)
            return;
        uffd = moved;
    }
    uffdio_api api{};
    api.api = UFFD_API;
    api.features = uffd_feature_wp_async;
    if (ioctl(uffd, UFFDIO_API, &api) != 0) {
        close(uffd);
        return;
    }
    dl_iterate_phdr(register_read_only_segments, &uffd);
}

} // namespace memlat
