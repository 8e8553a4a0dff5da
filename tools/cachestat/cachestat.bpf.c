// SPDX-License-Identifier: GPL-2.0
/* cachestat: page-cache accesses, misses and dirties, counted in pages (folios are large).
 *
 *   accesses  filemap:mm_filemap_get_pages (read/splice: the range a read asks for, once per
 *             read even though the kernel reports it once per folio batch), mm_filemap_map_pages
 *             (the fault-around range) and mm_filemap_fault (one page). Kernels before ~6.12
 *             lack these; then fentry/kprobe on folio_mark_accessed or mark_page_accessed.
 *   misses    filemap:mm_filemap_add_to_page_cache, 1 << order pages per folio.
 *   dirties   writeback:writeback_dirty_folio (writeback_dirty_page before 5.17), in pages.
 *   hits      accesses that no miss of the same thread in the same file accounts for
 *             (cachestat.h: struct cachestat_match), counted at the event like the others.
 *
 * Every tracepoint has a tp_btf, a raw_tp and a classic tracepoint program; user space
 * attaches the first the kernel accepts. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "cachestat.h"
#include "cgroup.bpf.h"
#include "common.bpf.h"
#include "compat.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* task_comm() stores the name as two 8-byte words. */
_Static_assert(__builtin_offsetof(struct cachestat_proc_value, comm) % 8 == 0,
               "comm must be 8-byte aligned");

/* Options, set by user space before load. */
const volatile __u32 filter_pid = 0;
const volatile bool filter_cgroup_on = false;
const volatile __u64 filter_cgroup_id = 0;
const volatile __s32 filter_cgroup_level = 0;
const volatile bool filter_on_v1 = false;
const volatile bool per_process = false;
const volatile bool per_file = false;
const volatile bool per_cgroup = false; /* memlat top's page-cache columns */
const volatile bool memcg_on_v1 = false;
const volatile __u32 page_shift = 12;
const volatile __u32 nr_cpus = 1; /* possible CPUs: the rows of one epoch in cpu_counts */

/* Per-CPU counters, one entry per possible CPU and epoch (entry epoch * nr_cpus + cpu; user
 * space sets max_entries at open and reads them through a mapping of the array). An event
 * counts in one epoch everywhere (the CPU's row, the process's and the file's), so that the
 * total of an interval is the sum of its rows (struct cachestat_proc_key). In .bss, sized for
 * 1024 CPUs, they were 64 KiB of every run's memory; 256 bytes on 2 CPUs. */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(map_flags, BPF_F_MMAPABLE);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct cachestat_cpu_counts);
} cpu_counts SEC(".maps");
__u64 table_full = 0;      /* per-process or per-file hash map full */
__u32 table_epoch = 0;     /* written by user space: see struct cachestat_proc_key */
__u64 no_task_storage = 0; /* a thread's state could not be kept: counted without de-dup, and
                            * its accesses all as hits */
/* Written by user space once the hooks are attached: a classic tracepoint names a file by
 * (dev, ino), not by its address_space, so where one is attached every hook matches misses to
 * accesses by (dev, ino). */
bool match_by_inode = false;

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 1);
    __type(key, struct cachestat_proc_key);
    __type(value, struct cachestat_proc_value);
} proc_counts SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 1);
    __type(key, struct cachestat_file_key);
    __type(value, struct cachestat_file_value);
} file_counts SEC(".maps");

/* Per memory cgroup (the task's memory cgroup on v1), since load: memlat top diffs two reads,
 * so there is no epoch. An entry stays when its cgroup goes (user space deletes it). */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 1);
    __type(key, __u64);
    __type(value, struct cachestat_counts);
} cgroup_counts SEC(".maps");

/* What each thread keeps between events: its read cursor and the misses and accesses not yet
 * matched (cachestat.h), with the file row of the accesses owed. */
struct thread {
    struct cachestat_thread t;
    struct cachestat_file_key owed_row;
};

/* In a hash map keyed by TID whose entry goes when the thread exits (compat.bpf.h). */
MEMLAT_THREAD_STATE_MAPS(threads, struct thread);

