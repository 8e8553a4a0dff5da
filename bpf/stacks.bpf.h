/* Stacks taken by bpf_get_stackid(): the map they go to, and what is counted when one finds no
 * room there. Include after common.bpf.h. */
#ifndef MEMLAT_STACKS_BPF_H
#define MEMLAT_STACKS_BPF_H

/* A stack trace map, `name`, of MEMLAT_STACK_DEPTH frames a stack: one entry in the object, for
 * user space to size when it wants stacks (a map of 0 entries does not load). */
#define MEMLAT_STACK_TRACE_MAP(name)                                                               \
    struct {                                                                                       \
        __uint(type, BPF_MAP_TYPE_STACK_TRACE);                                                    \
        __uint(max_entries, 1);                                                                    \
        __uint(key_size, sizeof(__u32));                                                           \
        __uint(value_size, MEMLAT_STACK_DEPTH * sizeof(__u64));                                    \
    } name SEC(".maps")

/* Stacks that found no room in their map (MEMLAT_STACK_NO_ROOM), for user space to report: a
 * stack goes to the bucket its hash picks, and without BPF_F_REUSE_STACKID (which would change
 * what ids already handed out point to) the kernel refuses a stack whose bucket holds another
 * one (-EEXIST), or any new one once every entry is taken (-ENOMEM). */
__u64 stacks_lost = 0;

/* bpf_get_stackid() that counts a stack it had no room for in stacks_lost. */
static __always_inline __s32 stack_id(void *ctx, void *stack_map, __u64 flags) {
    long id = bpf_get_stackid(ctx, stack_map, flags);

    if (id == MEMLAT_STACK_NO_ROOM || id == MEMLAT_STACK_MAP_FULL)
        __sync_fetch_and_add(&stacks_lost, 1);
    return id;
}

#endif
