# cachestat's access fall-backs on the guest kernel: accesses come from folio_mark_accessed
# (or mark_page_accessed) through fentry, else kprobe, else are not counted. Kernels with the
# filemap access tracepoints (6.12 and newer; not 6.1) would use those first: every variant
# disables them (the filemap_access family; a no-op where they do not exist), so that each
# covers the path its name says. The host tests cover the filemap tracepoints. Each path reads
# CACHE_MB of /dev/ram0 cold (after drop_caches: the guest's own page cache, nothing of the
# host's) and then warm, each read watched by its own cachestat --per-file -p (--per-file: the ram disk's row
# apart from dd's own program). Checked by tests/vm/check_cachestat.py.

CACHE_MB=64

cachestat_read() { # PHASE DISABLE
    vm_held "$1.reader" dd if=/dev/ram0 of=/dev/null bs=1M count=$CACHE_MB
    if vm_tool "$1.tool" MEMLAT_DISABLE_HOOKS="$2" cachestat -v -j --per-file -p "$VM_PID" 1000; then
        vm_release "$1.reader"
        vm_bg_wait "$1.reader"
        usleep 300000
    fi
    vm_stop "$1.tool"
    vm_bg_wait "$1.reader" 5
}

cachestat_cold_warm() { # NAME DISABLE
    vm_begin "$1"
    if vm_have cachestat && vm_btf_for "${1##*.}" && vm_ramdisk; then
        vm_meta pages $((CACHE_MB * 256))
        sync
        echo 1 > /proc/sys/vm/drop_caches
        # Keep the ram disk open between the reads: the last close of a block device drops
        # its page cache (kill_bdev), and the warm read would be cold again.
        exec 4< /dev/ram0
        cachestat_read cold "$2"
        cachestat_read warm "$2"
        exec 4<&-
    fi
    vm_end
}

cachestat_cold_warm cachestat.cold_warm.fentry filemap_access
cachestat_cold_warm cachestat.cold_warm.kprobe filemap_access,fentry
cachestat_cold_warm cachestat.cold_warm.no_accesses filemap_access,fentry,kprobe

vm_choices cachestat "" "-P"