/* A zeroed state, to create entries of the hash map from (static: not in the skeleton). */
static const volatile struct thread no_thread;

/* ---------------------------------------------------------------- filters */

static __always_inline bool cgroup_selected(struct task_struct *task) {
    return !filter_cgroup_on ||
           cgroup_is_under(task_cgroup(task, filter_on_v1), filter_cgroup_id, filter_cgroup_level);
}

/* Whether the current task's events are counted (-p, -G). */
static __always_inline bool task_selected(void) {
    if (filter_pid && (__u32)(bpf_get_current_pid_tgid() >> 32) != filter_pid)
        return false;
    if (filter_cgroup_on && !cgroup_selected(current_task()))
        return false;
    return true;
}

/* ---------------------------------------------------------------- counting */

static __always_inline void add_proc(__u32 counter, __u64 pages, __u32 epoch) {
    struct task_struct *me = current_task_readable();
    struct cachestat_proc_key key = {.pid = task_pid_tgid(me) >> 32, .epoch = epoch};
    struct cachestat_proc_value *v = bpf_map_lookup_elem(&proc_counts, &key);

    if (!v) {
        struct cachestat_proc_value zero = {};

        zero.uid = (__u32)bpf_get_current_uid_gid();
        task_comm(me, zero.comm);
        v = map_insert_lookup(&proc_counts, &key, &zero, &table_full);
        if (!v)
            return;
    } else {
        /* The name and user of the latest event: a process seen first between fork and
         * exec (the shell, the parent's name) shows the program it became. The name is read
         * from the task where the kernel allows it (compat.bpf.h: the helper costs more
         * than the rest of the event), and the user again only when the name changed:
         * through the helper, since reading task->cred made the verifier scan the kernel's
         * BTF by name (10 ms of start-up on 6.18). */
        const __u64 *words = __builtin_assume_aligned(v->comm, 8);
        __u64 before[2] = {words[0], words[1]};

        task_comm(me, v->comm);
        if (words[0] != before[0] || words[1] != before[1])
            v->uid = (__u32)bpf_get_current_uid_gid();
    }
    __sync_fetch_and_add(&v->counts.c[counter], pages);
}

static __always_inline void add_file(__u32 counter, __u64 pages,
                                     const struct cachestat_file_key *file, __u32 epoch) {
    struct cachestat_file_key key = *file;
    struct cachestat_file_value *v;

    key.epoch = epoch;
    v = bpf_map_lookup_elem(&file_counts, &key);
    if (!v) {
        struct cachestat_file_value zero = {};

        v = map_insert_lookup(&file_counts, &key, &zero, &table_full);
        if (!v)
            return;
    }
    __sync_fetch_and_add(&v->counts.c[counter], pages);
    v->last_pid = bpf_get_current_pid_tgid() >> 32;
}

static __always_inline void add_cgroup(__u32 counter, __u64 pages) {
    __u64 id = cgroup_id(task_cgroup(current_task(), memcg_on_v1));
    struct cachestat_counts *v = bpf_map_lookup_elem(&cgroup_counts, &id);

    if (!v) {
        static const struct cachestat_counts zero;

        v = map_insert_lookup(&cgroup_counts, &id, (const void *)&zero, &table_full);
        if (!v)
            return;
    }
    __sync_fetch_and_add(&v->c[counter], pages);
}

/* Counts `pages` of one kind for the current task and, with -f, for the file `key`. The
 * caller has applied the filters. Atomic adds even on the CPU's own row: a program on another
 * tracepoint may interrupt this one on the same CPU. */
static __noinline void count(__u32 counter, __u64 pages, const struct cachestat_file_key *key) {
    __u32 epoch = *(volatile __u32 *)&table_epoch & 1;
    __u32 index = epoch * nr_cpus + bpf_get_smp_processor_id();
    struct cachestat_cpu_counts *row;

    if (!pages || counter >= CACHESTAT_COUNTERS)
        return;
    row = bpf_map_lookup_elem(&cpu_counts, &index);
    if (row)
        __sync_fetch_and_add(&row->c[counter], pages);
    if (per_process)
        add_proc(counter, pages, epoch);
    if (per_file)
        add_file(counter, pages, key, epoch);
    if (per_cgroup)
        add_cgroup(counter, pages);
}

