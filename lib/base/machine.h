// Facts about the running machine that several parts of a tool need.
#pragma once

#include <string>

namespace memlat {

// The running kernel's release, as uname -r prints it: "6.1.0-18-amd64".
std::string kernel_release();

// Number of possible CPUs (what per-CPU BPF data is sized by); RuntimeError when unknown.
int possible_cpus();

} // namespace memlat
