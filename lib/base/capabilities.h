// The process's capabilities: what loading BPF programs needs, and what a mode needs beyond it
// (docs/least-privilege.md).
#pragma once

#include <string>

namespace memlat {

// Whether the capability (CAP_SYSLOG...) is in this process's effective set: root has them
// all; a tool given only some (docs/least-privilege.md) names what a mode lacks.
bool process_has_capability(int capability);

// The capabilities this process lacks to load and attach tracing programs, named: CAP_BPF
// and CAP_PERFMON (Linux 5.8 and later; CAP_SYS_ADMIN stands for both), or CAP_SYS_ADMIN on
// kernels that predate them (the kernel's last capability tells). Empty when nothing is
// missing.
std::string missing_bpf_capabilities();

// Empties the calling thread's capability sets (effective, permitted, inheritable, ambient):
// once the programs are attached, an exporter reads their maps and links through the
// descriptors it holds, and closes them at the end, which needs none. Capabilities belong to
// each thread, so the server's thread and the main thread each call it.
//
// But one: older kernels (5.10 of the test matrix) refuse every bpf() command, a map lookup on
// a descriptor already held included, to a thread without CAP_BPF while
// kernel.unprivileged_bpf_disabled is set (Debian's default); newer ones check it only where
// programs are loaded and maps made. Where a bpf() call without it is refused, CAP_BPF
// (CAP_SYS_ADMIN before Linux 5.8) stays, alone; its name is returned ("" when none stays).
std::string drop_capabilities();

} // namespace memlat
