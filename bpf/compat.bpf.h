/* What the running kernel offers, set by user space before load (tools/common/features.h,
 * set_compat()). Every program that needs one of these has a fall-back behind the flag; the
 * verifier never looks at the branch a flag rules out, so helpers and map types an old kernel
 * lacks may appear there. Include once per BPF object, after vmlinux.h and the libbpf headers. */
#ifndef MEMLAT_COMPAT_BPF_H
#define MEMLAT_COMPAT_BPF_H

/* BPF_MAP_TYPE_TASK_STORAGE in tracing programs (5.11); else a hash map keyed by TID. */
const volatile bool memlat_task_storage = true;
/* BPF_MAP_TYPE_RINGBUF (5.8); else a perf event array. */
const volatile bool memlat_ringbuf = true;
/* The kernel's own BTF: bpf_get_current_task_btf() and tp_btf/fentry programs. */
const volatile bool memlat_kernel_btf = true;

#endif