/* ---------------------------------------------------------------- hits */

static __always_inline struct thread *this_thread(bool create) {
    return thread_state(&threads, &threads_overflow, (const void *)&no_thread, create,
                        &no_task_storage);
}

/* Counts the thread's owed accesses that turned out to be hits, in the row they were made in. */
static __always_inline void count_owed(struct thread *th, __u64 hits) {
    struct cachestat_file_key row;

    if (!hits)
        return;
    row = th->owed_row;
    count(CACHESTAT_HITS, hits, &row);
}

/* An access of `pages` in the file whose match key is `file` (its row: `row`): counted, and
 * its hits with it; a fault path (`defer`) leaves them owed until the thread's next event. */
static __noinline void count_access(struct thread *th, __u64 file, __u64 pages, bool defer,
                                    const struct cachestat_file_key *row) {
    if (!th) {
        count(CACHESTAT_ACCESSES, pages, row);
        count(CACHESTAT_HITS, pages, row);
        return;
    }
    count_owed(th, cachestat_settle_owed(&th->t.match));
    if (!pages)
        return;
    count(CACHESTAT_ACCESSES, pages, row);
    count(CACHESTAT_HITS, cachestat_match_access(&th->t.match, file, pages, defer), row);
    if (defer && th->t.match.owed)
        th->owed_row = *row;
}

static __noinline void count_miss(__u64 file, __u64 pages, const struct cachestat_file_key *row) {
    struct thread *th = this_thread(true);

    count(CACHESTAT_MISSES, pages, row);
    if (th)
        count_owed(th, cachestat_match_miss(&th->t.match, file, pages));
}

static __always_inline void count_dirty(__u64 file, __u64 pages,
                                        const struct cachestat_file_key *row) {
    struct thread *th = this_thread(false);

    count(CACHESTAT_DIRTIES, pages, row);
    if (th)
        cachestat_match_dirty(&th->t.match, file, pages);
}

/* ---------------------------------------------------------------- kernel objects */

struct file_id {
    struct cachestat_file_key key;
    __u64 pages; /* file size in pages, CACHESTAT_SIZE_UNKNOWN if not read */
};

/* A file as the classic tracepoints name it: no inode, so no generation. */
static __always_inline struct cachestat_file_key classic_file(__u32 dev, __u64 ino) {
    struct cachestat_file_key key = {.ino = ino, .dev = dev};

    return key;
}

/* The match key (struct cachestat_match) of a file the classic way, never 0. */
static __always_inline __u64 classic_match_key(__u32 dev, __u64 ino) {
    __u64 key = ((__u64)dev << 32) ^ ino;

    return key ? key : 1;
}

/* The match key of the file behind `mapping`: the address_space itself, or (dev, ino) where a
 * classic tracepoint is attached (match_by_inode). */
static __always_inline __u64 mapping_match_key(struct address_space *mapping) {
    struct inode *host;
    struct super_block *sb;

    if (!*(volatile bool *)&match_by_inode || !mapping)
        return (__u64)mapping;
    host = BPF_CORE_READ(mapping, host);
    if (!host)
        return (__u64)mapping;
    sb = BPF_CORE_READ(host, i_sb);
    return classic_match_key(sb ? BPF_CORE_READ(sb, s_dev) : BPF_CORE_READ(host, i_rdev),
                             BPF_CORE_READ(host, i_ino));
}

/* The file behind an address_space: what the filemap tracepoints print as dev and ino (with
 * -f), and its size in pages (`want_size`). Nothing is read that neither needs. */
