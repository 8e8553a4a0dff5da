/* Data shared by cachestat.bpf.c and cachestat.cpp, and the page arithmetic both
 * sides (and the unit tests) use. */
#ifndef MEMLAT_CACHESTAT_H
#define MEMLAT_CACHESTAT_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define CACHESTAT_COMM_LEN 16
/* Folio orders above this are not real (MAX_PAGE_ORDER is 10, PUD-sized folios 18). */
#define CACHESTAT_MAX_ORDER 20

/* What the counters count, all in pages (base pages, PAGE_SIZE each). */
enum cachestat_counter {
    CACHESTAT_ACCESSES = 0, /* pages looked up by reads and page faults */
    CACHESTAT_MISSES = 1,   /* pages added to the page cache */
    CACHESTAT_DIRTIES = 2,  /* pages of folios that went from clean to dirty */
    CACHESTAT_HITS = 3,     /* accessed pages no miss of the same thread accounts for */
    CACHESTAT_COUNTERS = 4,
};

/* One CPU's counters (global view), or one process's or file's (per-key views): 32 bytes, so
 * an entry never straddles two cache lines. */
struct cachestat_counts {
    __u64 c[CACHESTAT_COUNTERS];
};

/* The global counters of one CPU, in .bss; one cache line each. */
struct cachestat_cpu_counts {
    __u64 c[CACHESTAT_COUNTERS];
    __u64 pad[8 - CACHESTAT_COUNTERS];
};

/* Text and JSON intervals read the per-process and per-file tables one epoch at a time: the
 * BPF side writes under `table_epoch` (0 or 1), user space flips it each interval, reads the
 * closed epoch's entries, and deletes them an interval later, once no program can still be
 * adding to them (cachestat.cpp). --prometheus keeps epoch 0. */
struct cachestat_proc_key {
    __u32 pid; /* thread-group id of the task current when the event happened */
    __u32 epoch;
};

struct cachestat_proc_value {
    struct cachestat_counts counts;
    __u32 uid;
    __u32 pad;
    char comm[CACHESTAT_COMM_LEN];
};

struct cachestat_file_key {
    __u64 ino;
    __u32 dev; /* the kernel's dev_t: major << 20 | minor; 0 when not known */
    /* The inode's i_generation: a file created after another was deleted often gets the same
     * inode number at once (ext4 hands out the lowest free one), and must not be counted or
     * named as the old file. 0 where the hook cannot see the inode (classic tracepoints). */
    __u32 generation;
    __u32 epoch; /* see struct cachestat_proc_key */
    __u32 pad;
};

struct cachestat_file_value {
    struct cachestat_counts counts;
    __u32 last_pid; /* the last process that touched the file: where user space looks for
                     * its path (/proc/PID/fd, /proc/PID/maps) */
    __u32 pad;
};

/* The read(2) cursor of a thread: filemap_read() calls filemap_get_pages() once per batch of
 * folios, and every call reports the range from the current position to the END OF THE
 * REQUEST. The calls after the first of one read are continuations: they start inside the
 * range already counted and end at the same place. */
struct cachestat_cursor {
    __u64 mapping; /* the address_space (or dev << 32 ^ ino for classic tracepoints) */
    __u64 first;   /* first page of the range last counted */
    __u64 last;    /* last page (inclusive) counted so far */
};

/* Hits are counted where they happen, so that the machine-wide total is the sum of the
 * per-process and per-file rows (each event adds the same pages to all three). A thread's
 * accesses are matched against the misses the same thread caused in the same file: the pages
 * a read(2) adds (its read-ahead) come before the read's access event, and the accesses they
 * match are misses, not hits. The other accesses are hits. An mmap fault reports its access
 * before the read-ahead it starts, so a fault-path access first waits (`owed`): the thread's
 * next miss in that file matches it, and its next access (or its exit) counts it a hit.
 * Pages a write creates are misses no read will match: a dirtying in the file takes them off
 * `pending` again. */
