/* Tracepoint arguments whose position or order moved between kernels, read one way by every
 * tool (libbpf-tools keeps the same kind of facts in its core_fixes.bpf.h). tp_btf and raw_tp
 * programs see arguments by position only, so each fact below names the kernels it holds on,
 * and user space reads the running kernel's prototype from its BTF (lib/kernel/types.h) to set
 * the read-only data these helpers use (each object that includes this has all of them; only
 * the tools that read one set it). The classic tracepoints name their fields and need none of
 * this. Include after vmlinux.h, the libbpf headers and common.bpf.h. */
#ifndef MEMLAT_KERNEL_ARGS_BPF_H
#define MEMLAT_KERNEL_ARGS_BPF_H

/* ---- any argument by a position known at load */

/* A load from the program's context at a constant byte offset, in inline assembly: written in
 * C, clang merges tracepoint_arg()'s cases into one load from ctx + 8 * n, which the verifier
 * refuses (no access to ctx at a computed offset). A macro: the offset is part of the
 * instruction. */
#define MEMLAT_CTX_LOAD(ctx, off)                                                                  \
    ({                                                                                             \
        __u64 __v;                                                                                 \
        asm volatile("%0 = *(u64 *)(%1 + " #off ")" : "=r"(__v) : "r"(ctx));                       \
        __v;                                                                                       \
    })

/* The n-th argument (0-11) of a tp_btf or raw_tp program. `n` must come from read-only data,
 * so that the verifier knows it and follows only its case: the others, which may lie beyond
 * the arguments this kernel's tracepoint has, are never checked. */
static __always_inline __u64 tracepoint_arg(const void *ctx, __u8 n) {
    switch (n) {
    case 0:
        return MEMLAT_CTX_LOAD(ctx, 0);
    case 1:
        return MEMLAT_CTX_LOAD(ctx, 8);
    case 2:
        return MEMLAT_CTX_LOAD(ctx, 16);
    case 3:
        return MEMLAT_CTX_LOAD(ctx, 24);
    case 4:
        return MEMLAT_CTX_LOAD(ctx, 32);
    case 5:
        return MEMLAT_CTX_LOAD(ctx, 40);
    case 6:
        return MEMLAT_CTX_LOAD(ctx, 48);
    case 7:
        return MEMLAT_CTX_LOAD(ctx, 56);
    case 8:
        return MEMLAT_CTX_LOAD(ctx, 64);
    case 9:
        return MEMLAT_CTX_LOAD(ctx, 72);
    case 10:
        return MEMLAT_CTX_LOAD(ctx, 80);
    case 11:
        return MEMLAT_CTX_LOAD(ctx, 88);
    }
    return 0;
}

/* ---- vmscan:mm_vmscan_{direct,memcg,memcg_softlimit}_reclaim_begin/end
 *
 * Begin: (int order, gfp_t gfp_flags) up to 6.x; (gfp_t gfp_flags, int order, struct
 * mem_cgroup *memcg) in 7.x (Debian's 7.3 has it). User space sets reclaim_gfp_first from the
 * prototype (reclaim_begin_gfp_first()); a shape it does not know leaves only the classic
 * tracepoint, whose fields have names. End: (unsigned long nr_reclaimed) first on every kernel
 * since the template came (2.6.36). */
const volatile bool reclaim_gfp_first = false;

struct reclaim_begin {
    int order;
    gfp_t gfp;
};

static __always_inline struct reclaim_begin reclaim_begin_of(__u64 first, __u64 second) {
    struct reclaim_begin b;

    if (reclaim_gfp_first) {
        b.order = (int)second;
        b.gfp = (gfp_t)first;
    } else {
        b.order = (int)first;
        b.gfp = (gfp_t)second;
    }
    return b;
}

/* A reclaim begin's three ways in; user space attaches the first the kernel accepts.
 * `on_begin(kind, order, gfp)` is the tool's. */
#define MEMLAT_RECLAIM_BEGIN_PROGRAMS(name, kind, on_begin)                                        \
    SEC("tp_btf/mm_vmscan_" #name "_begin")                                                        \
    int BPF_PROG(name##_begin_btf, __u64 first, __u64 second) {                                    \
        struct reclaim_begin b = reclaim_begin_of(first, second);                                  \
                                                                                                   \
        on_begin(kind, b.order, b.gfp);                                                            \
        return 0;                                                                                  \
    }                                                                                              \
    SEC("raw_tp/mm_vmscan_" #name "_begin")                                                        \
    int BPF_PROG(name##_begin_raw, __u64 first, __u64 second) {                                    \
        struct reclaim_begin b = reclaim_begin_of(first, second);                                  \
                                                                                                   \
        on_begin(kind, b.order, b.gfp);                                                            \
        return 0;                                                                                  \
    }                                                                                              \
    SEC("tracepoint/vmscan/mm_vmscan_" #name "_begin")                                             \
    int name##_begin_tp(struct trace_event_raw_mm_vmscan_direct_reclaim_begin_template *ctx) {     \
        on_begin(kind, ctx->order, ctx->gfp_flags);                                                \
        return KEEP_EVENT;                                                                         \
    }

/* A reclaim end's three ways in. `on_end(ctx, kind, nr_reclaimed)` is the tool's. */
#define MEMLAT_RECLAIM_END_PROGRAMS(name, kind, on_end)                                            \
    SEC("tp_btf/mm_vmscan_" #name "_end")                                                          \
    int BPF_PROG(name##_end_btf, unsigned long nr_reclaimed) {                                     \
        on_end(ctx, kind, nr_reclaimed);                                                           \
        return 0;                                                                                  \
    }                                                                                              \
    SEC("raw_tp/mm_vmscan_" #name "_end")                                                          \
    int BPF_PROG(name##_end_raw, unsigned long nr_reclaimed) {                                     \
        on_end(ctx, kind, nr_reclaimed);                                                           \
        return 0;                                                                                  \
    }                                                                                              \
    SEC("tracepoint/vmscan/mm_vmscan_" #name "_end")                                               \
    int name##_end_tp(struct trace_event_raw_mm_vmscan_direct_reclaim_end_template *ctx) {         \
        on_end(ctx, kind, ctx->nr_reclaimed);                                                      \
        return KEEP_EVENT;                                                                         \
    }

#define MEMLAT_RECLAIM_PROGRAMS(name, kind, on_begin, on_end)                                      \
    MEMLAT_RECLAIM_BEGIN_PROGRAMS(name, kind, on_begin)                                            \
    MEMLAT_RECLAIM_END_PROGRAMS(name, kind, on_end)

/* ---- writeback:balance_dirty_pages
 *
 * The pause (in jiffies) is the second to last argument: the 11th of 12 up to 5.17, the 7th of
 * 8 from 5.18, which passes struct dirty_throttle_control in place of five numbers. User space
 * sets dirty_pause_arg from the prototype's length (memstall); tracepoint_arg() reads it. */
const volatile __u8 dirty_pause_arg = 6;

/* ---- mmap_lock:mmap_lock_start_locking, _acquire_returned, _released
 *
 * (struct mm_struct *mm, const char *memcg_path, bool write[, bool success]) from 5.11 to 6.12
 * at least (the kernel formats the caller's memory cgroup path at each lock operation while
 * any program or ftrace has them on); (mm, bool write[, bool success]) since "mm: mmap_lock:
 * optimize mmap_lock tracepoints" (Shakeel Butt, November 2024; 6.18 and 7.3 have it), whose
 * classic event has a memcg_id.
 * User space sets mmap_lock_memcg_path from the prototype (mmap_lock_passes_memcg_path()); the
 * classic tracepoints read mm, write and success by name on both. */
const volatile bool mmap_lock_memcg_path = false;

/* tracepoint_arg()'s position of `write` (success follows it). */
static __always_inline __u8 mmap_lock_write_arg(void) {
    return mmap_lock_memcg_path ? 2 : 1;
}

/* The three ways into each mmap_lock event, calling the tool's `on_start(mm, write)`,
 * `on_acquired(ctx, mm, write, success)` and `on_released(ctx, mm, write)`. */
#define MEMLAT_MMAP_LOCK_PROGRAM(event, prefix, kind, section, call)                               \
    SEC(section "mmap_lock_" #event)                                                               \
    int prefix##_##kind(void *ctx) {                                                               \
        struct mm_struct *mm = (struct mm_struct *)tracepoint_arg(ctx, 0);                         \
        bool write = tracepoint_arg(ctx, mmap_lock_write_arg());                                   \
                                                                                                   \
        call;                                                                                      \
        return 0;                                                                                  \
    }

#define MEMLAT_MMAP_LOCK_PROGRAMS(on_start, on_acquired, on_released)                              \
    MEMLAT_MMAP_LOCK_PROGRAM(start_locking, start_locking, btf, "tp_btf/", on_start(mm, write))    \
    MEMLAT_MMAP_LOCK_PROGRAM(start_locking, start_locking, raw, "raw_tp/", on_start(mm, write))    \
    MEMLAT_MMAP_LOCK_PROGRAM(                                                                      \
        acquire_returned, acquire_returned, btf, "tp_btf/",                                        \
        on_acquired(ctx, mm, write, tracepoint_arg(ctx, mmap_lock_write_arg() + 1)))               \
    MEMLAT_MMAP_LOCK_PROGRAM(                                                                      \
        acquire_returned, acquire_returned, raw, "raw_tp/",                                        \
        on_acquired(ctx, mm, write, tracepoint_arg(ctx, mmap_lock_write_arg() + 1)))               \
    MEMLAT_MMAP_LOCK_PROGRAM(released, released, btf, "tp_btf/", on_released(ctx, mm, write))      \
    MEMLAT_MMAP_LOCK_PROGRAM(released, released, raw, "raw_tp/", on_released(ctx, mm, write))      \
    SEC("tracepoint/mmap_lock/mmap_lock_start_locking")                                            \
    int start_locking_tp(struct trace_event_raw_mmap_lock *ctx) {                                  \
        on_start(ctx->mm, ctx->write);                                                             \
        return KEEP_EVENT;                                                                         \
    }                                                                                              \
    SEC("tracepoint/mmap_lock/mmap_lock_acquire_returned")                                         \
    int acquire_returned_tp(struct trace_event_raw_mmap_lock_acquire_returned *ctx) {              \
        on_acquired(ctx, ctx->mm, ctx->write, ctx->success);                                       \
        return KEEP_EVENT;                                                                         \
    }                                                                                              \
    SEC("tracepoint/mmap_lock/mmap_lock_released")                                                 \
    int released_tp(struct trace_event_raw_mmap_lock *ctx) {                                       \
        on_released(ctx, ctx->mm, ctx->write);                                                     \
        return KEEP_EVENT;                                                                         \
    }

#endif
