/* Helpers every memlat BPF program shares. Include after vmlinux.h and the libbpf headers. */
#ifndef MEMLAT_COMMON_BPF_H
#define MEMLAT_COMMON_BPF_H

#include "memlat/hist.h"

/* errno values BPF helpers return, negated (vmlinux.h has no errno.h). */
#ifndef E2BIG
#define E2BIG 7
#endif

/* floor(log2(v)) for v >= 1, and 0 for v == 0: the slot of a log2 histogram. */
static __always_inline __u32 log2_slot(__u64 v)
{
	__u32 slot = 0;

	if (v >> 32) {
		v >>= 32;
		slot += 32;
	}
	if (v >> 16) {
		v >>= 16;
		slot += 16;
	}
	if (v >> 8) {
		v >>= 8;
		slot += 8;
	}
	if (v >> 4) {
		v >>= 4;
		slot += 4;
	}
	if (v >> 2) {
		v >>= 2;
		slot += 2;
	}
	if (v >> 1) {
		slot += 1;
	}
	return slot < MEMLAT_HIST_SLOTS ? slot : MEMLAT_HIST_SLOTS - 1;
}

/* Whether bit `bit` is set in a bitmap of 64-bit words held in read-only data. */
static __always_inline bool bitmap_test(const volatile __u64 *map, __u32 words, __u32 bit)
{
	__u32 word = bit / 64;

	if (word >= words)
		return false;
	return (map[word] >> (bit % 64)) & 1;
}

/* Inserts `init` under `key` (unless another CPU just did) and returns the map's value, for
 * the first event of a key. A full table is counted in *full and gives NULL, so that what
 * could not be counted is reported rather than lost silently. */
static __always_inline void *map_insert_lookup(void *map, const void *key, const void *init,
					       __u64 *full)
{
	if (bpf_map_update_elem(map, key, init, BPF_NOEXIST) == -E2BIG) {
		__sync_fetch_and_add(full, 1);
		return NULL;
	}
	return bpf_map_lookup_elem(map, key);
}

/* Submits a ring-buffer record without waking user space until `batch_bytes` have built up:
 * at high event rates a wakeup per event would cost more than the event. User space also
 * drains the buffer on a timer, so a small trickle is never held back for long. */
static __always_inline void submit_batched(void *record, void *ringbuf, __u64 batch_bytes)
{
	__u64 flags = BPF_RB_NO_WAKEUP;

	if (bpf_ringbuf_query(ringbuf, BPF_RB_AVAIL_DATA) >= batch_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(record, flags);
}

#endif