struct cachestat_match {
    __u64 pending;      /* misses not yet matched by an access */
    __u64 pending_file; /* the file they were added to (a match key, as cursor.mapping) */
    __u64 owed;         /* fault-path accesses not yet known to be hits or misses */
    __u64 owed_file;
};

/* What one thread keeps between events. */
struct cachestat_thread {
    struct cachestat_cursor cursor;
    struct cachestat_match match;
};

/* Pages of a folio of this order. */
static inline __u64 cachestat_order_pages(__u32 order) {
    return order > CACHESTAT_MAX_ORDER ? 1 : (__u64)1 << order;
}

/* Pages of a file of `size` bytes (the first page index past its end). */
static inline __u64 cachestat_file_pages(__s64 size, __u32 page_shift) {
    if (size <= 0)
        return 0;
    return ((__u64)size + ((1ULL << page_shift) - 1)) >> page_shift;
}

/* Pages newly looked up by one filemap_get_pages() call for the range [first, last] (inclusive,
 * as the tracepoint reports it), given the thread's cursor, which it advances. `file_pages` is
 * the file's size in pages (CACHESTAT_SIZE_UNKNOWN when not known): a read that asks past the
 * end of the file looks up nothing there. A continuation of the previous call (same file,
 * starting inside the range counted before) counts only the pages beyond it. */
#define CACHESTAT_SIZE_UNKNOWN (~0ULL)
static inline __u64 cachestat_read_pages(struct cachestat_cursor *cur, __u64 mapping, __u64 first,
                                         __u64 last, __u64 file_pages) {
    if (file_pages != CACHESTAT_SIZE_UNKNOWN && last >= file_pages)
        last = file_pages - 1; /* an empty file (0 pages) is caught below */
    if (file_pages == 0 || last < first) {
        cur->mapping = 0;
        return 0;
    }
    if (cur->mapping == mapping && first > cur->first && first <= cur->last) {
        __u64 counted = cur->last;

        if (last <= counted)
            return 0;
        cur->last = last;
        return last - counted;
    }
    cur->mapping = mapping;
    cur->first = first;
    cur->last = last;
    return last - first + 1;
}

/* A miss of `pages` in `file`: matches the accesses owed in that file first. Returns the owed
 * pages that are hits after all (they were owed in another file), which the caller counts. */
static inline __u64 cachestat_match_miss(struct cachestat_match *m, __u64 file, __u64 pages) {
    __u64 hits = 0;

    if (m->owed && m->owed_file == file) {
        __u64 matched = m->owed < pages ? m->owed : pages;

        m->owed -= matched;
        pages -= matched;
    } else {
        hits = m->owed;
        m->owed = 0;
    }
    if (m->pending_file != file) {
        m->pending = 0;
        m->pending_file = file;
    }
    m->pending += pages;
    return hits;
}

/* The owed accesses, settled as hits (before any other access of the thread). */
static inline __u64 cachestat_settle_owed(struct cachestat_match *m) {
    __u64 owed = m->owed;

    m->owed = 0;
    return owed;
}

/* An access of `pages` in `file` (after cachestat_settle_owed()): the pages no pending miss
 * accounts for are hits, returned; with `defer` (a fault path) they are owed instead, and 0 is
 * returned. */
static inline __u64 cachestat_match_access(struct cachestat_match *m, __u64 file, __u64 pages,
                                           int defer) {
    __u64 matched = 0;

    if (m->pending_file == file)
        matched = m->pending < pages ? m->pending : pages;
    m->pending -= matched;
    pages -= matched;
    if (defer && pages) {
        m->owed = pages;
        m->owed_file = file;
        return 0;
    }
    return pages;
}

/* Pages of `file` dirtied: misses a write created, which no read will match. */
static inline void cachestat_match_dirty(struct cachestat_match *m, __u64 file, __u64 pages) {
    if (m->pending_file == file)
        m->pending -= m->pending < pages ? m->pending : pages;
}

#endif
