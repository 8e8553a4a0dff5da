# oomwhy on the guest kernel. Checked by tests/vm/check_oomwhy.py. The oracle is the guest's
# kernel log: each scenario writes a marker to /dev/kmsg before its kill and keeps the log
# from the marker on (oomwhy itself never reads it).
#
# memcg.HOOK: cgroup v2, a parent with memory.max 32 MiB and the tasks in its child: a victim
# (anon_toucher 20 MiB, lingering, oom_score_adj 1000) and a trigger touching 20 MiB more. The
# parent's limit fires; memory.events' oom_kill counts the kill at both levels.
# high: the same with memory.high 30 MiB on the parent too (throttled a little, then
# memory.max; 24 MiB throttled the trigger for 50 s in the emulated guest).
# global: a global OOM (no swap): anon_toucher, made the victim with oom_score_adj 1000, touches
# more than the guest has.
# mempolicy: the same bound to node 0 (MPOL_BIND), touching more than node 0 holds: the kernel
# calls it CONSTRAINT_MEMORY_POLICY.

P=/sys/fs/cgroup/memlat_oom

# The scenarios of no hook path (high, global) run once per kernel: in its boot with BTF.
oomwhy_once() {
    [ "${MEMLAT_VM_NO_BTF:-0}" = 1 ] || return 0
    vm_skip "no kernel BTF: this boot runs the hook paths without it; $1 runs in the other"
    return 1
}

oomwhy_mark() { echo "memlat-vm: $1" > /dev/kmsg; }

# Starts a lingering toucher of MB MiB (LABEL; anon_toucher's ARGS after) at oom_score_adj ADJ:
# its pid in $TOUCHER and meta LABEL_pid once it has touched its memory.
oomwhy_toucher() { # LABEL MB ADJ ARGS...
    label=$1 mb=$2 adj=$3
    shift 3
    anon_toucher --mb "$mb" "$@" --linger > "$RUN/$label.out" 2>&1 &
    TOUCHER=$!
    n=0
    while ! grep -q "^pid=" "$RUN/$label.out" && [ $n -lt 300 ]; do
        usleep 100000
        n=$((n + 1))
    done
    echo "$adj" > /proc/$TOUCHER/oom_score_adj
    vm_meta "${label}_pid" "$TOUCHER"
}

oomwhy_memcg() { # NAME DISABLE HIGH_MB
    vm_begin "$1"
    if vm_have oomwhy && vm_btf_for "${1##*.}" && { [ -z "$3" ] || oomwhy_once "$1"; }; then
        echo +memory > /sys/fs/cgroup/cgroup.subtree_control
        mkdir -p $P
        echo $((32 << 20)) > $P/memory.max
        [ -n "$3" ] && echo $(($3 << 20)) > $P/memory.high
        echo +memory > $P/cgroup.subtree_control
        mkdir -p $P/child
        vm_meta parent $P
        vm_meta child $P/child
        oomwhy_mark "$1 begins"
        if vm_tool tool MEMLAT_DISABLE_HOOKS="$2" oomwhy -v -j; then
            oomwhy_toucher victim 20 1000 --cgroup $P/child
            VICTIM=$TOUCHER
            vm_run trigger anon_toucher --mb 20 --cgroup $P/child
            sleep 2
        fi
        vm_stop tool
        kill -9 "$VICTIM" 2>/dev/null
        wait "$VICTIM" 2>/dev/null
        dmesg -s 1048576 > "$RUN/dmesg"
        vm_snap parent.events $P/memory.events
        vm_snap child.events $P/child/memory.events
        rmdir $P/child $P
    fi
    vm_end
}

oomwhy_memcg oomwhy.memcg.tp_btf ""
oomwhy_memcg oomwhy.memcg.raw_tp tp_btf
oomwhy_memcg oomwhy.memcg.tracepoint tp_btf,raw_tp
oomwhy_memcg oomwhy.high "" 30

vm_begin oomwhy.global
if vm_have oomwhy && oomwhy_once oomwhy.global; then
    total_mb=$(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo)
    vm_meta total_mb "$total_mb"
    vm_meta total_kb "$(awk '/MemTotal/ {print $2}' /proc/meminfo)"
    vm_snap vmstat.before /proc/vmstat
    oomwhy_mark "oomwhy.global begins"
    if vm_tool tool oomwhy -v -j; then
        # Run as docs/tools/oomwhy.md says to run it for a global OOM: out of the kernel's
        # choice. On 5.10 the tool's own allocation 11 ms after the hog's kill (before its
        # memory was back) once started a second OOM whose victim was the tool, the largest
        # process left in the guest.
        echo -1000 > "/proc/$(cat "$RUN/tool.pid")/oom_score_adj"
        # A second OOM may start before the hog's memory is back (the kernel then skips the
        # reaped hog). With the tool out of its choice and PID 1 unkillable, nothing would
        # be left to kill: "Kernel panic - not syncing: System is deadlocked on memory" (a
        # CI run). A spare of 16 MiB at oom_score_adj 500 is that second victim; the hog
        # (1000, and larger) stays the first.
        oomwhy_toucher spare 16 500
        SPARE=$TOUCHER
        # Made the first victim whatever else runs (the spare, the tool, PID 1). As
        # much as MemTotal (more is refused at mmap by the overcommit heuristic): the kernel,
        # the initramfs and the tools hold part of it, so touching it all cannot succeed.
        vm_held hog sh -c "echo 1000 > /proc/self/oom_score_adj && exec anon_toucher --mb $total_mb"
        vm_release hog
        vm_bg_wait hog 120
        sleep 2
        kill -9 "$SPARE" 2>/dev/null
        wait "$SPARE"
    fi
    vm_stop tool
    dmesg -s 1048576 > "$RUN/dmesg"
    vm_snap vmstat.after /proc/vmstat