static __always_inline void mapping_file(struct address_space *mapping, struct file_id *f,
                                         bool want_size) {
    struct inode *host;
    struct super_block *sb;

    f->key = (struct cachestat_file_key){};
    f->pages = CACHESTAT_SIZE_UNKNOWN;
    /* tp_btf marks the mapping of writeback_dirty_folio as maybe NULL: check before use. */
    if (!mapping || (!want_size && !per_file))
        return;
    /* Helper reads even from tp_btf: a plain load of a pointer field makes the verifier check
     * the pointer's type by name in the kernel's BTF (btf_nested_type_is_trusted(), linear
     * scans of its types), 1.5-2 ms of start-up for cachestat's programs on 6.18. */
    host = BPF_CORE_READ(mapping, host);
    if (!host)
        return;
    if (want_size)
        f->pages = cachestat_file_pages(BPF_CORE_READ(host, i_size), page_shift);
    if (!per_file)
        return;
    f->key.ino = BPF_CORE_READ(host, i_ino);
    f->key.generation = BPF_CORE_READ(host, i_generation);
    sb = BPF_CORE_READ(host, i_sb);
    f->key.dev = sb ? BPF_CORE_READ(sb, s_dev) : BPF_CORE_READ(host, i_rdev);
}

/* A folio's first word holds its page flags: a bare unsigned long up to 6.17, wrapped in
 * memdesc_flags_t (a struct with one member, f) since 6.18. CO-RE refuses to relocate a
 * struct-typed field onto an integer one (and the reverse), so each layout is read through its
 * own flavor, and bpf_core_field_exists() (false when the types do not match) picks the one
 * the running kernel has. The read of the other layout is dead code the verifier drops. */
struct folio___flags_ulong {
    unsigned long flags;
} __attribute__((preserve_access_index));

struct folio___flags_memdesc {
    struct {
        unsigned long f;
    } flags;
} __attribute__((preserve_access_index));

static __always_inline unsigned long folio_flags(struct folio *folio, bool loads) {
    struct folio___flags_memdesc *memdesc = (void *)folio;
    struct folio___flags_ulong *plain = (void *)folio;
    unsigned long flags = 0;

    if (bpf_core_field_exists(memdesc->flags.f)) {
        if (loads)
            flags = memdesc->flags.f;
        else
            bpf_core_read(&flags, sizeof(flags), &memdesc->flags.f);
    } else if (bpf_core_field_exists(plain->flags)) {
        flags = KERNEL_FIELD(loads, plain, flags);
    }
    return flags;
}

/* Where kernels kept a folio's order: 6.1-6.5 in a byte of the first tail page. */
struct folio___v61 {
    unsigned char _folio_order;
} __attribute__((preserve_access_index));

/* 5.16-6.0: in the first tail page's compound_order. */
struct page___compound {
    unsigned char compound_order;
} __attribute__((preserve_access_index));

/* folio_nr_pages(), read through CO-RE for the running kernel's layout: a folio without
 * PG_head is one page; a large folio's order is in its first tail page. */
static __always_inline __u64 folio_pages(struct folio *folio, bool loads) {
    __u32 order = 0;

    if (!folio)
        return 1;
    if (!(folio_flags(folio, loads) & (1UL << bpf_core_enum_value(enum pageflags, PG_head))))
        return 1;
    if (bpf_core_field_exists(struct folio___v61, _folio_order)) {
        order = KERNEL_FIELD(loads, (struct folio___v61 *)folio, _folio_order);
    } else if (bpf_core_field_exists(struct folio, _flags_1)) {
        /* 6.6 and later: the order is the low byte of the first tail page's flags. */
        order = KERNEL_FIELD(loads, folio, _flags_1) & 0xff;
    } else if (bpf_core_field_exists(struct page___compound, compound_order)) {
        struct page___compound *tail = (void *)folio + bpf_core_type_size(struct page);

        order = BPF_CORE_READ(tail, compound_order);
    }
    return cachestat_order_pages(order);
}

/* ---------------------------------------------------------------- misses */

static __always_inline int on_add_folio(struct folio *folio, bool loads) {
    struct address_space *mapping;
    struct file_id f;

    if (!task_selected())
        return 0;
    /* Read as the page the folio begins with (the same field, at the same place): kernels
     * before 5.16 have no struct folio, and pass a page here. */
    mapping = BPF_CORE_READ((struct page *)folio, mapping);
    mapping_file(mapping, &f, false);
    count_miss(mapping_match_key(mapping), folio_pages(folio, loads), &f.key);
    return 0;
}

