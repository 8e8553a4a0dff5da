# drsnoop on the guest kernel. Checked by tests/vm/check_drsnoop.py.
#
# memcg.HOOK: the runtime tests' main scenario (memcg limit reclaim against an ftrace-instance
# oracle), once per hook path of the vmscan tracepoints: a reader in a memory cgroup limited to
# 16 MiB reads 64 MiB of /dev/ram0 (brd: clean, reclaimable page cache; the guest has no disk).
# direct: global direct reclaim, which the host cannot provoke safely: two readers stream
# DIRECT_MB of /dev/ram0 and /dev/ram1 at the same time through the HEADROOM_MB the 512 MiB
# guest has left once a tmpfs file holds the rest; compared with /proc/vmstat allocstall_* and
# pgsteal_direct.

CG=/sys/fs/cgroup/memlat_vm
DIRECT_MB=512
HEADROOM_MB=96

drsnoop_memcg() { # NAME DISABLE
    vm_begin "$1"
    if vm_have drsnoop && vm_ramdisk; then
        echo +memory > /sys/fs/cgroup/cgroup.subtree_control
        mkdir -p $CG
        echo $((16 << 20)) > $CG/memory.max
        # Cold start: the ram disk's page cache from an earlier scenario is dropped.
        echo 1 > /proc/sys/vm/drop_caches
        vm_held reader sh -c "echo \$\$ > $CG/cgroup.procs &&
            exec dd if=/dev/ram0 of=/dev/null bs=1M count=64"
        vm_meta reader_pid "$VM_PID"
        inst=/sys/kernel/tracing/instances/memlat_vm
        mkdir -p $inst
        echo 8192 > $inst/buffer_size_kb
        echo "common_pid == $VM_PID" > $inst/events/vmscan/mm_vmscan_memcg_reclaim_end/filter
        echo 1 > $inst/events/vmscan/mm_vmscan_memcg_reclaim_end/enable
        if vm_tool tool MEMLAT_DISABLE_HOOKS="$2" drsnoop -v -j -p "$VM_PID"; then
            vm_release reader
            vm_bg_wait reader
            sleep 1
        fi
        vm_stop tool
        vm_bg_wait reader 5
        echo 0 > $inst/events/vmscan/mm_vmscan_memcg_reclaim_end/enable
        cat $inst/trace > "$RUN/ftrace"
        rmdir $inst
        rmdir $CG
    fi
    vm_end
}

drsnoop_memcg drsnoop.memcg.tp_btf ""
drsnoop_memcg drsnoop.memcg.raw_tp tp_btf
drsnoop_memcg drsnoop.memcg.tracepoint tp_btf,raw_tp

vm_begin drsnoop.direct
if vm_have drsnoop && vm_ramdisk; then
    echo 1 > /proc/sys/vm/drop_caches
    # Most of the memory held in tmpfs (no swap: not reclaimable) leaves the readers a small
    # LRU, which kswapd alone cannot keep free fast enough.
    free_mb=$(awk '/MemAvailable/ {print int($2 / 1024)}' /proc/meminfo)
    hog_mb=$((free_mb - HEADROOM_MB))
    vm_meta hog_mb "$hog_mb"
    mkdir -p /hog
    mount -t tmpfs -o size=$((hog_mb + 1))m hog /hog
    dd if=/dev/zero of=/hog/hog bs=1M count="$hog_mb" 2>/dev/null
    if vm_tool tool drsnoop -v -j -k direct; then
        vm_snap vmstat.before /proc/vmstat
        vm_bg reader0 dd if=/dev/ram0 of=/dev/null bs=1M count=$DIRECT_MB
        vm_bg reader1 dd if=/dev/ram1 of=/dev/null bs=1M count=$DIRECT_MB
        vm_bg_wait reader0
        vm_bg_wait reader1
        vm_snap vmstat.after /proc/vmstat
    fi
    vm_stop tool
    vm_snap meminfo /proc/meminfo
    umount /hog
fi
vm_end
