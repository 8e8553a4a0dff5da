#include "base/machine.h"

#include <bpf/libbpf.h>
#include <sys/utsname.h>

#include "base/errors.h"

namespace memlat {

std::string kernel_release() {
    utsname u{};
    uname(&u);
    return u.release;
}

int possible_cpus() {
    int n = libbpf_num_possible_cpus();
    if (n <= 0)
        throw RuntimeError("Cannot read the number of possible CPUs: " + error_text(n));
    return n;
}

} // namespace memlat