SEC("tp_btf/mm_filemap_add_to_page_cache")
int BPF_PROG(add_btf, struct folio *folio) {
    return on_add_folio(folio, true);
}

SEC("raw_tp/mm_filemap_add_to_page_cache")
int BPF_PROG(add_raw, struct folio *folio) {
    return on_add_folio(folio, false);
}

SEC("tracepoint/filemap/mm_filemap_add_to_page_cache")
int add_tp(struct trace_event_raw_mm_filemap_op_page_cache *ctx) {
    __u32 order = 0;

    if (!task_selected())
        return KEEP_EVENT;
    /* The order field arrived with large folios in the page cache (6.x). */
    if (bpf_core_field_exists(ctx->order))
        order = ctx->order;
    struct cachestat_file_key file = classic_file(ctx->s_dev, ctx->i_ino);

    count_miss(classic_match_key(ctx->s_dev, ctx->i_ino), cachestat_order_pages(order), &file);
    return KEEP_EVENT;
}

/* ---------------------------------------------------------------- dirties */

static __always_inline int on_dirty(struct folio *folio, struct address_space *mapping,
                                    bool is_folio, bool loads) {
    struct file_id f;

    if (!task_selected())
        return 0;
    mapping_file(mapping, &f, false);
    count_dirty(mapping_match_key(mapping), is_folio ? folio_pages(folio, loads) : 1, &f.key);
    return 0;
}

SEC("tp_btf/writeback_dirty_folio")
int BPF_PROG(dirty_folio_btf, struct folio *folio, struct address_space *mapping) {
    return on_dirty(folio, mapping, true, true);
}

SEC("raw_tp/writeback_dirty_folio")
int BPF_PROG(dirty_folio_raw, struct folio *folio, struct address_space *mapping) {
    return on_dirty(folio, mapping, true, false);
}

/* The classic format has neither the folio's size nor the device: one page per folio, the
 * per-file view shows device 0, and the pages stay pending (no match key without the
 * device). */
SEC("tracepoint/writeback/writeback_dirty_folio")
int dirty_folio_tp(struct trace_event_raw_writeback_folio_template *ctx) {
    struct cachestat_file_key file = classic_file(0, ctx->ino);

    if (task_selected())
        count(CACHESTAT_DIRTIES, 1, &file);
    return KEEP_EVENT;
}

/* Kernels before 5.17 dirty pages, not folios. */
struct trace_event_raw_writeback_page_template {
    struct trace_entry ent;
    char name[32];
    ino_t ino;
    unsigned long index;
} __attribute__((preserve_access_index));

SEC("tp_btf/writeback_dirty_page")
int BPF_PROG(dirty_page_btf, struct page *page, struct address_space *mapping) {
    return on_dirty(NULL, mapping, false, true);
}

SEC("raw_tp/writeback_dirty_page")
int BPF_PROG(dirty_page_raw, struct page *page, struct address_space *mapping) {
    return on_dirty(NULL, mapping, false, false);
}

SEC("tracepoint/writeback/writeback_dirty_page")
int dirty_page_tp(struct trace_event_raw_writeback_page_template *ctx) {
    struct cachestat_file_key file = classic_file(0, ctx->ino);

    if (task_selected())
        count(CACHESTAT_DIRTIES, 1, &file);
    return KEEP_EVENT;
}

/* ---------------------------------------------------------------- accesses */

/* One filemap_get_pages() call: [index, last] inclusive (checked against the kernel source
 * and ftrace: a 4 KiB read at 0 prints ofs=0-4095). `key` identifies the file for the
 * thread's cursor. */
static __always_inline void on_read_range(__u64 key, __u64 index, __u64 last, __u64 file_pages,
                                          const struct cachestat_file_key *file) {
    struct thread *th = this_thread(true);
    struct cachestat_cursor none = {};

    count_access(th, key,
                 cachestat_read_pages(th ? &th->t.cursor : &none, key, index, last, file_pages),
                 false, file);
}

