# memlat top's screen on the guest kernel (cgroup v2), in a real terminal: a tmux pane, driven
# by send-keys and read by capture-pane as on the host (tests/runtime/test_top.py). tmux comes
# with its libraries, the terminfo entry of its panes and the C.UTF-8 locale: the machine's in
# amd64 guests, Debian's of the guest's suite in arm64 ones (run_vm_tests.py add_tmux).
# Checked by tests/vm/check_top.py.
#
# top.screen: a toucher over its memory.high in a cgroup of its own stalls in the kernel's
# high throttling; `memlat top 1` in a 200x40 pane draws that cgroup as the first row, Enter
# opens it into its processes (the toucher's pid among them), q exits with status 0 and gives
# the terminal back. The screens are kept for the checker.

TOP_CG=/sys/fs/cgroup/memlat_top
# TERM: the guest console's "linux" has no terminfo entry in the guest; "screen" has.
TMUX_CMD="env TERM=screen tmux -S /tmp/memlat-tmux.sock -f /dev/null"

# Waits up to $2 seconds for the pane to show the text $1 (grep -E); keeps the screen in $3.
top_wait_screen() {
    waited=0
    while [ "$waited" -lt $(($2 * 10)) ]; do
        $TMUX_CMD capture-pane -p -t top > "$RUN/$3" 2>/dev/null
        grep -qE "$1" "$RUN/$3" && return 0
        usleep 100000
        waited=$((waited + 1))
    done
    return 1
}

top_screen() {
    vm_begin top.screen
    if ! command -v tmux > /dev/null 2>&1; then
        vm_skip "no tmux in this guest (run_vm_tests.py add_tmux said why)"
    elif vm_have memlat; then
        mkdir -p /dev/pts
        mount -t devpts devpts /dev/pts 2> /dev/null
        echo +memory > /sys/fs/cgroup/cgroup.subtree_control
        mkdir -p $TOP_CG
        echo $((16 << 20)) > $TOP_CG/memory.high
        vm_held toucher anon_toucher --mb 18 --passes 1000000 --cgroup $TOP_CG
        vm_meta toucher_pid "$VM_PID"
        $TMUX_CMD new-session -d -s top -x 200 -y 40 \
            "env TERM=screen MEMLAT_READY=1 memlat top 1 2> $RUN/top.err; echo \$? > $RUN/top.rc; sleep 30"
        waited=0
        while ! grep -q "^memlat: ready" "$RUN/top.err" 2> /dev/null && [ "$waited" -lt 300 ]; do
            usleep 100000
            waited=$((waited + 1))
        done
        vm_release toucher
        # The table's first row (the line after the CGROUP heading) is the toucher's cgroup.
        if top_wait_screen "^/memlat_top " 20 screen.table; then
            $TMUX_CMD send-keys -t top Home Enter
            top_wait_screen "^Processes of /memlat_top" 10 screen.processes
        fi
        $TMUX_CMD send-keys -t top q
        waited=0
        while [ ! -s "$RUN/top.rc" ] && [ "$waited" -lt 100 ]; do
            usleep 100000
            waited=$((waited + 1))
        done
        usleep 300000
        $TMUX_CMD capture-pane -p -t top > "$RUN/screen.after" 2> /dev/null
        $TMUX_CMD kill-server 2> /dev/null
        kill "$(cat "$RUN/toucher.pid")" 2> /dev/null
        vm_bg_wait toucher 5
        rmdir $TOP_CG
    fi
    vm_end
}

top_screen
