// The binary's own pages in a tool's memory: mapped one by one as they are used, not 64 KiB
// around each (the kernel's fault-around), where the kernel allows it.
#pragma once

namespace memlat {

// The kernel maps a file's pages 64 KiB around each page a process faults on (fault-around),
// so a tool had the whole neighbourhood of every page of the binary it ran counted in its RSS:
// drsnoop 1.5 MiB of the binary's pages, of which it touches 0.6. Fault-around is skipped for
// a range registered with userfaultfd in write-protect mode (mm/memory.c,
// uffd_disable_fault_around()), which Linux 6.7 and later allow on any file mapping in
// asynchronous mode (UFFD_FEATURE_WP_ASYNC: the kernel resolves write faults itself; the
// segments are never written anyway). The registration lasts as long as the descriptor,
// which stays open for the life of the process (close-on-exec). Where the kernel refuses
// (older than 6.7, userfaultfd forbidden by seccomp or vm.unprivileged_userfaultfd), nothing
// changes (MEMLAT_DISABLE_FEATURES=uffd_wp_async plays such a kernel, for A/B measurements).
// Costs ~150 more minor faults at start-up: 0-0.25 ms more CPU to ready (bench/README.md).
void map_binary_pages_singly();

} // namespace memlat
