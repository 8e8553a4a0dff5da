# `memlat exporter` as the cgroup v2 hierarchy grows, in a qemu guest: run by
# bench/exporter_scale_vm.py through tests/vm/run_vm_tests.py --bench, which reads the report.
# SIZES (set by the bench in a line above this one) lists the numbers of memory cgroups, each
# with a sleeping task; the cgroups are made once and added to between the sizes.
#
# scale.N, per size: the exporter (every tool, per-cgroup labels, as bench/exporter_scale.py)
# started, warmed by 3 scrapes, then SCRAPES scrapes with busybox wget one after another
# between two /proc/uptime readings and two snapshots of the exporter's /proc/PID/stat; then
# IDLE seconds without a scrape between two more; its status (VmRSS) and its descriptors'
# fdinfo (the BPF maps' memlock) at the end, and the last scrape's text.

SCALE_CG=/sys/fs/cgroup/memlat_scale
SCALE_PORT=127.0.0.1:9845
: "${SIZES:=10 100 1000}"
: "${SCRAPES:=200}"
: "${IDLE:=10}"

ifconfig lo 127.0.0.1 up
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir -p $SCALE_CG
echo +memory > $SCALE_CG/cgroup.subtree_control
# A toucher over its memory.high: the stalls memstall and drsnoop count, per cgroup.
mkdir -p $SCALE_CG/toucher
echo $((16 << 20)) > $SCALE_CG/toucher/memory.high
mkdir -p "$RUN"
vm_held toucher anon_toucher --mb 18 --passes 1000000000 --cgroup $SCALE_CG/toucher
vm_release toucher
toucher=$VM_PID

made=0
sleepers=""
for size in $SIZES; do
    while [ "$made" -lt "$size" ]; do
        mkdir $SCALE_CG/c$made
        sleep 1000000 &
        echo $! > $SCALE_CG/c$made/cgroup.procs
        sleepers="$sleepers $!"
        made=$((made + 1))
    done
    vm_begin "scale.$size"
    vm_meta cgroups "$(find $SCALE_CG -mindepth 1 -type d | wc -l)"
    vm_meta scrapes "$SCRAPES"
    vm_meta idle "$IDLE"
    if vm_tool tool memlat exporter --memstall.prometheus-labels cgroup \
        --drsnoop.prometheus-labels cgroup --memstall.max-series 2000 \
        --drsnoop.max-series 2000 --bpf-stats --web.listen-address $SCALE_PORT; then
        pid=$(cat "$RUN/tool.pid")
        for i in 1 2 3; do wget -q -O /dev/null http://$SCALE_PORT/metrics; done
        vm_snap stat.before /proc/"$pid"/stat
        vm_meta uptime.before "$(vm_now)"
        i=0
        while [ "$i" -lt "$SCRAPES" ]; do
            wget -q -O /dev/null http://$SCALE_PORT/metrics
            i=$((i + 1))
        done
        vm_meta uptime.after "$(vm_now)"
        vm_snap stat.after /proc/"$pid"/stat
        sleep "$IDLE"
        vm_snap stat.idle /proc/"$pid"/stat
        vm_meta uptime.idle "$(vm_now)"
        wget -q -O "$RUN/metrics" http://$SCALE_PORT/metrics
        vm_snap status /proc/"$pid"/status
        for fd in /proc/"$pid"/fdinfo/*; do
            echo "fd $(basename "$fd")"
            cat "$fd"
        done > "$RUN/fdinfo" 2>&1
    fi
    vm_stop tool
    vm_end
done

# shellcheck disable=SC2086 # $sleepers is a list of pids
kill "$toucher" $sleepers 2> /dev/null
wait 2> /dev/null
for d in "$SCALE_CG"/c* "$SCALE_CG"/toucher; do rmdir "$d" 2> /dev/null; done
rmdir $SCALE_CG 2> /dev/null
