/* A cgroup made or removed, as lib/loading/cgroup_births.bpf.c hands it to user space
 * (lib/loading/cgroup_births.cpp) through its ring buffer. */
#ifndef MEMLAT_CGROUP_BIRTH_H
#define MEMLAT_CGROUP_BIRTH_H

/* The longest path kept, with its NUL. The kernel formats up to 1024 bytes for the event; a
 * Kubernetes container's cgroup path under the systemd driver is about 190. */
#define CGROUP_BIRTH_PATH_MAX 512

struct cgroup_birth {
    __u64 id;         /* the cgroup's kernfs node id, as the tools' BPF sides name cgroups */
    __u32 removed;    /* 0: made (path set), 1: removed (path empty) */
    __u32 path_bytes; /* the path's length with its NUL; CGROUP_BIRTH_PATH_MAX: cut short */
    char path[CGROUP_BIRTH_PATH_MAX]; /* in its hierarchy: "/kubepods.slice/..." */
};

#endif
