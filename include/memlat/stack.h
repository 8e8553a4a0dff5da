/* Kernel and user stacks as the BPF side records them (BPF_MAP_TYPE_STACK_TRACE) and the C++
 * front-ends read them: at most MEMLAT_STACK_DEPTH frames, the kernel's PERF_MAX_STACK_DEPTH
 * default (kernel.perf_event_max_stack), unused frames zero. */
#ifndef MEMLAT_STACK_H
#define MEMLAT_STACK_H

#define MEMLAT_STACK_DEPTH 127

/* bpf_get_stackid()'s answer for a user stack where there is none (-EFAULT: a kernel thread, or
 * no user registers), kept as the stack id by the BPF side. */
#define MEMLAT_STACK_NO_USER (-14)

/* bpf_get_stackid()'s answers when its map has no room for a stack: the bucket the stack's hash
 * picks holds another one (-EEXIST), or every entry is taken (-ENOMEM). The BPF side counts them
 * (stacks.bpf.h) and keeps the answer as the stack id, which user space prints as lost. */
#define MEMLAT_STACK_NO_ROOM (-17)
#define MEMLAT_STACK_MAP_FULL (-12)

#endif
