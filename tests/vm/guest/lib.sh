# Helpers of the guest's scenario scripts (busybox sh). A scenario script
# (tests/vm/scenarios/TOOL.sh) runs in a subshell of /init with these functions:
#
#   vm_begin NAME            start scenario NAME (TOOL.SCENARIO[.HOOKPATH]: one reported line)
#   vm_meta KEY VALUE        a fact for the host's checker (e.g. the workload's pid)
#   vm_skip REASON           the guest cannot run this scenario (reported as skipped)
#   vm_btf_for HOOKPATH      false (and a skip) when HOOKPATH needs the hidden kernel BTF
#   vm_tool LABEL [VAR=VALUE ...] PROG ARGS...
#                            start a tool with MEMLAT_READY=1 and wait for "memlat: ready"
#                            (READY_TIMEOUT s); stdout/stderr/exit status go back as LABEL.*
#   vm_stop LABEL            SIGINT the tool, wait for its exit (STOP_TIMEOUT s, then SIGKILL)
#   vm_wait LABEL [SECONDS]  let the tool end by itself (-d, interval count)
#   vm_run LABEL [VAR=VALUE ...] PROG ARGS...
#                            run a command to its end (RUN_TIMEOUT s), keeping LABEL.*
#   vm_bg LABEL PROG ARGS... / vm_bg_wait LABEL [SECONDS]   the same, in the background
#   vm_held LABEL PROG ARGS... / vm_release LABEL
#                            start a command held at the door: its PID ($VM_PID, LABEL.pid)
#                            exists for a tool's -p or a filter; it exec()s on release
#   vm_watch LABEL [VAR=VALUE ...] PROG ARGS...
#                            the tool (vm_tool tool) watching held command LABEL run to its end
#   vm_ftrace INSTANCE KB [CLOCK] / vm_ftrace_events INSTANCE FILTER SYSTEM/EVENT...
#   / vm_ftrace_keep INSTANCE LABEL
#                            an ftrace instance of the scenario's (an oracle), its events, and
#                            its trace sent back as LABEL
#   vm_thp_always / vm_thp_restore
#                            THP faults that compact directly (false, with a skip, without THP)
#   vm_ramdisk               /dev/ram0 and ram1 (brd, 1 GiB each, sparse: reading it makes clean page
#                            cache without using memory for the data; there is no disk)
#   vm_swapdisk              /dev/vda made a swap area (virtio-blk, a sparse file on the host:
#                            a real block device whose reads complete asynchronously); false,
#                            with meta swapdisk saying why, when it did not appear
#   vm_snap LABEL FILE       copy FILE now (e.g. /proc/vmstat); sent back as LABEL
#   vm_end                   send everything of the scenario back to the host
#
# Nothing is judged in the guest: the host's checker (tests/vm/check_TOOL.py) parses the
# blocks and compares. Everything is kept in /tmp/run and only sent at vm_end, so that the
# slow emulated serial port does not run during a measurement.
#
# Wire format on $RESULTS (init sets it: /dev/ttyS1 on x86, /dev/hvc0 on arm64; a file on the
# host), one scenario per block:
#   @@vm begin NAME | @@vm meta KEY VALUE | @@vm skip REASON | @@vm file LABEL ... @@vm endfile
#   | @@vm end NAME; finally @@vm done. Global facts: @@vm gmeta KEY VALUE.

READY_TIMEOUT=${READY_TIMEOUT:-60}
STOP_TIMEOUT=${STOP_TIMEOUT:-30}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
RESULTS=${RESULTS:-/dev/ttyS1}
RUN=/tmp/run
VM_SCENARIO=""

vm_open_results() {
    stty -F "$RESULTS" raw -echo 2>/dev/null
    exec 3>"$RESULTS"
}

vm_emit() { echo "$*" >&3; }

vm_meta_global() { vm_emit "@@vm gmeta $1 $2"; }

vm_now() { cut -d' ' -f1 /proc/uptime; }

vm_begin() {
    VM_SCENARIO=$1
    rm -rf "$RUN"
    mkdir -p "$RUN"
    : > "$RUN/.meta"
    echo "memlat-vm: scenario $1" > /dev/console
    vm_meta started "$(vm_now)"
}

vm_meta() { echo "$1 $2" >> "$RUN/.meta"; }

vm_skip() { echo "$*" > "$RUN/.skip"; }

vm_snap() { cat "$2" > "$RUN/$1" 2>&1; }

# Splits leading VAR=VALUE words off into $VM_ENV; the rest is the command.
_vm_split_env() {
    VM_ENV=""
    VM_CMD_SHIFT=0
    for word in "$@"; do
        case "$word" in
        *=*) VM_ENV="$VM_ENV $word"; VM_CMD_SHIFT=$((VM_CMD_SHIFT + 1)) ;;
        *) break ;;
        esac
    done
}

