# memstall on the guest kernel. Checked by tests/vm/check_memstall.py.
#
# high.HOOK: memory.high throttling on cgroup v2, which the host (cgroup v1) cannot show: one
# task in a cgroup whose memory.high is 16 MiB touches 18 MiB of anonymous memory. The guest
# has no swap, so reclaim frees nothing and each return to user space over the limit sleeps
# in mem_cgroup_handle_over_high (a memstall). Oracles: the cgroup's memory.pressure "some"
# total (PSI; the task is the cgroup's only one, so "some" is its memstall time) and
# memory.events "high", and an ftrace instance of the task's switches (each throttle is one
# sleep). The guest boots with psi=1 (Debian builds PSI disabled by default), and again with
# psi=0 (vm.K.psi0, memstall only): then memstall tells the throttle by its killable sleeps,
# and the PSI oracle is not there. `memlat top -j -a` watches too: its row of the cgroup on
# cgroup v2 (PSI%, memory.high as the limit, high events), against the same oracles.

CG=/sys/fs/cgroup/memlat_memstall

# Delay accounting on for a scenario (kernel.task_delayacct, 5.14+; 5.10 accounts by default)
# and back as it was.
DELAYACCT=/proc/sys/kernel/task_delayacct
memstall_delayacct_on() {
    old_delayacct=$(cat $DELAYACCT 2>/dev/null)
    [ -n "$old_delayacct" ] && echo 1 > $DELAYACCT
}
# Off, as on a stock host (the sysctl's default), for the scenario that measures that state.
memstall_delayacct_off() {
    old_delayacct=$(cat $DELAYACCT 2>/dev/null)
    [ -n "$old_delayacct" ] && echo 0 > $DELAYACCT
    vm_meta delayacct "$(cat $DELAYACCT 2>/dev/null || echo always)"
}
memstall_delayacct_restore() {
    [ -n "$old_delayacct" ] && echo "$old_delayacct" > $DELAYACCT
}

# Waits (at most 180 s) until LABEL's workload printed TEXT, or ended.
memstall_wait_for() { # LABEL TEXT
    n=0
    while ! grep -q "$2" "$RUN/$1.out" && [ $n -lt 1800 ] &&
        kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; do
        usleep 100000
        n=$((n + 1))
    done
}

# The scheduler's clocks now (ktime, sched_clk, cpu_clk): PSI times stalls with cpu_clock(),
# memstall with CLOCK_MONOTONIC (ktime). Two of these let the checker measure how far apart
# they run in this guest.
memstall_clocks() { # LABEL
    f=/sys/kernel/debug/sched/debug
    [ -e $f ] || f=/proc/sched_debug
    head -6 $f > "$RUN/$1" 2>&1
}

# The task's switches and wake-ups, on CLOCK_MONOTONIC (memstall's clock), in ftrace
# instance INSTANCE; vm_ftrace_keep INSTANCE ftrace sends them back.
memstall_ftrace_on() { # INSTANCE PID
    vm_ftrace "$1" 8192 mono
    vm_ftrace_events "$1" "prev_pid == $2 || next_pid == $2" sched/sched_switch
    vm_ftrace_events "$1" "pid == $2" sched/sched_wakeup
}

# The workload's own begin/end events on CLOCK_MONOTONIC, sent back as "windows": the windows
# memstall times, each one (ftrace prints microseconds). The instance is made
# (memstall_windows_prepare) before the scenario sizes its workload from the free memory: its
# buffers are memory too (4 MiB a CPU once left 5.10's reclaim_hog to the OOM killer).
# 256 KiB a CPU holds some 2,500 events; a trace that lost any fails its check.
memstall_windows_prepare() { # INSTANCE
    vm_ftrace "$1" 256 mono
}

