#include "base/errors.h"

#include <bpf/libbpf.h>

namespace memlat {

std::string error_text(int err) {
    char buf[128];
    libbpf_strerror(err < 0 ? -err : err, buf, sizeof(buf));
    return buf;
}

} // namespace memlat
