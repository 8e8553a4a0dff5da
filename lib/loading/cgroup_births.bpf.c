// SPDX-License-Identifier: GPL-2.0
/* The cgroups of one hierarchy made and removed while a tool runs (tracepoints
 * cgroup:cgroup_mkdir and cgroup:cgroup_rmdir), with the path the kernel formats for the
 * event: user space (lib/loading/cgroup_births.cpp) reads a new container's names from its
 * runtime's records while they exist, and keeps the path of a cgroup removed before the
 * tool's next walk of the hierarchy. Each event comes as tp_btf, raw_tp and classic
 * tracepoint program (hooks.h, tracepoint_choices()). */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "cgroup_birth.h"

char LICENSE[] SEC("license") = "GPL";

/* The hierarchy watched: the memory controller's cgroup v1 hierarchy id (/proc/cgroups), or 0
 * for cgroup v2 (the default hierarchy's id). */
const volatile int hierarchy_id = 0;

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 256 * 1024); /* 490 events: cgroups are made a few hundred a second */
} births SEC(".maps");

/* Events the ring buffer had no room for. */
__u64 lost = 0;

static __always_inline void report(int root, __u64 id, const char *path, bool removed) {
    struct cgroup_birth *b;
    long bytes = 0;

    if (root != hierarchy_id)
        return;
    b = bpf_ringbuf_reserve(&births, sizeof(*b), 0);
    if (!b) {
        __sync_fetch_and_add(&lost, 1);
        return;
    }
    b->id = id;
    b->removed = removed;
    b->path[0] = 0;
    if (!removed && path)
        bytes = bpf_probe_read_kernel_str(b->path, sizeof(b->path), path);
    b->path_bytes = bytes > 0 ? bytes : 0;
    bpf_ringbuf_submit(b, 0);
}

static __always_inline void report_cgroup(struct cgroup *cgrp, const char *path, bool removed) {
    report(BPF_CORE_READ(cgrp, root, hierarchy_id), BPF_CORE_READ(cgrp, kn, id), path, removed);
}

static __always_inline void report_tp(struct trace_event_raw_cgroup *ctx, bool removed) {
    /* The path is the event's dynamic string: its offset in the low 16 bits. */
    const char *path = (const char *)ctx + (ctx->__data_loc_path & 0xffff);

    report(ctx->root, ctx->id, path, removed);
}

SEC("tp_btf/cgroup_mkdir")
int BPF_PROG(cgroup_mkdir_btf, struct cgroup *cgrp, const char *path) {
    report_cgroup(cgrp, path, false);
    return 0;
}

SEC("raw_tp/cgroup_mkdir")
int BPF_PROG(cgroup_mkdir_raw, struct cgroup *cgrp, const char *path) {
    report_cgroup(cgrp, path, false);
    return 0;
}

SEC("tracepoint/cgroup/cgroup_mkdir")
int cgroup_mkdir_tp(struct trace_event_raw_cgroup *ctx) {
    report_tp(ctx, false);
    return 0;
}

SEC("tp_btf/cgroup_rmdir")
int BPF_PROG(cgroup_rmdir_btf, struct cgroup *cgrp, const char *path) {
    report_cgroup(cgrp, NULL, true);
    return 0;
}

SEC("raw_tp/cgroup_rmdir")
int BPF_PROG(cgroup_rmdir_raw, struct cgroup *cgrp, const char *path) {
    report_cgroup(cgrp, NULL, true);
    return 0;
}

SEC("tracepoint/cgroup/cgroup_rmdir")
int cgroup_rmdir_tp(struct trace_event_raw_cgroup *ctx) {
    report_tp(ctx, true);
    return 0;
}
