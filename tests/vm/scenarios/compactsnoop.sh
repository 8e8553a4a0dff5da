# compactsnoop on the guest kernel. Checked by tests/vm/check_compactsnoop.py.
#
# manual.HOOK: the runtime tests' main scenario, once per hook path of
# compaction:mm_compaction_begin/end. compact_fragmenter pins a checkerboard of pages over
# FRAG_PCT % of the guest's available memory; then a shell whose PID is known before it runs
# (vm_held) writes 1 to /proc/sys/vm/compact_memory, which compacts every populated zone of
# both nodes in that shell's context. compactsnoop -p WRITER must report the same runs,
# statuses and migrated pages as an ftrace instance filtered to the writer (exact); the
# zones are compared with /proc/zoneinfo, the migrated pages also with /proc/vmstat.
# direct.HOOK: after fragmenting, the fragmenter (held, so its PID is known) faults THP_PCT %
# of the available memory as MADV_HUGEPAGE with THP defrag=always, so that THP faults find no
# free 2 MiB block and compact directly; compared with an ftrace instance filtered to the
# fragmenter (runs, statuses, entries: exact) and with /proc/vmstat compact_stall over a
# window inside the tool's.

FRAG_PCT=50
THP_PCT=55
INST=memlat_compactsnoop
MANUAL_EVENTS="compaction/mm_compaction_end compaction/mm_compaction_migratepages"
DIRECT_EVENTS="$MANUAL_EVENTS compaction/mm_compaction_try_to_compact_pages"

avail_mb() { awk '/MemAvailable/ {print int($2 / 1024)}' /proc/meminfo; }

# Starts compact_fragmenter (label frag) and waits for its report line; it then holds its
# checkerboard until frag_stop.
frag_start() { # ARGS...
    vm_bg frag compact_fragmenter "$@"
    n=0
    while ! grep -q "^pid=" "$RUN/frag.out" 2>/dev/null; do
        if ! kill -0 "$(cat "$RUN/frag.pid")" 2>/dev/null || [ $n -ge 900 ]; then
            return 1
        fi
        usleep 100000
        n=$((n + 1))
    done
}

frag_stop() {
    kill "$(cat "$RUN/frag.pid")" 2>/dev/null
    vm_bg_wait frag 10
}

PROACTIVE=/proc/sys/vm/compaction_proactiveness

compactsnoop_manual() { # NAME DISABLE
    vm_begin "$1"
    if vm_have compactsnoop && vm_btf_for "${1##*.}"; then
        # The oracle counts every page migrated in the window (pgmigrate_success): kcompactd's
        # proactive compaction (Linux 5.9+, every 500 ms once the fragmenter has raised the
        # fragmentation score) must not migrate pages beside the writer. Seen on 6.12: 1307
        # pages by kcompactd in the window.
        proactive_old=""
        if [ -f $PROACTIVE ]; then
            proactive_old=$(cat $PROACTIVE)
            echo 0 > $PROACTIVE
        fi
        frag_mb=$(($(avail_mb) * FRAG_PCT / 100))
        vm_meta frag_mb "$frag_mb"
        if frag_start --mib "$frag_mb"; then
            vm_held writer sh -c "echo 1 > /proc/sys/vm/compact_memory"
            vm_meta writer_pid "$VM_PID"
            vm_ftrace $INST 4096
            # shellcheck disable=SC2086
            vm_ftrace_events $INST "common_pid == $VM_PID" $MANUAL_EVENTS
            if vm_tool tool MEMLAT_DISABLE_HOOKS="$2" compactsnoop -v -j -e -p "$VM_PID"; then
                vm_snap vmstat.before /proc/vmstat
                vm_meta write_start "$(vm_now)"
                vm_release writer
                vm_bg_wait writer
                vm_meta write_end "$(vm_now)"
                vm_snap vmstat.after /proc/vmstat
                vm_snap zoneinfo /proc/zoneinfo
                vm_snap boost_factor /proc/sys/vm/watermark_boost_factor
                vm_snap pagetypeinfo /proc/pagetypeinfo
                usleep 300000
            fi
            vm_stop tool
            vm_release writer
            vm_bg_wait writer 30
            vm_ftrace_keep $INST ftrace
        fi
        frag_stop
        [ -n "$proactive_old" ] && echo "$proactive_old" > $PROACTIVE
    fi
    vm_end
}

compactsnoop_manual compactsnoop.manual.tp_btf ""
compactsnoop_manual compactsnoop.manual.raw_tp tp_btf
compactsnoop_manual compactsnoop.manual.tracepoint tp_btf,raw_tp

# THP is off by default on this guest: Linux 6.1 leaves enabled and defrag at "never" when
# the machine has less than 512 MiB (hugepage_init()); the scenario turns it on and back off.
compactsnoop_direct() { # NAME DISABLE
    vm_begin "$1"
    if vm_have compactsnoop && vm_btf_for "${1##*.}" && vm_thp_always; then
        vm_meta old_defrag "$VM_THP_DEFRAG"
        vm_meta old_enabled "$VM_THP_ENABLED"
        avail=$(avail_mb)
        vm_meta frag_mb $((avail * FRAG_PCT / 100))
        vm_meta thp_mb $((avail * THP_PCT / 100))
        vm_held frag compact_fragmenter --mib $((avail * FRAG_PCT / 100)) \
            --thp-mib $((avail * THP_PCT / 100)) --linger 0
        vm_meta frag_pid "$VM_PID"
        vm_ftrace $INST 4096
        # shellcheck disable=SC2086
        vm_ftrace_events $INST "common_pid == $VM_PID" $DIRECT_EVENTS
        vm_snap buddyinfo.before /proc/buddyinfo
        if vm_tool tool MEMLAT_DISABLE_HOOKS="$2" compactsnoop -v -j -k direct; then
            vm_snap vmstat.before /proc/vmstat
            vm_release frag
            vm_bg_wait frag
            vm_snap vmstat.after /proc/vmstat
            usleep 300000
        fi
        vm_stop tool
        vm_snap buddyinfo.after /proc/buddyinfo
        vm_release frag
        vm_bg_wait frag
        vm_ftrace_keep $INST ftrace
        vm_thp_restore
    fi
    vm_end
}

compactsnoop_direct compactsnoop.direct.tp_btf ""
compactsnoop_direct compactsnoop.direct.raw_tp tp_btf
compactsnoop_direct compactsnoop.direct.tracepoint tp_btf,raw_tp

vm_choices compactsnoop "" "-H"