/* A fault path's access (fault-around window or faulting page): its read-ahead comes after
 * it. */
static __always_inline void on_fault_access(__u64 key, __u64 pages,
                                            const struct cachestat_file_key *file) {
    count_access(this_thread(true), key, pages, true, file);
}

static __always_inline int on_get_pages(struct address_space *mapping, __u64 index, __u64 last) {
    struct file_id f;

    if (!task_selected())
        return 0;
    mapping_file(mapping, &f, true);
    on_read_range(mapping_match_key(mapping), index, last, f.pages, &f.key);
    return 0;
}

/* The fault-around window [index, last] of one fault; pages of it that are not cached are
 * skipped by the kernel (and counted by the fault that follows). */
static __always_inline int on_map_pages(struct address_space *mapping, __u64 index, __u64 last) {
    struct file_id f;
    struct cachestat_cursor none = {};

    if (!task_selected())
        return 0;
    mapping_file(mapping, &f, true);
    on_fault_access(mapping_match_key(mapping),
                    cachestat_read_pages(&none, 1, index, last, f.pages), &f.key);
    return 0;
}

static __always_inline int on_fault(struct address_space *mapping) {
    struct file_id f;

    if (!task_selected())
        return 0;
    mapping_file(mapping, &f, false);
    on_fault_access(mapping_match_key(mapping), 1, &f.key);
    return 0;
}

SEC("tp_btf/mm_filemap_get_pages")
int BPF_PROG(get_pages_btf, struct address_space *mapping, unsigned long index,
             unsigned long last) {
    return on_get_pages(mapping, index, last);
}

SEC("tp_btf/mm_filemap_map_pages")
int BPF_PROG(map_pages_btf, struct address_space *mapping, unsigned long index,
             unsigned long last) {
    return on_map_pages(mapping, index, last);
}

SEC("tp_btf/mm_filemap_fault")
int BPF_PROG(fault_btf, struct address_space *mapping, unsigned long index) {
    return on_fault(mapping);
}

SEC("raw_tp/mm_filemap_get_pages")
int BPF_PROG(get_pages_raw, struct address_space *mapping, unsigned long index,
             unsigned long last) {
    return on_get_pages(mapping, index, last);
}

SEC("raw_tp/mm_filemap_map_pages")
int BPF_PROG(map_pages_raw, struct address_space *mapping, unsigned long index,
             unsigned long last) {
    return on_map_pages(mapping, index, last);
}

SEC("raw_tp/mm_filemap_fault")
int BPF_PROG(fault_raw, struct address_space *mapping, unsigned long index) {
    return on_fault(mapping);
}

/* The classic format has no address_space: the file is (dev, ino), and its size is unknown,
 * so a read that asks past the end of the file counts the pages it asked for. */
SEC("tracepoint/filemap/mm_filemap_get_pages")
int get_pages_tp(struct trace_event_raw_mm_filemap_op_page_cache_range *ctx) {
    struct cachestat_file_key file = classic_file(ctx->s_dev, ctx->i_ino);

    if (!task_selected())
        return KEEP_EVENT;
    on_read_range(classic_match_key(ctx->s_dev, ctx->i_ino), ctx->index, ctx->last_index,
                  CACHESTAT_SIZE_UNKNOWN, &file);
    return KEEP_EVENT;
}

SEC("tracepoint/filemap/mm_filemap_map_pages")
int map_pages_tp(struct trace_event_raw_mm_filemap_op_page_cache_range *ctx) {
    struct cachestat_cursor none = {};
    struct cachestat_file_key file = classic_file(ctx->s_dev, ctx->i_ino);

    if (!task_selected())
        return KEEP_EVENT;
    on_fault_access(
        classic_match_key(ctx->s_dev, ctx->i_ino),
        cachestat_read_pages(&none, 1, ctx->index, ctx->last_index, CACHESTAT_SIZE_UNKNOWN), &file);
    return KEEP_EVENT;
}

