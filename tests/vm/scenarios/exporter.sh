# memlat exporter on the guest kernel: every tool's counting side in one process. Checked by
# tests/vm/check_exporter.py.
#
# exporter.all: `memlat exporter -v --bpf-stats` with every tool, scraped once over the loopback
# interface (busybox wget): each tool this kernel can run must be up, and one it cannot
# (tlbflush on arm64) down with its reason, the others serving; its own cost exported.

exporter_all() {
    vm_begin exporter.all
    if vm_have memlat; then
        vm_meta arch "$(uname -m)"
        ifconfig lo 127.0.0.1 up
        if vm_tool tool memlat exporter -v --bpf-stats --web.listen-address 127.0.0.1:9845; then
            wget -q -O "$RUN/metrics" http://127.0.0.1:9845/metrics
            echo "$?" > "$RUN/wget.rc"
        fi
        vm_stop tool
    fi
    vm_end
}

exporter_all