# The held workload LABEL ($VM_PID), which lingers after its work, watched by memstall (hook
# paths DISABLE disabled) and by its begin/end EVENTS (one word, SYSTEM/EVENT ...) in the
# instance of memstall_windows_prepare, from its release until it printed TEXT: /proc/vmstat
# around that, and its delay accounting (taskstats, label stats) while it lingers.
memstall_lingering() { # LABEL TEXT DISABLE INSTANCE EVENTS
    # shellcheck disable=SC2086
    vm_ftrace_events "$4" "common_pid == $VM_PID" $5
    if vm_tool tool MEMLAT_DISABLE_HOOKS="$3" memstall -v -j -p "$VM_PID"; then
        vm_snap vmstat.before /proc/vmstat
        vm_release "$1"
        memstall_wait_for "$1" "$2"
        vm_run stats taskstats "$VM_PID"
        vm_snap vmstat.after /proc/vmstat
    fi
    vm_ftrace_keep "$4" windows
    vm_stop tool
    kill "$VM_PID" 2>/dev/null
    vm_release "$1"
    vm_bg_wait "$1" 10
}

# Whether PSI runs in the guest (the checkers take the oracles it gives only then).
memstall_psi_meta() {
    if [ -e /proc/pressure/memory ]; then vm_meta psi on; else vm_meta psi off; fi
}

memstall_high() { # NAME DISABLE
    vm_begin "$1"
    if vm_have memstall && vm_btf_for "${1##*.}"; then
        memstall_psi_meta
        echo +memory > /sys/fs/cgroup/cgroup.subtree_control
        mkdir -p $CG
        echo $((16 << 20)) > $CG/memory.high
        # On one CPU: PSI's total of a cgroup is the average of its CPUs' stall times
        # weighted by each CPU's non-idle time, not their sum; a task that stalls on one
        # CPU and runs on the other reads less than its wall time stalled.
        vm_held toucher taskset 2 anon_toucher --mb 18 --cgroup $CG
        vm_meta toucher_pid "$VM_PID"
        [ -e $CG/memory.pressure ] && vm_snap pressure.before $CG/memory.pressure
        vm_snap events.before $CG/memory.events
        memstall_clocks clocks.before
        memstall_ftrace_on memlat_high "$VM_PID"
        vm_meta cgroup $CG
        # -G and -C on cgroup v2: the toucher is the cgroup's one task. -G also writes the
        # stalled stacks folded (the off-CPU path of stall profiles) into $RUN/folded.
        # memlat top's rows on cgroup v2 too (its PSI% and memory.high columns), per second.
        if vm_tool tool MEMLAT_DISABLE_HOOKS="$2" memstall -v -j -p "$VM_PID" &&
            vm_tool by_cgroup MEMLAT_DISABLE_HOOKS="$2" memstall -j -G $CG -f "$RUN/folded" &&
            vm_tool per_cgroup MEMLAT_DISABLE_HOOKS="$2" memstall -j -C &&
            vm_tool top MEMLAT_DISABLE_HOOKS="$2" memlat top -j -a --rows 1000 1; then
            vm_release toucher
            vm_bg_wait toucher
            sleep 1
        fi
        vm_stop by_cgroup
        vm_stop per_cgroup
        vm_stop top
        vm_ftrace_keep memlat_high ftrace
        [ -e $CG/memory.pressure ] && vm_snap pressure.after $CG/memory.pressure
        vm_snap events.after $CG/memory.events
        memstall_clocks clocks.after
        vm_stop tool
        vm_bg_wait toucher 5
        rmdir $CG
    fi
    vm_end
}

# dirty.HOOK: dirty throttling, where the raw tracepoint's arguments differ before 5.18 (the
# pause is the 11th of 12 there): a writer of 64 MiB to a ram disk past a 256 KiB dirty limit
# (the guest's own, set for the scenario), against an ftrace instance of its
# balance_dirty_pages events with a positive pause. raw_tp is tried first; the tp_btf variant
# disables it to run the tp_btf programs.
# Up to five rounds: a CI boot of 6.1 had three in a row where the writer was never paused.
memstall_dirty() { # NAME DISABLE
    VM_ROUNDS=5
    vm_rounds memstall_paused memstall_dirty_round "$@"
    unset VM_ROUNDS
}

