# The names memlat gives cgroups (docs/names.md) on the guest kernel's cgroup v2, which the
# host (cgroup v1) cannot show. Checked by tests/vm/check_names.py.
#
# names.k8s_v2: a Kubernetes container's cgroup in the kubelet's systemd-driver names
# (kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice/
# cri-containerd-<id>.scope), made for real with the memory controller enabled down to it, and
# its containerd bundle (config.json with the CRI plugin's annotations) in a scratch root given
# as MEMLAT_HOST_ROOT. A toucher over the container's memory.high (16 MiB, 18 MiB touched, no
# swap) stalls in the high throttle. memstall -C and memlat top -j -a name its row
# shop/checkout-7d9f/web; memstall -G shop/checkout-7d9f/web selects the toucher alone.
#
# names.brief_v2: a container that comes and goes while memstall -C runs: its bundle, then its
# cgroup, a toucher over its memory.high run to its end, then the cgroup and the bundle removed,
# all before memstall prints. Its row still has its path and names (memstall reads them as the
# cgroup is made: tracepoint cgroup:cgroup_mkdir, on the default hierarchy's id 0).

NAMES_UID=3f2a9c1e-7b6d-4c2a-9e1f-0123456789ab
NAMES_ID=4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e
NAMES_ROOT=/tmp/memlat-names-root

names_k8s_v2() {
    vm_begin names.k8s_v2
    if vm_have memstall && vm_have memlat; then
        slice=/sys/fs/cgroup/kubepods.slice
        dirs="$slice $slice/kubepods-burstable.slice"
        pod="$slice/kubepods-burstable.slice/kubepods-burstable-pod$(echo $NAMES_UID | tr - _).slice"
        dirs="$dirs $pod"
        echo +memory > /sys/fs/cgroup/cgroup.subtree_control
        for d in $dirs; do
            mkdir -p "$d"
            echo +memory > "$d/cgroup.subtree_control"
        done
        cg="$pod/cri-containerd-$NAMES_ID.scope"
        mkdir -p "$cg"
        echo $((16 << 20)) > "$cg/memory.high"
        bundle=$NAMES_ROOT/run/containerd/io.containerd.runtime.v2.task/k8s.io/$NAMES_ID
        mkdir -p $bundle
        printf '%s' '{"ociVersion": "1.1.0", "annotations": {' \
            '"io.kubernetes.cri.container-type": "container",' \
            '"io.kubernetes.cri.container-name": "web",' \
            '"io.kubernetes.cri.sandbox-name": "checkout-7d9f",' \
            '"io.kubernetes.cri.sandbox-namespace": "shop",' \
            "\"io.kubernetes.cri.sandbox-uid\": \"$NAMES_UID\"}}" > $bundle/config.json
        vm_meta cgroup "${cg#/sys/fs/cgroup}"
        vm_held toucher anon_toucher --mb 18 --cgroup "$cg"
        vm_meta toucher_pid "$VM_PID"
        if vm_tool per_cgroup MEMLAT_HOST_ROOT=$NAMES_ROOT memstall -j -C -v &&
            vm_tool by_name MEMLAT_HOST_ROOT=$NAMES_ROOT memstall -j -G shop/checkout-7d9f/web &&
            vm_tool top MEMLAT_HOST_ROOT=$NAMES_ROOT memlat top -j -a --rows 1000 1; then
            vm_release toucher
            vm_bg_wait toucher
            sleep 1
        fi
        vm_stop per_cgroup
        vm_stop by_name
        vm_stop top
        vm_bg_wait toucher 5
        rmdir "$cg" $(echo $dirs | tr ' ' '\n' | sort -r) 2> /dev/null
        rm -rf $NAMES_ROOT
    fi
    vm_end
}

names_brief_v2() {
    vm_begin names.brief_v2
    if vm_have memstall; then
        echo +memory > /sys/fs/cgroup/cgroup.subtree_control
        id=9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0
        bundle=$NAMES_ROOT/run/containerd/io.containerd.runtime.v2.task/k8s.io/$id
        cg=/sys/fs/cgroup/cri-containerd-$id.scope
        vm_meta cgroup "${cg#/sys/fs/cgroup}"
        if vm_tool brief MEMLAT_HOST_ROOT=$NAMES_ROOT memstall -j -C -v; then
            mkdir -p $bundle
            printf '%s' '{"annotations": {"io.kubernetes.cri.container-type": "container",' \
                '"io.kubernetes.cri.container-name": "job",' \
                '"io.kubernetes.cri.sandbox-name": "batch-1",' \
                '"io.kubernetes.cri.sandbox-namespace": "jobs",' \
                "\"io.kubernetes.cri.sandbox-uid\": \"$NAMES_UID\"}}" > $bundle/config.json
            mkdir "$cg"
            echo $((16 << 20)) > "$cg/memory.high"
            vm_run toucher anon_toucher --mb 18 --cgroup "$cg"
            rmdir "$cg"
            rm -rf $NAMES_ROOT
        fi
        vm_stop brief
        rmdir "$cg" 2> /dev/null
        rm -rf $NAMES_ROOT
    fi
    vm_end
}

names_k8s_v2
names_brief_v2