fi
vm_end

vm_begin oomwhy.mempolicy
if vm_have oomwhy && oomwhy_once oomwhy.mempolicy; then
    node0_mb=$(awk '/MemTotal/ {print int($4 / 1024)}' /sys/devices/system/node/node0/meminfo)
    vm_meta node0_kb "$(awk '/MemTotal/ {print $4}' /sys/devices/system/node/node0/meminfo)"
    vm_meta nodes "$(cat /sys/devices/system/node/has_memory)"
    oomwhy_mark "oomwhy.mempolicy begins"
    if vm_tool tool oomwhy -v -j; then
        vm_held hog sh -c "echo 1000 > /proc/self/oom_score_adj && exec anon_toucher --mb $node0_mb --bind-node 0"
        vm_release hog
        vm_bg_wait hog 120
        sleep 2
    fi
    vm_stop tool
    dmesg -s 1048576 > "$RUN/dmesg"
fi
vm_end

# storm: 200 processes of 2 MiB each released at once into a cgroup of 8 MiB: the kernel kills
# all but a few, as fast as it can (about 20 a second in these guests; see below). oomwhy's reader cannot keep up (stopped with SIGSTOP while they
# run) and its buffer holds five kill records (--buffer-size 4K): every kill is either reported
# or counted as not reported, against memory.events' oom_kill and the kernel log.
STORM=/sys/fs/cgroup/memlat_oom_storm
STORM_TASKS=200
vm_begin oomwhy.storm
if vm_have oomwhy && oomwhy_once oomwhy.storm; then
    echo +memory > /sys/fs/cgroup/cgroup.subtree_control
    mkdir -p $STORM
    echo $((8 << 20)) > $STORM/memory.max
    vm_meta tasks $STORM_TASKS
    oomwhy_mark "oomwhy.storm begins"
    if vm_tool tool oomwhy -j --buffer-size 4K; then
        # The touchers start ahead and wait on a named pipe outside the cgroup; one open of
        # the pipe releases them all at once, so the kills come as fast as the kernel makes
        # them, not as fast as the guest starts processes (12-21 a second that way).
        rm -f "$RUN/storm.start"
        mkfifo "$RUN/storm.start"
        i=0
        while [ $i -lt $STORM_TASKS ]; do
            anon_toucher --mb 2 --cgroup $STORM --linger --start "$RUN/storm.start" \
                > /dev/null 2>&1 &
            i=$((i + 1))
        done
        sleep 2
        kill -STOP "$(cat "$RUN/tool.pid")"
        # The kernel's report of each kill goes to the log only, not to the serial console
        # too, and without the list of the cgroup's 200 tasks (vm.oom_dump_tasks): 40,000
        # lines that left the log only the last 85 kills; now it keeps nearly all of them.
        # Neither changed the rate (18-21 kills a second on 6.12 under TCG, 44 on the 6.18
        # host): the kernel serializes OOM kills (oom_lock) and each waits for its victim.
        dmesg -n 1
        dump_tasks=$(cat /proc/sys/vm/oom_dump_tasks)
        echo 0 > /proc/sys/vm/oom_dump_tasks
        exec 9> "$RUN/storm.start"
        exec 9>&-
        # Until the kills stop: oom_kill unchanged for 3 s (every task started has joined the
        # cgroup and allocated by then), 90 s at most.
        n=0
        still=0
        last=-1
        while [ $n -lt 900 ] && [ $still -lt 30 ]; do
            kills=$(awk '/^oom_kill / {print $2}' $STORM/memory.events)
            if [ "$kills" = "$last" ]; then still=$((still + 1)); else still=0; fi
            last=$kills
            usleep 100000
            n=$((n + 1))
        done
        vm_meta waited_ds $n
        dmesg -n 4   # the boot's loglevel=4
        echo "$dump_tasks" > /proc/sys/vm/oom_dump_tasks
        kill -CONT "$(cat "$RUN/tool.pid")"
        sleep 2
    fi
    vm_snap events $STORM/memory.events
    vm_stop tool
    vm_snap events.after $STORM/memory.events
    dmesg -s 4194304 > "$RUN/dmesg"
    for p in $(cat $STORM/cgroup.procs); do kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    rmdir $STORM
fi
vm_end

vm_choices oomwhy ""