# False only when the round's trace was kept and shows no pause of the writer: writeback to a
# ram disk is a copy, and in 2 of 14 runs (once more on 5.10 in CI) the writer never got ahead.
memstall_paused() { # NAME DISABLE
    [ -s "$RUN/ftrace" ] || return 0
    grep -q ' pause=[1-9]' "$RUN/ftrace"
}

memstall_dirty_round() { # NAME DISABLE
    if vm_have memstall && vm_btf_for "${1##*.}" && vm_ramdisk; then
        old_bytes=$(cat /proc/sys/vm/dirty_bytes)
        old_ratio=$(cat /proc/sys/vm/dirty_ratio)
        old_bg_bytes=$(cat /proc/sys/vm/dirty_background_bytes)
        old_bg_ratio=$(cat /proc/sys/vm/dirty_background_ratio)
        echo $((64 << 10)) > /proc/sys/vm/dirty_background_bytes
        echo $((256 << 10)) > /proc/sys/vm/dirty_bytes
        vm_held writer dd if=/dev/zero of=/dev/ram1 bs=64k count=1024
        vm_meta writer_pid "$VM_PID"
        # The pauses and the writer's switches, on memstall's clock: each pause lasts from
        # its tracepoint until the writer runs again after its sleep.
        vm_ftrace memlat_vm 8192 mono
        vm_ftrace_events memlat_vm "common_pid == $VM_PID" writeback/balance_dirty_pages
        vm_ftrace_events memlat_vm "prev_pid == $VM_PID || next_pid == $VM_PID" \
            sched/sched_switch
        vm_watch writer MEMLAT_DISABLE_HOOKS="$2" memstall -v -j -p "$VM_PID"
        vm_ftrace_keep memlat_vm ftrace
        if [ "$old_bytes" != 0 ]; then echo "$old_bytes" > /proc/sys/vm/dirty_bytes
        else echo "$old_ratio" > /proc/sys/vm/dirty_ratio; fi
        if [ "$old_bg_bytes" != 0 ]; then echo "$old_bg_bytes" > /proc/sys/vm/dirty_background_bytes
        else echo "$old_bg_ratio" > /proc/sys/vm/dirty_background_ratio; fi
    fi
}

# swapin.HOOK: swap-ins that wait for a real block device. The swap area is the guest's
# virtio-blk disk (vm_swapdisk: a sparse file on the host, whose reads qemu completes
# asynchronously; a ram disk or zram would complete them on the CPU, without a wait). One task
# in a cgroup whose memory.max is 16 MiB touches 32 MiB of anonymous memory, which swaps half
# of it out; then memory.max is lifted and the task touches it all again: the swap-ins of that
# second pass need no reclaim, so every I/O sleep of the task is a swap-in's. Oracles: delay
# accounting of that task over the second pass (guest/taskstats.cpp, read before it and while
# the task lingers after it; kernel.task_delayacct on for the scenario where the kernel has
# the sysctl, 5.14+; 5.10 accounts by default) and /proc/vmstat pswpin.
memstall_swapin() { # NAME DISABLE
    vm_begin "$1"
    if vm_have memstall && vm_btf_for "${1##*.}"; then
        if [ ! -e /proc/swaps ]; then
            vm_skip "the kernel has no swap (CONFIG_SWAP off: no /proc/swaps)"
        elif vm_swapdisk; then
            memstall_delayacct_on
            swapon /dev/vda
            echo +memory > /sys/fs/cgroup/cgroup.subtree_control
            mkdir -p $CG
            echo $((16 << 20)) > $CG/memory.max
            vm_held toucher anon_toucher --mb 32 --passes 2 --cgroup $CG --hold "$RUN/second" \
                --linger
            vm_meta toucher_pid "$VM_PID"
            vm_release toucher
            memstall_wait_for toucher "first pass done"
            echo max > $CG/memory.max
            # The toucher's switches and wake-ups in the second pass.
            memstall_ftrace_on memlat_swapin "$VM_PID"
            # memstall watches the second pass only: the first one swaps in too (pages of
            # the toucher's stack and data, reclaimed while it filled the cgroup).
            if vm_tool tool MEMLAT_DISABLE_HOOKS="$2" memstall -v -j -p "$VM_PID"; then
                vm_run stats.before taskstats "$VM_PID"
                vm_snap vmstat.before /proc/vmstat
                [ -e $CG/memory.pressure ] && vm_snap pressure.before $CG/memory.pressure
                : > "$RUN/second"
                memstall_wait_for toucher iterations=
                sleep 1
                vm_run stats.after taskstats "$VM_PID"
                vm_snap vmstat.after /proc/vmstat
                [ -e $CG/memory.pressure ] && vm_snap pressure.after $CG/memory.pressure
            fi
            vm_ftrace_keep memlat_swapin ftrace
            vm_snap swaps /proc/swaps
            vm_stop tool
            kill "$VM_PID" 2>/dev/null
            vm_release toucher
            vm_bg_wait toucher 5
            rmdir $CG
            swapoff /dev/vda
            memstall_delayacct_restore
        fi
    fi
    vm_end
}