vm_tool() {
    label=$1
    shift
    _vm_split_env "$@"
    shift $VM_CMD_SHIFT
    echo "$VM_ENV $*" > "$RUN/$label.argv"
    start=$(vm_now)
    # shellcheck disable=SC2086
    env MEMLAT_READY=1 $VM_ENV "$@" > "$RUN/$label.out" 2> "$RUN/$label.err" < /dev/null &
    pid=$!
    echo "$pid" > "$RUN/$label.pid"
    waited=0
    while ! grep -q "^memlat: ready" "$RUN/$label.err" 2>/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid"
            echo "$?" > "$RUN/$label.rc"
            echo "exited before it was ready" > "$RUN/$label.ready"
            return 1
        fi
        if [ "$waited" -ge $((READY_TIMEOUT * 10)) ]; then
            kill -9 "$pid" 2>/dev/null
            wait "$pid"
            echo "killed" > "$RUN/$label.rc"
            echo "not ready within $READY_TIMEOUT s" > "$RUN/$label.ready"
            return 1
        fi
        usleep 100000
        waited=$((waited + 1))
    done
    echo "ready after $(awk -v a="$start" -v b="$(vm_now)" 'BEGIN {print b - a}') s" \
        > "$RUN/$label.ready"
    return 0
}

_vm_reap() {
    label=$1
    limit=$2
    pid=$(cat "$RUN/$label.pid" 2>/dev/null) || return 0
    [ -f "$RUN/$label.rc" ] && return 0
    waited=0
    while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt $((limit * 10)) ]; do
        usleep 100000
        waited=$((waited + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -9 "$pid" 2>/dev/null
        wait "$pid"
        echo "killed" > "$RUN/$label.rc"
        return 1
    fi
    wait "$pid"
    echo "$?" > "$RUN/$label.rc"
}

vm_stop() {
    pid=$(cat "$RUN/$1.pid" 2>/dev/null) || return 0
    [ -f "$RUN/$1.rc" ] && return 0
    kill -INT "$pid" 2>/dev/null
    _vm_reap "$1" "$STOP_TIMEOUT"
}

vm_wait() { _vm_reap "$1" "${2:-$STOP_TIMEOUT}"; }

vm_run() {
    label=$1
    shift
    _vm_split_env "$@"
    shift $VM_CMD_SHIFT
    echo "$VM_ENV $*" > "$RUN/$label.argv"
    # shellcheck disable=SC2086
    timeout -s KILL "$RUN_TIMEOUT" env $VM_ENV "$@" > "$RUN/$label.out" 2> "$RUN/$label.err" \
        < /dev/null
    echo "$?" > "$RUN/$label.rc"
}

vm_bg() {
    label=$1
    shift
    echo "$*" > "$RUN/$label.argv"
    "$@" > "$RUN/$label.out" 2> "$RUN/$label.err" < /dev/null &
    echo "$!" > "$RUN/$label.pid"
}

vm_held() {
    label=$1
    shift
    echo "$*" > "$RUN/$label.argv"
    (
        while [ ! -e "$RUN/$label.go" ]; do usleep 20000; done
        exec "$@"
    ) > "$RUN/$label.out" 2> "$RUN/$label.err" < /dev/null &
    VM_PID=$!
    echo "$VM_PID" > "$RUN/$label.pid"
}

vm_release() { : > "$RUN/$1.go"; }

# The tool (label tool, started with ARGS) watching the held command LABEL from its release,
# once the tool is ready, to its end, and a second more; then the tool is stopped and LABEL
# reaped (killed after 5 s when it was never released: the tool was not ready).
vm_watch() { # LABEL [VAR=VALUE ...] PROG ARGS...
    watched=$1
    shift
    if vm_tool tool "$@"; then
        vm_release "$watched"
        vm_bg_wait "$watched"
        sleep 1
    fi
    vm_stop tool
    vm_bg_wait "$watched" 5
}

# An ftrace instance of the scenario's own, an oracle to compare a tool with: vm_ftrace makes
# it, with KB of buffer a CPU and the trace clock CLOCK (e.g. mono, CLOCK_MONOTONIC as the
# tools' timestamps; else ftrace's local clock); vm_ftrace_events traces each SYSTEM/EVENT
# there through FILTER (e.g. "common_pid == $VM_PID"); vm_ftrace_keep stops them, keeps the
# trace as LABEL and removes the instance.
vm_ftrace() { # INSTANCE KB [CLOCK]
    inst=/sys/kernel/tracing/instances/$1
    mkdir -p "$inst"
    echo "$2" > "$inst/buffer_size_kb"
    if [ -n "$3" ]; then echo "$3" > "$inst/trace_clock"; fi
}

vm_ftrace_events() { # INSTANCE FILTER SYSTEM/EVENT...
    inst=/sys/kernel/tracing/instances/$1
    filter=$2
    shift 2
    for event in "$@"; do
        echo "$filter" > "$inst/events/$event/filter"
        echo 1 > "$inst/events/$event/enable"
    done
}

vm_ftrace_keep() { # INSTANCE LABEL
    inst=/sys/kernel/tracing/instances/$1
    echo 0 > "$inst/events/enable"
    cat "$inst/trace" > "$RUN/$2"
    rmdir "$inst"
}

# Transparent huge pages with defrag=always, so that a THP fault that finds no free huge page
# compacts directly, and enabled for MADV_HUGEPAGE at least; false, with a skip, when the
# kernel has none. vm_thp_restore puts back the settings it found ($VM_THP_DEFRAG,
# $VM_THP_ENABLED).
VM_THP=/sys/kernel/mm/transparent_hugepage
vm_thp_always() {
    if [ ! -f $VM_THP/defrag ]; then
        vm_skip "no transparent huge pages in the guest kernel ($VM_THP/defrag)"
        return 1
    fi
    VM_THP_DEFRAG=$(sed 's/.*\[\(.*\)\].*/\1/' $VM_THP/defrag)
    VM_THP_ENABLED=$(sed 's/.*\[\(.*\)\].*/\1/' $VM_THP/enabled)
    echo always > $VM_THP/defrag
    if [ "$VM_THP_ENABLED" = never ]; then echo madvise > $VM_THP/enabled; fi
    return 0
}

vm_thp_restore() {
    echo "$VM_THP_DEFRAG" > $VM_THP/defrag
    echo "$VM_THP_ENABLED" > $VM_THP/enabled
}

vm_ramdisk() {
    [ -b /dev/ram0 ] && return 0
    insmod /modules/brd.ko rd_nr=2 rd_size=1048576 max_part=0 || return 1
    n=0
    while [ ! -b /dev/ram0 ] && [ $n -lt 50 ]; do usleep 100000; n=$((n + 1)); done
    [ -b /dev/ram0 ]
}

vm_swapdisk() {
    if [ ! -b /dev/vda ]; then
        while read -r m; do
            # A module already loaded (by init, or an earlier scenario) refuses a second insmod.
            insmod "/modules/$m.ko" 2>/dev/null
        done < /modules/disk.list
        n=0
        while [ ! -b /dev/vda ] && [ $n -lt 50 ]; do usleep 100000; n=$((n + 1)); done
    fi
    if [ ! -b /dev/vda ]; then
        vm_meta swapdisk "missing: no /dev/vda after loading $(tr '\n' ' ' < /modules/disk.list)"
        return 1
    fi
    if ! mkswap /dev/vda > "$RUN/mkswap.out" 2>&1; then
        vm_meta swapdisk "mkswap /dev/vda failed"
        return 1
    fi
    vm_meta swapdisk ok
}

vm_bg_wait() { _vm_reap "$1" "${2:-$RUN_TIMEOUT}"; }

vm_end() {
    vm_meta ended "$(vm_now)"
    vm_emit "@@vm begin $VM_SCENARIO"
    while read -r key value; do
        vm_emit "@@vm meta $key $value"
    done < "$RUN/.meta"
    [ -f "$RUN/.skip" ] && vm_emit "@@vm skip $(cat "$RUN/.skip")"
    # One awk for all the files that have content: a process started per file (this loop
    # used five) costs milliseconds each in the emulated guest, about 0.5 s a scenario.
    # awk ends every line it prints, so a file without a final newline cannot swallow the
    # end marker.
    set --
    for f in "$RUN"/*; do
        [ -f "$f" ] || continue
        if [ -s "$f" ]; then
            set -- "$@" "$f"
        else
            vm_emit "@@vm file ${f##*/}"
            vm_emit "@@vm endfile ${f##*/}"
        fi
    done
    [ $# -gt 0 ] && awk 'FNR == 1 {
            if (name != "") print "@@vm endfile " name
            name = FILENAME
            sub(/.*\//, "", name)
            print "@@vm file " name
        }
        { print }
        END { if (name != "") print "@@vm endfile " name }' "$@" >&3
    vm_emit "@@vm end $VM_SCENARIO"
    VM_SCENARIO=""
}

# A scenario whose workload may give nothing to measure in a run (a writer the ram disk's
# writeback kept up with, refaults that did not come back as workingset, an allocator that
# kswapd kept ahead of): BODY NAME ARGS... runs in a fresh block up to three times while
# MEASURED NAME ARGS... (reading $RUN) says the round had nothing; a round that failed before
# its workload ran is judged, not repeated (MEASURED returns true then). The checker logs the
# round (meta round). Only the last round is reported: a check that failed in a round with
# something to measure is never repeated away.
vm_rounds() { # MEASURED BODY NAME ARGS...   (VM_ROUNDS: at most this many, default 3)
    measured=$1
    body=$2
    shift 2
    round=1
    while :; do
        vm_begin "$1"
        vm_meta round "$round"
        "$body" "$@"
        if [ $round -lt "${VM_ROUNDS:-3}" ] && ! "$measured" "$@"; then
            round=$((round + 1))
            continue
        fi
        break
    done
    vm_end
}

# reclaim_hog's sizes on node 0 (guest/reclaim_hog.cpp), in VM_HOG_FILL_MB and VM_HOG_MB, as
# meta fill_mb and hog_mb: it fills 3/4 of what the node has free with the ram disk's page
# cache, then touches 7/10 of it, more than is left, so that its allocations reclaim. 7/10:
# with 9/10 the OOM killer took the SCHED_FIFO hog in 2 of 3 runs on 5.10 (too little
# reclaimable cache above the watermarks once the hog's own pages counted); 8/10 held until
# the hog stopped being SCHED_FIFO (whose allocations may dip below the min watermark) and
# kswapd stopped helping: CI then killed it once on 5.10 with 136 of 136 MiB touched.
vm_hog_sizes() {
    node_free_mb=$(awk '/MemFree/ {print int($4 / 1024)}' \
        /sys/devices/system/node/node0/meminfo)
    VM_HOG_FILL_MB=$((node_free_mb * 3 / 4))
    VM_HOG_MB=$((node_free_mb * 7 / 10))
    vm_meta fill_mb "$VM_HOG_FILL_MB"
    vm_meta hog_mb "$VM_HOG_MB"
}

vm_done() { vm_emit "@@vm done"; }

# Whether this boot runs the scenario's hook path (HOOKPATH: the scenario name's last part,
# e.g. "tp_btf+fentry"), else a skip that says where it runs:
# - tp_btf and fentry programs name their target by its BTF id in the running kernel, which a
#   tool finds only in /sys/kernel/btf/vmlinux (BTF embedded in the tool serves CO-RE, not
#   attach targets): under --hide-btf (MEMLAT_VM_NO_BTF=1) they cannot run, and the other
#   paths show what the tools do without it;
# - the paths that need no kernel BTF (raw_tp, tracepoint, kprobe) run in the --hide-btf boot
#   of a kernel that has one, with the BTF the tools embed: its BTF boot
#   (--btf-paths-only, MEMLAT_VM_BTF_PATHS_ONLY=1) skips them rather than run them twice.
# A scenario of no particular path (e.g. "default", "choices") runs in every boot.
vm_btf_for() { # HOOKPATH
    case "$1" in
    *tp_btf* | *fentry*)
        [ "${MEMLAT_VM_NO_BTF:-0}" = 1 ] || return 0
        vm_skip "no kernel BTF: $1 needs it (--hide-btf)"
        ;;
    *raw_tp* | *tracepoint* | *kprobe*)
        [ "${MEMLAT_VM_BTF_PATHS_ONLY:-0}" = 1 ] || return 0
        vm_skip "$VARIANT_ELSEWHERE: $1 needs no kernel BTF (--btf-paths-only)"
        ;;
    *) return 0 ;;
    esac
    return 1
}
VARIANT_ELSEWHERE="run in the boot without kernel BTF"

# The tool's binary, or a skip when it is not in the initramfs (not built yet).
vm_have() {
    if [ -x "/memlat/$1" ]; then
        return 0
    fi
    vm_skip "/memlat/$1 is not in the initramfs (the tool was not built)"
    return 1
}

# TOOL.choices: the tool started with nothing forced (no MEMLAT_DISABLE_*), once per option
# set given as one quoted argument each, -v, for two seconds: what it chooses on this kernel
# by itself. tests/vm/support_table.py builds README's support table from these runs.
vm_choices() { # TOOL "ARGS" ["ARGS" ...]
    tool=$1
    shift
    vm_begin "$tool.choices"
    if vm_have "$tool"; then
        n=0
        for args in "$@"; do
            n=$((n + 1))
            vm_meta "args$n" "$args"
            # shellcheck disable=SC2086
            vm_tool "run$n" "$tool" -v $args && sleep 2
            vm_stop "run$n"
        done
    fi
    vm_end
}
