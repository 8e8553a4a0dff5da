# drsnoop on the guest kernel. Checked by tests/vm/check_drsnoop.py.
#
# memcg.HOOK: the runtime tests' main scenario (memcg limit reclaim against an ftrace-instance
# oracle), once per hook path of the vmscan tracepoints: a reader in a memory cgroup limited to
# 16 MiB reads 64 MiB of /dev/ram0 (brd: clean, reclaimable page cache; the guest has no disk).
# direct: global direct reclaim, which the host cannot provoke safely: reclaim_hog (see its
# header) keeps kswapd0 off its CPU, and a round without direct stalls runs again (vm_rounds);
# compared with /proc/vmstat allocstall_* and pgsteal_direct.

CG=/sys/fs/cgroup/memlat_vm

drsnoop_memcg() { # NAME DISABLE
    vm_begin "$1"
    if vm_have drsnoop && vm_btf_for "${1##*.}" && vm_ramdisk; then
        echo +memory > /sys/fs/cgroup/cgroup.subtree_control
        mkdir -p $CG
        echo $((16 << 20)) > $CG/memory.max
        # Cold start: the ram disk's page cache from an earlier scenario is dropped.
        echo 1 > /proc/sys/vm/drop_caches
        vm_held reader sh -c "echo \$\$ > $CG/cgroup.procs &&
            exec dd if=/dev/ram0 of=/dev/null bs=1M count=64"
        vm_meta reader_pid "$VM_PID"
        vm_ftrace memlat_vm 8192
        vm_ftrace_events memlat_vm "common_pid == $VM_PID" \
            vmscan/mm_vmscan_memcg_reclaim_begin vmscan/mm_vmscan_memcg_reclaim_end
        vm_watch reader MEMLAT_DISABLE_HOOKS="$2" drsnoop -v -j -p "$VM_PID"
        vm_ftrace_keep memlat_vm ftrace
        rmdir $CG
    fi
    vm_end
}

drsnoop_memcg drsnoop.memcg.tp_btf ""
drsnoop_memcg drsnoop.memcg.raw_tp tp_btf
drsnoop_memcg drsnoop.memcg.tracepoint tp_btf,raw_tp

drsnoop_direct_round() { # NAME
    if vm_have drsnoop && vm_ramdisk; then
        echo 1 > /proc/sys/vm/drop_caches
        # reclaim_hog fills node 0's page cache from the ram disk, then, bound to node 0 and
        # running on its only CPU (where kswapd0 must run, made SCHED_IDLE meanwhile), touches
        # more anonymous memory than node 0 has free: the allocations reclaim the cache
        # themselves.
        vm_hog_sizes
        vm_snap node0.start /sys/devices/system/node/node0/meminfo
        if vm_tool tool drsnoop -v -j -k direct; then
            vm_snap vmstat.before /proc/vmstat
            vm_run hog reclaim_hog --node 0 --cpu 0 --fill /dev/ram0 \
                --fill-mb "$VM_HOG_FILL_MB" --mb "$VM_HOG_MB"
            vm_snap vmstat.after /proc/vmstat
            vm_snap node0.after /sys/devices/system/node/node0/meminfo
        fi
        vm_stop tool
        vm_snap meminfo /proc/meminfo
    fi
}

# Whether the round's hog stalled in direct reclaim as often as the checker needs (5:
# allocstall_* moved by that much): on 7.3 the SCHED_FIFO hog left most of the reclaim to
# kswapd0 (8 direct stalls against 26,560 pages stolen by kswapd; none in one CI run), and a
# workload can only make a stall likely, never certain.
drsnoop_direct_stalled() { # NAME
    [ -s "$RUN/vmstat.after" ] || return 0
    awk '/^allocstall_/ {n[FILENAME] += $2}
        END {exit !(n[ARGV[2]] - n[ARGV[1]] >= 5)}' "$RUN/vmstat.before" "$RUN/vmstat.after"
}

vm_rounds drsnoop_direct_stalled drsnoop_direct_round drsnoop.direct

vm_choices drsnoop "" "-H"