# thrash.HOOK: refault thrashing, which the host shows on 6.18 only (5.10 waits for the page in
# wait_on_page_bit_common, later kernels in folio_wait_bit_common; 6.12 and 7.3 run the
# multi-gen LRU). The guest has no file system on a disk, so the files are regions of the
# virtio-blk disk /dev/vda, whose page cache is a file's and whose reads complete
# asynchronously (a refault from a ram disk would never sleep). Under a cgroup whose
# memory.max is 32 MiB, a hot reader (in its own child cgroup, alone on CPU 1) maps a 20 MiB
# region and touches it again and again, and a second later a streamer (another child cgroup,
# CPU 0) reads a 128 MiB region: the stream evicts the hot pages, which come back as workingset
# refaults. Oracles: the hot reader's delay accounting (thrashing; guest/taskstats.cpp, before
# its reads and while it lingers after them), its cgroup's memory.pressure "some" total
# (PSI: all of the hot reader's memory stall time, whatever the cause) and ftrace's record of
# its switches with the kernel stack of each switch-out (the time it spent off the CPU under
# a page wait, which bounds THRASH from above).
#
# thrash_stock.HOOK (MODE stock, in the boot with psi=0): the same workload on a stock Debian
# host, delay accounting off too: memstall cannot tell thrashing (nor OTHER) there, and must
# say so instead of counting it as anything else (tests/vm/check_memstall.py).
# Whether the kernel sees the hot pages as workingset when they come back varies from run to
# run (7.3's multi-gen LRU counted 3, 1 and once 0 thrashing waits in CI; the host test
# saw none in 3 of 7 runs): with delay accounting on, up to three rounds. Delay accounting
# counts a thrashing wait only when the task finds the workingset page still being read, and
# the emulated disk mostly finishes first: one 7.3 boot had 0 waits in all three rounds
# (18,526 workingset activations in the last). There the checker judges by vmstat and PSI
# instead (tests/vm/check_memstall.py). Slowing the hot cgroup's reads (io.max, 4 MiB/s)
# was tried and made it worse: 0 waits on 5.10 and 7.3 alike, the hot pages no longer hot.
# Up to five rounds: a CI boot of 7.3 had three in a row with no thrashing wait and too few
# workingset activations for the checker's other oracle (559 in the last, 66 memcg stalls).
memstall_thrash() { # NAME DISABLE [stock]
    VM_ROUNDS=5
    vm_rounds memstall_thrashed memstall_thrash_round "$@"
    unset VM_ROUNDS
}

