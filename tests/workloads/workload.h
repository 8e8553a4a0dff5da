// What the test workloads (tests/workloads/ on the host, tests/vm/guest/ in the VM guests)
// share. Header-only: each workload is one static binary of one source file.
#pragma once

#include <sched.h>

#include <cstdio>
#include <cstdlib>

namespace workload {

// perror(what) and exit 1: a workload that could not do its part must not exit as one that did,
// or a test would check a tool against work that never happened.
[[noreturn]] inline void die(const char *what) {
    perror(what);
    std::exit(1);
}

// The calling thread on `cpu` only (a workload that sends or receives IPIs, or touches memory
// from a chosen node, says where it runs).
inline void pin_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0)
        die("sched_setaffinity");
}

} // namespace workload
