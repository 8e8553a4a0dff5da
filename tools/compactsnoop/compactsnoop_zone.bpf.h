/* compactsnoop's reads of a struct zone: where it is (node, zone index) and, for -e, what
 * /proc/zoneinfo shows of it (free blocks per order, watermarks, free pages), each through
 * CO-RE so that the field moves between kernels follow the running one. Included by
 * compactsnoop.bpf.c after its struct run_start. */
#ifndef MEMLAT_COMPACTSNOOP_ZONE_BPF_H
#define MEMLAT_COMPACTSNOOP_ZONE_BPF_H

/* Node id and zone index (enum zone_type) of a zone: the index is the zone's position in its
 * node's node_zones[], with the running kernel's sizeof(struct zone) as the stride. */
static __always_inline void zone_position(struct zone *zone, __s32 *nid, __s32 *idx) {
    struct pglist_data *pgdat = BPF_CORE_READ(zone, zone_pgdat);
    __u64 first, size = bpf_core_type_size(struct zone);

    *nid = -1;
    *idx = -1;
    if (!pgdat || !size)
        return;
    *nid = BPF_CORE_READ(pgdat, node_id);
    first = (__u64)pgdat + bpf_core_field_offset(struct pglist_data, node_zones);
    if ((__u64)zone >= first)
        *idx = ((__u64)zone - first) / size;
}

/* -e: the zone's free blocks per order, watermarks and free pages. */
static __always_inline void read_zone_state(struct zone *zone, struct run_start *r) {
    int free_item = bpf_core_enum_value(enum zone_stat_item, NR_FREE_PAGES);
    __u64 area_size = bpf_core_type_size(struct free_area);
    __u64 areas = bpf_core_field_offset(struct zone, free_area);
    __u64 nr_free = bpf_core_field_offset(struct free_area, nr_free);
    __u32 orders = 0;
    unsigned long boost = 0;
    long free = 0;

    if (area_size)
        orders = bpf_core_field_size(struct zone, free_area) / area_size;
    if (orders > COMPACTSNOOP_MAX_ORDERS)
        orders = COMPACTSNOOP_MAX_ORDERS;
    r->nr_orders = orders;
    for (int o = 0; o < COMPACTSNOOP_MAX_ORDERS; o++) {
        unsigned long n = 0;

        if (o >= orders)
            break;
        bpf_probe_read_kernel(&n, sizeof(n), (void *)zone + areas + o * area_size + nr_free);
        r->nr_free[o] = n;
    }
    if (bpf_core_field_exists(zone->watermark_boost))
        boost = BPF_CORE_READ(zone, watermark_boost);
    r->wmark_min = BPF_CORE_READ(zone, _watermark[WMARK_MIN]) + boost;
    r->wmark_low = BPF_CORE_READ(zone, _watermark[WMARK_LOW]) + boost;
    r->wmark_high = BPF_CORE_READ(zone, _watermark[WMARK_HIGH]) + boost;
    r->wmark_boost = boost;
    bpf_probe_read_kernel(&free, sizeof(free),
                          (void *)zone + bpf_core_field_offset(struct zone, vm_stat) +
                              free_item * sizeof(atomic_long_t));
    /* Per-CPU deltas can leave the summed counter briefly negative. */
    r->free_pages = free > 0 ? free : 0;
    r->flags |= COMPACTSNOOP_HAVE_ZONE_STATE;
}

#endif