# False only when the round's taskstats were read and neither oracle of the checker has
# something to judge: delay accounting's thrashing_count did not move, and it is not a
# round the checker judges by vmstat and PSI instead (PSI on, the multi-gen LRU, at least
# _MGLRU_THRASHED = 1000 workingset activations: tests/vm/check_memstall.py). The stock round
# measures nothing of it.
memstall_thrashed() { # NAME DISABLE [stock]
    [ "${3:-}" = stock ] && return 0
    [ -s "$RUN/stats.after.out" ] || return 0
    [ "$(awk '$1 == "thrashing_count" {print $2}' "$RUN/stats.before.out")" != \
        "$(awk '$1 == "thrashing_count" {print $2}' "$RUN/stats.after.out")" ] && return 0
    activated=$(($(awk '$1 == "workingset_activate_file" {print $2}' "$RUN/vmstat.after") - \
        $(awk '$1 == "workingset_activate_file" {print $2}' "$RUN/vmstat.before")))
    lru_gen=$(cat /sys/kernel/mm/lru_gen/enabled 2>/dev/null || echo none)
    [ -e /proc/pressure/memory ] && [ "$lru_gen" != none ] && [ "$lru_gen" != 0x0000 ] &&
        [ "$activated" -ge 1000 ]
}

memstall_thrash_round() { # NAME DISABLE [stock]
    if vm_have memstall && vm_btf_for "${1##*.}"; then
        memstall_psi_meta
        if vm_swapdisk; then
            if [ "${3:-}" = stock ]; then memstall_delayacct_off; else memstall_delayacct_on; fi
            echo +memory > /sys/fs/cgroup/cgroup.subtree_control
            mkdir -p $CG
            echo $((32 << 20)) > $CG/memory.max
            echo +memory > $CG/cgroup.subtree_control
            mkdir -p $CG/hot $CG/stream
            echo 1 > /proc/sys/vm/drop_caches
            vm_held hot taskset 2 file_reader --file /dev/vda --offset-mb 16 --length-mb 20 \
                --mmap --passes 1000 --cgroup $CG/hot --linger
            vm_meta hot_pid "$VM_PID"
            vm_meta lru_gen "$(cat /sys/kernel/mm/lru_gen/enabled 2>/dev/null || echo none)"
            hot=$VM_PID
            vm_held stream taskset 1 file_reader --file /dev/vda --offset-mb 64 --length-mb 128 \
                --passes 3 --cgroup $CG/stream
            # The hot reader's switches, each switch-out with its kernel stack (where it
            # slept), on memstall's clock: the time oracle of its thrashing sleeps. The trigger
            # is set first, so that every switch-out the events record has its stack; a marker
            # says when the streamer starts. Made before memstall starts, so that at each
            # switch ftrace's probe runs first: a program attached before it would run first
            # instead, and its own time (memstall's stack walk at a switch-out, up to ~0.5 ms
            # a sleep in these emulated guests) would fall outside ftrace's sleep (6.1: 172 ms
            # in memstall against 139 ms in ftrace for the same 70 sleeps).
            vm_ftrace memlat_thrash 4096 mono
            echo "stacktrace if prev_pid == $hot" > \
                /sys/kernel/tracing/instances/memlat_thrash/events/sched/sched_switch/trigger
            vm_ftrace_events memlat_thrash "prev_pid == $hot || next_pid == $hot" \
                sched/sched_switch
            if vm_tool tool MEMLAT_DISABLE_HOOKS="$2" memstall -v -j -s -p "$hot"; then
                vm_run stats.before taskstats "$hot"
                vm_snap vmstat.before /proc/vmstat
                [ -e $CG/hot/memory.pressure ] && vm_snap pressure.before $CG/hot/memory.pressure
                memstall_clocks clocks.before
                vm_release hot
                sleep 1
                echo "memlat: stream" > /sys/kernel/tracing/instances/memlat_thrash/trace_marker
                vm_release stream
                memstall_wait_for hot iterations=
                sleep 1
                vm_run stats.after taskstats "$hot"
                vm_snap vmstat.after /proc/vmstat
                [ -e $CG/hot/memory.pressure ] && vm_snap pressure.after $CG/hot/memory.pressure
                memstall_clocks clocks.after
            fi
            echo "!stacktrace if prev_pid == $hot" > \
                /sys/kernel/tracing/instances/memlat_thrash/events/sched/sched_switch/trigger
            vm_ftrace_keep memlat_thrash ftrace
            vm_stop tool
            kill "$hot" 2>/dev/null
            vm_release hot
            vm_release stream
            vm_bg_wait hot 5
            vm_bg_wait stream 60
            rmdir $CG/hot $CG/stream $CG
            memstall_delayacct_restore
        fi
    fi
}

