#include "base/capabilities.h"

#include <cstdio>
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

std::string missing_bpf_capabilities() {
    if (process_has_capability(CAP_SYS_ADMIN))
        return "";
    int last_cap = 0;
    if (FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "r")) {
        if (fscanf(f, "%d", &last_cap) != 1)
            last_cap = 0;
        fclose(f);
    }
    if (last_cap != 0 && last_cap < CAP_BPF)
        return "CAP_SYS_ADMIN (this kernel predates CAP_BPF and CAP_PERFMON, Linux 5.8)";
    std::string missing;
    if (!process_has_capability(CAP_BPF))
        missing = "CAP_BPF";
    if (!process_has_capability(CAP_PERFMON))
        missing += missing.empty() ? "CAP_PERFMON" : " and CAP_PERFMON";
    return missing;
}

void drop_capabilities() {
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct none[2]{};
    syscall(SYS_capset, &header, none);
}

} // namespace memlat
