#include "base/capabilities.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <linux/bpf.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace memlat {

bool process_has_capability(int capability) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    if (syscall(SYS_capget, &header, data) != 0)
        return false;
    return (data[capability / 32].effective & (1u << (capability % 32))) != 0;
}

namespace {

int last_capability() {
    int last_cap = 0;
    if (FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "r")) {
        if (fscanf(f, "%d", &last_cap) != 1)
            last_cap = 0;
        fclose(f);
    }
    return last_cap;
}

} // namespace

std::string missing_bpf_capabilities() {
    if (process_has_capability(CAP_SYS_ADMIN))
        return "";
    const int last_cap = last_capability();
    if (last_cap != 0 && last_cap < CAP_BPF)
        return "CAP_SYS_ADMIN (this kernel predates CAP_BPF and CAP_PERFMON, Linux 5.8)";
    std::string missing;
    if (!process_has_capability(CAP_BPF))
        missing = "CAP_BPF";
    if (!process_has_capability(CAP_PERFMON))
        missing += missing.empty() ? "CAP_PERFMON" : " and CAP_PERFMON";
    return missing;
}

namespace {

// Sets the thread's permitted set to `permitted` (a subset of what it has) and its effective
// set to `effective` (of those); inheritable empty.
void set_capabilities(uint64_t permitted, uint64_t effective) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    for (int i = 0; i < 2; ++i) {
        data[i].permitted = static_cast<uint32_t>(permitted >> (32 * i));
        data[i].effective = static_cast<uint32_t>(effective >> (32 * i));
    }
    syscall(SYS_capset, &header, data);
}

// Whether the kernel refuses a bpf() command to this thread as it is: a lookup in no map
// (descriptor -1) fails with EBADF where the command is allowed, with EPERM where the kernel
// refuses bpf() to the unprivileged at its entry.
bool bpf_refused() {
    bpf_attr attr{};
    attr.map_fd = static_cast<uint32_t>(-1);
    return syscall(SYS_bpf, BPF_MAP_LOOKUP_ELEM, &attr, sizeof(attr)) != 0 && errno == EPERM;
}

} // namespace

std::string drop_capabilities() {
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    const bool has_bpf_capability = last_capability() >= CAP_BPF;
    const int keep = has_bpf_capability ? CAP_BPF : CAP_SYS_ADMIN;
    const uint64_t kept = process_has_capability(keep) ? uint64_t{1} << keep : 0;
    // Held but not effective, to ask the kernel whether bpf() needs it.
    set_capabilities(kept, 0);
    if (kept != 0 && bpf_refused()) {
        set_capabilities(kept, kept);
        return has_bpf_capability ? "CAP_BPF" : "CAP_SYS_ADMIN";
    }
    set_capabilities(0, 0);
    return "";
}

} // namespace memlat