# compact.HOOK: direct compaction. compact_fragmenter (as compactsnoop's direct scenario) pins
# a checkerboard over half of the available memory, then faults THP_PCT % of it as huge pages
# with THP defrag=always, so that its page faults compact directly; it lingers after that so
# that its delay accounting (taskstats "compact", Linux 5.17+) can be read.
memstall_compact() { # NAME DISABLE
    vm_begin "$1"
    if vm_have memstall && vm_btf_for "${1##*.}" && vm_thp_always; then
        memstall_delayacct_on
        memstall_windows_prepare memlat_compact
        avail=$(awk '/MemAvailable/ {print int($2 / 1024)}' /proc/meminfo)
        vm_held frag compact_fragmenter --mib $((avail * 50 / 100)) --thp-mib $((avail * 55 / 100))
        vm_meta frag_pid "$VM_PID"
        memstall_lingering frag "^pid=" "$2" memlat_compact \
            "compaction/mm_compaction_begin compaction/mm_compaction_end"
        vm_thp_restore
        memstall_delayacct_restore
    fi
    vm_end
}

# direct: global direct reclaim, as drsnoop's direct scenario makes it (reclaim_hog: bound
# to node 0, on CPU 0 where kswapd0 must run and is SCHED_IDLE meanwhile, touching more than
# node 0 has once the ram disk's page cache filled it: vm_hog_sizes); it lingers after that
# so that its delay accounting ("freepages") can be read. On one CPU, so delay accounting's
# per-CPU clock is one clock here.
memstall_direct() { # NAME DISABLE
    vm_begin "$1"
    if vm_have memstall && vm_btf_for "${1##*.}" && vm_ramdisk; then
        memstall_delayacct_on
        echo 1 > /proc/sys/vm/drop_caches
        memstall_windows_prepare memlat_direct
        vm_hog_sizes
        vm_held hog reclaim_hog --node 0 --cpu 0 --fill /dev/ram0 \
            --fill-mb "$VM_HOG_FILL_MB" --mb "$VM_HOG_MB" --linger
        vm_meta hog_pid "$VM_PID"
        memstall_lingering hog iterations= "$2" memlat_direct \
            "vmscan/mm_vmscan_direct_reclaim_begin vmscan/mm_vmscan_direct_reclaim_end"
        memstall_delayacct_restore
    fi
    vm_end
}

# In a boot without PSI (vm.K.psi0) only the causes that PSI changes run again, on the first
# hook path: swap-ins (a workingset swap-in is an I/O wait then, not a memstall), thrashing
# and memory.high. The tracepoint windows and dirty pauses read nothing of PSI, and the raw_tp
# variants the same task fields (through probe reads either way): the psi=1 boot runs them.
if [ -e /proc/pressure/memory ]; then
    memstall_direct memstall.direct.tp_btf ""
    memstall_compact memstall.compact.tp_btf ""
    memstall_swapin memstall.swapin.tp_btf ""
    memstall_swapin memstall.swapin.raw_tp tp_btf
    memstall_thrash memstall.thrash.tp_btf ""
    memstall_thrash memstall.thrash.raw_tp tp_btf
    memstall_high memstall.high.tp_btf ""
    memstall_high memstall.high.raw_tp tp_btf
    memstall_dirty memstall.dirty.tp_btf raw_tp
    memstall_dirty memstall.dirty.raw_tp tp_btf
else
    memstall_swapin memstall.swapin.tp_btf ""
    memstall_thrash memstall.thrash.tp_btf ""
    memstall_thrash memstall.thrash_stock.tp_btf "" stock
    memstall_high memstall.high.tp_btf ""
fi

vm_choices memstall "" "-C"
