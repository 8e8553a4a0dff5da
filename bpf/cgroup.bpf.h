/* Cgroups of tasks, for the tools' -G filters and cgroup columns. Include after vmlinux.h and
 * the libbpf headers. A cgroup is named by its kernfs node id, as user space finds it with
 * name_to_handle_at() (lib/kernel/cgroups.h). */
#ifndef MEMLAT_CGROUP_BPF_H
#define MEMLAT_CGROUP_BPF_H

/* Kernels before 6.1 kept ancestor ids instead of ancestor pointers. */
struct cgroup___ancestor_ids {
    int level;
    u64 ancestor_ids[];
} __attribute__((preserve_access_index));

/* The task's cgroup: in the memory controller's cgroup v1 hierarchy when `v1_memory`, else its
 * cgroup v2 cgroup. NULL when it has none there. */
static __always_inline struct cgroup *task_cgroup(struct task_struct *task, bool v1_memory) {
    if (v1_memory) {
        int id = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);
        struct cgroup_subsys_state *css;

        if (id < 0 || id >= CGROUP_SUBSYS_COUNT)
            return NULL;
        css = BPF_CORE_READ(task, cgroups, subsys[id]);
        return css ? BPF_CORE_READ(css, cgroup) : NULL;
    }
    return BPF_CORE_READ(task, cgroups, dfl_cgrp);
}

static __always_inline __u64 cgroup_id(struct cgroup *cgrp) {
    return cgrp ? BPF_CORE_READ(cgrp, kn, id) : 0;
}

/* Whether `cgrp` is the cgroup `id` at depth `level` or below it. */
static __always_inline bool cgroup_is_under(struct cgroup *cgrp, __u64 id, int level) {
    if (!cgrp || level < 0 || level > 64 || BPF_CORE_READ(cgrp, level) < level)
        return false;
    if (bpf_core_field_exists(struct cgroup, ancestors)) {
        struct cgroup *ancestor = NULL;

        bpf_core_read(&ancestor, sizeof(ancestor), &cgrp->ancestors[level]);
        return cgroup_id(ancestor) == id;
    } else {
        struct cgroup___ancestor_ids *old = (void *)cgrp;
        u64 ancestor_id = 0;

        bpf_core_read(&ancestor_id, sizeof(ancestor_id), &old->ancestor_ids[level]);
        return ancestor_id == id;
    }
}

#endif
