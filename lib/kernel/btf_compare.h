// Whether a BTF file given by the user (--btf, MEMLAT_BTF) matches the running kernel's own on
// what the tools rely on.
#pragma once

#include <bpf/btf.h>

#include <string>

namespace memlat {

// "" when `file` agrees with `kernel` (the running kernel's own BTF) on the types the tools
// read or relocate against (struct sizes, the names and values of enums); else what differs,
// e.g. "enum tlb_flush_reason has 5 values in it and 6 in the running kernel's".
std::string btf_mismatch(const btf &file, const btf &kernel);

} // namespace memlat