SEC("tracepoint/filemap/mm_filemap_fault")
int fault_tp(struct trace_event_raw_mm_filemap_fault *ctx) {
    struct cachestat_file_key file = classic_file(ctx->s_dev, ctx->i_ino);

    if (task_selected())
        on_fault_access(classic_match_key(ctx->s_dev, ctx->i_ino), 1, &file);
    return KEEP_EVENT;
}

/* Fall-back for kernels without the access tracepoints: pages of the folios marked accessed.
 * filemap_read() marks every folio it copies (the first of a batch only if the previous read
 * did not end in it); faults mark none, but zapping a young file PTE (munmap, exit) does, so
 * mapped pages count late. Anonymous folios (mapping with the low bit set) are skipped. */
static __always_inline int on_mark_accessed(struct folio *folio) {
    struct address_space *mapping;
    struct file_id f;

    if (!folio || !task_selected())
        return 0;
    mapping = BPF_CORE_READ(folio, mapping);
    if (!mapping || ((unsigned long)mapping & 3))
        return 0;
    mapping_file(mapping, &f, false);
    count_access(this_thread(true), mapping_match_key(mapping), folio_pages(folio, false), false,
                 &f.key);
    return 0;
}

SEC("fentry/folio_mark_accessed")
int BPF_PROG(folio_accessed_fentry, struct folio *folio) {
    return on_mark_accessed(folio);
}

SEC("kprobe/folio_mark_accessed")
int BPF_KPROBE(folio_accessed_kprobe, struct folio *folio) {
    on_mark_accessed(folio);
    return KEEP_EVENT;
}

/* Kernels before folios (5.16) mark pages. Their BTF has no struct folio, so the page is read
 * as a struct page (flavors below), never cast to a folio: CO-RE could not relocate that. A
 * page of a compound page (file THP) counts as the whole compound page, from its head. */
struct page___flags_ulong {
    unsigned long flags;
} __attribute__((preserve_access_index));

struct page___tail {
    unsigned long compound_head; /* bit 0 set: a tail page, the rest the head's address */
} __attribute__((preserve_access_index));

static __always_inline __u64 page_pages(struct page *page) {
    struct page___flags_ulong *plain = (void *)page;
    struct page___compound *tail;
    unsigned long flags = 0;

    if (bpf_core_field_exists(plain->flags))
        bpf_core_read(&flags, sizeof(flags), &plain->flags);
    if (!(flags & (1UL << bpf_core_enum_value(enum pageflags, PG_head))))
        return 1;
    if (!bpf_core_field_exists(struct page___compound, compound_order))
        return 1;
    tail = (void *)page + bpf_core_type_size(struct page);
    return cachestat_order_pages(BPF_CORE_READ(tail, compound_order));
}

static __always_inline int on_mark_page_accessed(struct page *page) {
    struct page___tail *t = (void *)page;
    struct address_space *mapping;
    unsigned long head = 0;
    struct file_id f;

    if (!page || !task_selected())
        return 0;
    if (bpf_core_field_exists(t->compound_head))
        bpf_core_read(&head, sizeof(head), &t->compound_head);
    if (head & 1)
        page = (struct page *)(head - 1);
    mapping = BPF_CORE_READ(page, mapping);
    if (!mapping || ((unsigned long)mapping & 3))
        return 0;
    mapping_file(mapping, &f, false);
    count_access(this_thread(true), mapping_match_key(mapping), page_pages(page), false, &f.key);
    return 0;
}

SEC("fentry/mark_page_accessed")
int BPF_PROG(page_accessed_fentry, struct page *page) {
    return on_mark_page_accessed(page);
}

SEC("kprobe/mark_page_accessed")
int BPF_KPROBE(page_accessed_kprobe, struct page *page) {
    on_mark_page_accessed(page);
    return KEEP_EVENT;
}

/* An exiting thread's state goes with it; what it still owed is hits. */
static __always_inline void on_thread_exit(void) {
    struct thread *th = this_thread(false);

    if (th)
        count_owed(th, cachestat_settle_owed(&th->t.match));
    thread_state_exit(&threads, &threads_overflow);
}

MEMLAT_THREAD_EXIT_CALLING(on_thread_exit)
