#!/usr/bin/env python3
"""Runtime tests of the names memlat gives cgroups (lib/kernel/workloads.h, docs/names.md):
the pod, namespace, container, image or unit on every row where a cgroup appears, read from
the node's own files, never from a socket or an API.

Oracles, never inputs of the tools:
- real runtimes from Debian (containers.py): Podman and Docker run a container with a memory
  limit; `podman inspect` / `docker inspect` say its name, id and image, and the kernel says
  which cgroup its processes are in (/proc/PID/cgroup) and which cgroup an OOM kill hit (the
  kernel log's oom-kill: line);
- Kubernetes, which this host cannot run: the kubelet's and the CRI runtimes' layouts built in
  a scratch root (MEMLAT_HOST_ROOT), with cgroups made for real in the kubelet's naming (the
  systemd and cgroupfs drivers, each QoS class) and the records as containerd, CRI-O and the
  kubelet write them (the formats and their source files: tests/unit/test_workloads.cpp). The
  names are the test's; what is checked is that each lands on the row of the cgroup the
  kernel charged the stalls or the kill to.
"""
from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
import subprocess
import time
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from memlat_test import (MemoryCgroup, Test, TestFile, Tool, Workload,  # noqa: E402
                         binary, exporter_port, hierarchy_path, read_file, run, log, main, proc_memory_cgroup, remove_cgroup_dir,
                         scenario, skip, write_file)
from containers import IMAGE, Docker, Podman, Runtime  # noqa: E402
from oom_oracle import (KernelLog, oom_kill_count, require_oom_kills_allowed,  # noqa: E402
                        wait_for_whole_oom_reports)

LIMIT = 32 << 20
FILE_SIZE = 96 << 20


def last_line(t: Test, tool: Tool, key: str) -> list[dict]:
    res = tool.result
    t.check_eq(f"{' '.join(res.argv[1:])}: exit status", 0, res.rc)
    lines = [j for j in res.json_lines() if key in j]
    t.require(len(lines) >= 1, f"{' '.join(res.argv[1:])}: a JSON line with {key}", ">= 1",
              len(lines))
    return lines[-1][key]


def rows_of(rows: list[dict], path: str) -> list[dict]:
    return [r for r in rows if r["cgroup"] == path]


def top_rows(t: Test, tool: Tool, path: str) -> list[dict]:
    res = tool.result
    t.check_eq(f"{' '.join(res.argv[1:])}: exit status", 0, res.rc)
    return [r for line in res.json_lines() for r in line.get("cgroups", []) if r["cgroup"] == path]


def container_cgroup(pid: int) -> str:
    """The memory cgroup the kernel has process `pid` in, as every memlat output names it."""
    path = proc_memory_cgroup(pid)
    if not path:
        skip(f"no memory cgroup in /proc/{pid}/cgroup")
    return path


SAMPLE = re.compile(r'^(?P<name>[a-z_]+)\{(?P<labels>.*)\} (?P<value>\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def scrape(port: int) -> list[tuple[str, dict, float]]:
    """/metrics of the exporter at `port`: (name, labels, value) of each labelled sample."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = []
    for line in text.splitlines():
        if m := SAMPLE.match(line):
            out.append((m["name"], dict(LABEL.findall(m["labels"])), float(m["value"])))
    return out


# ---------------------------------------------------------------- real runtimes

def runtime_names_container(t: Test, rt: Runtime) -> None:
    """A container with a 32 MiB limit reads a 96 MiB file twice (memcg limit reclaim) and
    then sleeps: memstall -C (JSON and text) and top -j name its cgroup as the runtime's
    inspect does. A second container, limited to 32 MiB without swap, allocates 64 MiB at once
    (dd's buffer): oomwhy names the container the kernel's OOM kill hit."""
    with TestFile(FILE_SIZE, f"names_{rt.name}", cold=True) as f:
        os.chmod(f.path, 0o644)
        with Tool("memstall", "-j", "-C", "-v") as per_cgroup, \
                Tool("memstall", "-C") as text, Tool("memtop", "-j", "-a") as top:
            name = rt.run("reader", "--memory", str(LIMIT), "-v", f"{f.path}:/data/file:ro",
                          IMAGE, "/bin/sh", "-c",
                          "cat /data/file > /dev/null; cat /data/file > /dev/null; "
                          "echo read; sleep 60")
            info = rt.inspect(name)
            deadline = time.monotonic() + 60
            while "read" not in rt.cli("logs", name) and time.monotonic() < deadline:
                time.sleep(0.2)
            t.require("read" in rt.cli("logs", name), "the container read its file twice",
                      "read", rt.cli("logs", name)[-200:])
            path = container_cgroup(info["State"]["Pid"])
            time.sleep(1.2)  # one more interval of top's with the container alive
    log(f"{rt.name} container {name}: id {info['Id'][:12]}, cgroup {path}, image "
        f"{rt.image_of(info)}")
    t.check_in("the runtime's id is in the container's cgroup path", info["Id"], path,
               "cgroup path")
    want = {"kind": "container", "runtime": rt.name, "container": name,
            "container_id": info["Id"], "image": rt.image_of(info)}
    mine = rows_of(last_line(t, per_cgroup, "cgroups"), path)
    if t.check(len(mine) == 1, "memstall -C: a row for the container's cgroup", "1",
               len(mine)):
        t.check(mine[0]["causes"]["memcg"]["stalls"] > 0, "memstall -C: the container's "
                "row has its memcg reclaim stalls", "> 0", mine[0]["causes"]["memcg"])
        got = mine[0].get("workload") or {}
        t.check_eq("memstall -C: the row's workload as inspect says", want,
                   {k: got.get(k) for k in want})
    err = per_cgroup.result.stderr
    t.check_in("memstall -v says what named it", f"names: {path} is {rt.name} {name} (from ",
               err, "stderr")
    t.check_in("memstall -C text: the row named by the container's name",
               f"{rt.name} {name}", text.result.stdout, "stdout")
    rows = top_rows(t, top, path)
    t.require(len(rows) >= 1, "top -j -a: rows of the container's cgroup", ">= 1", len(rows))
    t.check_eq("top: every row of it named as inspect says", {f"{rt.name} {name}"},
               {r["name"] for r in rows})
    t.check_eq("top: its workload as inspect says", [want] * len(rows),
               [{k: (r.get("workload") or {}).get(k) for k in want} for r in rows])

    # An OOM kill in a container.
    require_oom_kills_allowed()
    wait_for_whole_oom_reports()
    klog = KernelLog()
    try:
        with Tool("oomwhy", "-j") as oomwhy, Tool("oomwhy") as oomwhy_text:
            victim = rt.run("oom", "--memory", str(LIMIT), "--memory-swap", str(LIMIT),
                            IMAGE, "/bin/dd", "if=/dev/zero", "of=/dev/null", "bs=64M",
                            "count=1")
            status = rt.wait(victim)
            info = rt.inspect(victim)
            time.sleep(1.5)  # oomwhy reports a second after the kill
        kernel = klog.reports()
    finally:
        klog.close()
    t.check_eq("the OOM container's exit status (killed: 128 + SIGKILL)", 137, status)
    kills = [k for k in kernel if info["Id"] in k.get("oom_kill", {}).get("task_memcg", "")]
    t.require(len(kills) == 1, "the kernel log: one kill in the container's cgroup", "1",
              [k.get("oom_kill") for k in kernel])
    reports = [r for r in oomwhy.result.json_lines() if r.get("type") == "kill"]
    by_tid = [r for r in reports if r["victim"]["tid"] == kills[0]["killed"]["pid"]]
    if t.check(len(by_tid) == 1, "oomwhy: a report of the kernel's kill", "1",
               [r["victim"]["tid"] for r in reports]):
        r = by_tid[0]
        t.check_eq("oomwhy: the victim's cgroup is the kernel's task_memcg",
                   kills[0]["oom_kill"]["task_memcg"], r["victim"]["cgroup"])
        want["container"], want["container_id"] = victim, info["Id"]
        t.check_eq("oomwhy: the victim's container as inspect says", want,
                   {k: (r["victim"].get("workload") or {}).get(k) for k in want})
        t.check_eq("oomwhy: the limit that fired is the container's", want,
                   {k: (r.get("oom_memcg_workload") or {}).get(k) for k in want})
    t.check_in("oomwhy text: the victim's container named after its cgroup",
               f"{kills[0]['oom_kill']['task_memcg']} ({rt.name} {victim})",
               oomwhy_text.result.stdout, "stdout")


@scenario("names_podman_container")
def _(t: Test):
    """Podman (runc, cgroupfs here): its container's name, id and image on memstall -C's, top's
    and oomwhy's rows, as `podman inspect` gives them."""
    with Podman() as rt:
        runtime_names_container(t, rt)


@scenario("names_docker_container")
def _(t: Test):
    """Docker (Debian's dockerd, started by the test): the same as Podman's, against `docker
    inspect`."""
    with Docker() as rt:
        runtime_names_container(t, rt)


# ---------------------------------------------------------------- Kubernetes' layout

class ScratchKubernetes:
    """A node's Kubernetes layout in a scratch root, with real cgroups below a MemoryCgroup of
    the test (`base`): three pods, one per way a node names them.
    - shop/checkout-7d9f/web: the kubelet's systemd driver, burstable, containerd (its bundle's
      config.json with the CRI plugin's annotations);
    - data/db-0/postgres: the cgroupfs driver, besteffort, CRI-O (its config.json's
      annotations);
    - batch/report-x1/web: the cgroupfs driver, guaranteed, a runtime whose records are not
      on this root: the kubelet's /var/log/pods and /var/log/containers name it.
    Each container's cgroup is limited to LIMIT."""

    PODS = [
        # namespace, pod, container, uid, id, qos, driver, source
        ("shop", "checkout-7d9f", "web", "3f2a9c1e-7b6d-4c2a-9e1f-0123456789ab",
         "4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e", "burstable",
         "systemd", "containerd"),
        ("data", "db-0", "postgres", "9a8b7c6d-1111-4222-8333-444455556666",
         "b802bb55fb948beb8d3c787f6cd1b136b9da891d972cd44f1535c8cc5edf46a9", "besteffort",
         "cgroupfs", "cri-o"),
        # A second container named web: -G web names two cgroups.
        ("batch", "report-x1", "web", "0c0d0e0f-aaaa-4bbb-8ccc-dddddddddddd",
         "6c41a03d85970679b6eb4037276852d78879c94181384d97031d622747e4b725", "guaranteed",
         "cgroupfs", "kubelet"),
    ]

    def __init__(self, base: MemoryCgroup):
        self.base = base
        self.root = tempfile.mkdtemp(prefix="memlat_names_root_")
        self.made: list[str] = []  # cgroup directories, parents first
        self.containers: list[dict] = []

    def mkdir_cgroup(self, path: str) -> None:
        if not os.path.isdir(path):
            os.mkdir(path)
            self.made.append(path)

    def write(self, path: str, obj) -> None:
        full = self.root + path
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            json.dump(obj, f)

    def pod_dirs(self, uid: str, qos: str, driver: str, cid: str, runtime: str) -> list[str]:
        if driver == "systemd":
            u = uid.replace("-", "_")
            q = "" if qos == "guaranteed" else f"-{qos}"
            parts = ["kubepods.slice"] + ([f"kubepods{q}.slice"] if q else []) + \
                [f"kubepods{q}-pod{u}.slice", f"cri-containerd-{cid}.scope"
                 if runtime == "containerd" else f"crio-{cid}.scope"]
        else:
            parts = ["kubepods"] + ([qos] if qos != "guaranteed" else []) + [f"pod{uid}"] + \
                [f"crio-{cid}" if runtime == "cri-o" else cid]
        return parts

    def __enter__(self) -> "ScratchKubernetes":
        try:
            for ns, pod, container, uid, cid, qos, driver, source in self.PODS:
                dirs = self.pod_dirs(uid, qos, driver, cid, source)
                path = self.base.path
                for part in dirs:
                    path = os.path.join(path, part)
                    self.mkdir_cgroup(path)
                write_file(os.path.join(path, "memory.limit_in_bytes" if self.base.v1
                                        else "memory.max"), str(LIMIT))
                if source == "containerd":
                    # crun under systemd runs a container's tasks in SCOPE/container: the
                    # cgroup below is the container's too (-G takes the one above).
                    self.mkdir_cgroup(os.path.join(path, "container"))
                    self.write(f"/run/containerd/io.containerd.runtime.v2.task/k8s.io/{cid}/"
                               "config.json", {"ociVersion": "1.1.0", "annotations": {
                                   "io.kubernetes.cri.container-type": "container",
                                   "io.kubernetes.cri.container-name": container,
                                   "io.kubernetes.cri.sandbox-name": pod,
                                   "io.kubernetes.cri.sandbox-namespace": ns,
                                   "io.kubernetes.cri.sandbox-uid": uid,
                                   "io.kubernetes.cri.image-name": f"{container}:1"}})
                elif source == "cri-o":
                    self.write(f"/run/containers/storage/overlay-containers/{cid}/userdata/"
                               "config.json", {"annotations": {
                                   "io.kubernetes.pod.name": pod,
                                   "io.kubernetes.pod.namespace": ns,
                                   "io.kubernetes.pod.uid": uid,
                                   "io.kubernetes.container.name": container,
                                   "io.kubernetes.cri-o.ImageName": f"{container}:1"}})
                logs = f"{self.root}/var/log/pods/{ns}_{pod}_{uid}/{container}"
                os.makedirs(logs)
                if source == "kubelet":
                    os.makedirs(f"{self.root}/var/log/containers", exist_ok=True)
                    os.symlink(f"/var/log/pods/{ns}_{pod}_{uid}/{container}/0.log",
                               f"{self.root}/var/log/containers/{pod}_{ns}_{container}-"
                               f"{cid}.log")
                self.containers.append({
                    "dir": path, "path": hierarchy_path(path), "namespace": ns, "pod": pod,
                    "container": container, "pod_uid": uid, "container_id": cid, "qos": qos,
                    "source": source})
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        for path in reversed(self.made):
            remove_cgroup_dir(path)
        shutil.rmtree(self.root, ignore_errors=True)


@scenario("names_kubernetes_layouts")
def _(t: Test):
    """Three pods in a scratch root, one per way a node names them (ScratchKubernetes): a
    reader in each container reads a 96 MiB file through its 32 MiB limit. memstall -C, top -j
    and their text name each row by namespace/pod/container; memstall -v says which record
    named it; then a process in the containerd container is OOM-killed by its limit and oomwhy
    names the pod and container the kernel's kill hit."""
    with MemoryCgroup("names_k8s") as base, ScratchKubernetes(base) as node:
        env = {"MEMLAT_HOST_ROOT": node.root}
        files = [TestFile(FILE_SIZE, f"names_k8s_{i}", cold=True)
                 for i in range(len(node.containers))]
        for f in files:
            f.__enter__()
        try:
            with Tool("memstall", "-j", "-C", "-v", env=env) as per_cgroup, \
                    Tool("memstall", "-C", env=env) as text, \
                    Tool("memtop", "-j", "-a", env=env) as top, \
                    Tool("memstall", "-j", "-G", "shop/checkout-7d9f/web", env=env) as by_name, \
                    Tool("drsnoop", "-j", "-G", "data/db-0", env=env) as by_pod, \
                    Tool("cachestat", "-j", "-G", node.containers[2]["container_id"][:12],
                         env=env) as by_id, \
                    Tool("lockstall", "-j", "-m", "0.2", "-G", "batch/report-x1/web",
                         env=env) as locks, \
                    Tool("lockstall", "-m", "0.2", "-G", "batch/report-x1/web",
                         env=env) as locks_text, \
                    Tool("memlat", "exporter", "--tools", "memstall,drsnoop,lockstall",
                         "--memstall.prometheus-labels", "cgroup",
                         "--drsnoop.prometheus-labels", "cgroup",
                         "--lockstall.prometheus-labels", "cgroup",
                         "--lockstall.min-wait", "0.2",
                         "--web.listen-address", "127.0.0.1:0", env=env) as exporter:
                readers = [Workload("file_reader", "--file", f.path, "--cgroup", c["dir"],
                                    "--passes", "2", "--linger")
                           for f, c in zip(files, node.containers)]
                for r in readers:
                    r.__enter__()
                try:
                    # An mmap_lock convoy (16 MiB: within the limit) in batch/report-x1/web.
                    with Workload("lock_convoy", "--map-mb", "16", "--seconds", "1",
                                  "--cgroup", node.containers[2]["dir"]) as convoy:
                        convoy.wait_exit(60)
                    for r in readers:
                        r.wait_done(90)
                    time.sleep(1.2)
                    samples = scrape(exporter_port(exporter))
                finally:
                    for r in readers:
                        r.__exit__(None, None, None)
        finally:
            for f in files:
                f.__exit__(None, None, None)
        # -G by name: only the tasks of the cgroup it names.
        pids = [r.pid for r in readers]
        rows = last_line(t, by_name, "processes")
        t.check_eq("memstall -G NAMESPACE/POD/CONTAINER: only the web reader stalls",
                   [pids[0]], [r["pid"] for r in rows if r["stall_ns"] > 0])
        events = [e for e in by_pod.result.json_lines() if e.get("type") == "event"]
        t.check(len(events) > 0 and {e["pid"] for e in events} == {pids[1]},
                "drsnoop -G NAMESPACE/POD: only the db reader's reclaim", f"{{{pids[1]}}}",
                sorted({e["pid"] for e in events}))
        t.check_eq("cachestat -G CONTAINER-ID: exit status", 0, by_id.result.rc)
        # lockstall: the waits of the convoy's processes, each named by its pod's records.
        first = convoy._out.lines[0] if convoy._out.lines else ""
        ids = {int(v) for v in dict(kv.split("=") for kv in first.split()).values()} - {0}
        waits = [e for e in locks.result.json_lines() if e.get("type") == "event"]
        report = node.containers[2]
        t.check(len(waits) > 0 and {e["pid"] for e in waits} <= ids,
                "lockstall -G NAMESPACE/POD/CONTAINER: waits, of the convoy's processes only",
                f"some, of {sorted(ids)}", sorted({e["pid"] for e in waits}))
        keys = ("namespace", "pod", "container")
        t.check_eq("lockstall -j: each wait's workload (namespace, pod, container)",
                   {tuple(report[k] for k in keys)},
                   {tuple((e.get("workload") or {}).get(k) for k in keys) for e in waits})
        t.check_in("lockstall text: the waits' lines end with the container's names",
                   f"[{report['namespace']}/{report['pod']}/{report['container']}]",
                   locks_text.result.stdout, "stdout")
        series = [(labels, v) for name, labels, v in samples
                  if name == "memlat_mmap_lock_convoy_waits_total"
                  and labels.get("cgroup") == report["path"]]
        t.check(len(series) >= 1 and all(
            {k: labels.get(k) for k in keys} == {k: report[k] for k in keys}
            for labels, _ in series) and sum(v for _, v in series) > 0,
            "exporter: memlat_mmap_lock_convoy_waits_total of batch/report-x1/web's cgroup "
            "labelled namespace, pod and container, counting",
            f"{report['namespace']}, {report['pod']}, {report['container']}", series)
        res = run([binary("memstall"), "-G", "web", "-d", "1"], env=env)
        t.check_eq("memstall -G web (two containers named web): exit status", 2, res.rc)
        for c in (node.containers[0], node.containers[2]):
            t.check_in(f"memstall -G web: {c['namespace']}/{c['pod']}/web among the names",
                       f"{c['namespace']}/{c['pod']}/web ({c['dir']})", res.stderr, "stderr")
        res = run([binary("cachestat"), "-G", "0123456789ab", "-d", "1"], env=env)
        t.check_eq("cachestat -G of an id prefix no container has: exit status", 2, res.rc)
        res = run([binary("memstall"), "-G", "shop/nosuch", "-d", "1"], env=env)
        t.check_eq("memstall -G of a pod nobody runs: exit status", 2, res.rc)
        t.check_in("memstall -G of a pod nobody runs: says so",
                   "nor a pod or a container this node runs", res.stderr, "stderr")

        rows = last_line(t, per_cgroup, "cgroups")
        keys = ("namespace", "pod", "container", "pod_uid", "container_id", "qos")
        for c in node.containers:
            what = f"{c['namespace']}/{c['pod']}"
            mine = rows_of(rows, c["path"])
            if not t.check(len(mine) == 1, f"memstall -C: a row for {what}'s cgroup", "1",
                           len(mine)):
                continue
            t.check(mine[0]["causes"]["memcg"]["stalls"] > 0,
                    f"memstall -C: {what}'s row has its reader's memcg stalls", "> 0",
                    mine[0]["causes"]["memcg"])
            got = mine[0].get("workload") or {}
            t.check_eq(f"memstall -C: {what}'s names", {k: c[k] for k in keys},
                       {k: got.get(k) for k in keys})
            t.check_eq(f"memstall -C: {what} is a container", "container", got.get("kind"))
            display = f"{c['namespace']}/{c['pod']}/{c['container']}"
            t.check_in(f"memstall -C text: {display}", display, text.result.stdout, "stdout")
            source = {"containerd": "/run/containerd/", "cri-o": "/run/containers/storage/",
                      "kubelet": "/var/log/containers/"}[c["source"]]
            t.check(got.get("source", "").startswith(source),
                    f"memstall -C: {what} named from {c['source']}'s record", source,
                    got.get("source"))
            t.check_in(f"memstall -v: which record named {display}",
                       f"names: {c['path']} is {display} (from {source}",
                       per_cgroup.result.stderr, "stderr")
            for family in ("memlat_memstall_cgroup_stall_seconds_total",
                           "memlat_reclaim_cgroup_stalls_total"):
                series = [(labels, v) for name, labels, v in samples
                          if name == family and labels.get("cgroup") == c["path"]]
                t.check(len(series) >= 1 and all(
                    {k: labels.get(k) for k in ("namespace", "pod", "container")} ==
                    {k: c[k] for k in ("namespace", "pod", "container")}
                    for labels, _ in series) and sum(v for _, v in series) > 0,
                    f"exporter: {family} of {display}'s cgroup labelled namespace, pod and "
                    "container, counting", f"{c['namespace']}, {c['pod']}, {c['container']}",
                    series)
            top_of = top_rows(t, top, c["path"])
            t.check(len(top_of) >= 1 and all(r["name"] == display for r in top_of),
                    f"top -j: {display}'s rows named so", display,
                    sorted({r["name"] for r in top_of}))

        # An OOM kill in the containerd pod's container.
        require_oom_kills_allowed()
        web = node.containers[0]
        wait_for_whole_oom_reports()
        klog = KernelLog()
        try:
            with Tool("oomwhy", "-j", env=env) as oomwhy, Tool("oomwhy", env=env) as oom_text, \
                    Tool("oomwhy", "--prometheus", "127.0.0.1:0", env=env) as oom_metrics:
                with Workload("anon_toucher", "--mb", "64", "--cgroup", web["dir"]) as victim:
                    victim.proc.wait(60)
                time.sleep(1.5)
                kill_series = [(labels, v) for name, labels, v in scrape(exporter_port(oom_metrics))
                               if name == "memlat_oom_kills_total"
                               and labels.get("constraint") == "memcg"]
            kernel = klog.reports()
        finally:
            klog.close()
    kills = [k for k in kernel if k.get("oom_kill", {}).get("task_memcg") == web["path"]]
    t.require(len(kills) == 1, "the kernel log: one kill in the web container's cgroup", "1",
              [k.get("oom_kill") for k in kernel])
    reports = [r for r in oomwhy.result.json_lines() if r.get("type") == "kill"]
    t.require(len(reports) == 1, "oomwhy: one report", "1", len(reports))
    r = reports[0]
    t.check_eq("oomwhy: the victim is the kernel's", kills[0]["killed"]["pid"], r["victim"]["tid"])
    keys = ("namespace", "pod", "container")
    t.check_eq("oomwhy: the victim's pod and container", {k: web[k] for k in keys},
               {k: (r["victim"].get("workload") or {}).get(k) for k in keys})
    t.check_eq("oomwhy: the pod and container whose limit fired", {k: web[k] for k in keys},
               {k: (r.get("oom_memcg_workload") or {}).get(k) for k in keys})
    t.check_eq("oomwhy --prometheus: the kill counted for the cgroup, the pod and the container",
               [({"constraint": "memcg", "cgroup": web["path"], "namespace": web["namespace"],
                  "pod": web["pod"], "container": web["container"]}, 1.0)], kill_series)
    t.check_in("oomwhy text: the victim's pod and container after its cgroup",
               f"{web['path']} (shop/checkout-7d9f/web)", oom_text.result.stdout, "stdout")


# ---------------------------------------------------------------- churn

CHURN_CONTAINERS = 500
CHURN_ALIVE = 20
# memstall's resident memory may grow this much while it names the last 400 containers of the
# churn: the first 100 warm its tables, caches and allocator up; what is kept per cgroup
# (names, paths) is forgotten when the cgroup goes, so more containers must not cost more.
CHURN_RSS_GROWTH_KB = 512


def rss_kb(pid: int) -> int:
    for line in read_file(f"/proc/{pid}/status", "").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@scenario("names_churn")
def _(t: Test):
    """500 containers in the kubelet's layout (the systemd driver's cgroups, made for real, and
    containerd's bundles in a scratch root), started and removed as fast as this machine runs
    them, 20 alive at a time, each a reader over its 4 MiB limit (memcg reclaim): every row
    memstall -C 1 prints for one of them names its own pod, though most are gone, records and
    all, before their interval is printed (memstall reads the names as each cgroup is made);
    none is named for another; the tool's memory does not grow with the containers it named,
    and nothing of the churn is left (cgroups, bundles)."""
    # A cold file per slot of the containers alive: a reader charges the pages it reads to its
    # own container (over its limit: memcg reclaim), not to whoever read the file before.
    files = [TestFile(8 << 20, f"names_churn_{n}") for n in range(CHURN_ALIVE)]
    with MemoryCgroup("names_churn") as base, contextlib.ExitStack() as stack:
        for f in files:
            stack.enter_context(f)
        root = tempfile.mkdtemp(prefix="memlat_names_churn_")
        slices = [os.path.join(base.path, "kubepods.slice"),
                  os.path.join(base.path, "kubepods.slice", "kubepods-besteffort.slice")]
        made: list[str] = []
        for d in slices:
            os.mkdir(d)
            made.append(d)
        limit = "memory.limit_in_bytes" if base.v1 else "memory.max"
        live: collections.deque = collections.deque()
        expected: dict[str, str] = {}  # cgroup path -> pod name

        def end_oldest() -> None:
            # As containerd ends a task: runc removes the cgroup, then the shim the bundle.
            proc, dirs, bundle = live.popleft()
            proc.wait(60)
            for d in reversed(dirs):
                remove_cgroup_dir(d)
            shutil.rmtree(bundle, ignore_errors=True)

        try:
            env = {"MEMLAT_HOST_ROOT": root}
            with Tool("memstall", "-j", "-C", "1", env=env) as tool, \
                    Tool("memtop", "-j", "--rows", "1000", "--no-page-cache", env=env) as top:
                started = time.monotonic()
                rss_warm = 0
                for i in range(CHURN_CONTAINERS):
                    uid = f"{i:08x}-0000-4000-8000-{i:012x}"
                    cid = f"{i + 1:064x}"
                    pod_dir = os.path.join(slices[1], "kubepods-besteffort-pod"
                                           + uid.replace("-", "_") + ".slice")
                    dirs = [pod_dir, os.path.join(pod_dir, f"cri-containerd-{cid}.scope")]
                    # containerd writes the bundle's config.json (its CRI plugin's annotations,
                    # internal/cri/server/container_create_linux.go) before `runc create` makes
                    # the container's cgroup.
                    bundle = f"{root}/run/containerd/io.containerd.runtime.v2.task/k8s.io/{cid}"
                    os.makedirs(bundle)
                    with open(f"{bundle}/config.json", "w") as out:
                        json.dump({"annotations": {
                            "io.kubernetes.cri.container-type": "container",
                            "io.kubernetes.cri.container-name": "work",
                            "io.kubernetes.cri.sandbox-name": f"job-{i}",
                            "io.kubernetes.cri.sandbox-namespace": "churn",
                            "io.kubernetes.cri.sandbox-uid": uid}}, out)
                    for d in dirs:
                        os.mkdir(d)
                    write_file(os.path.join(dirs[1], limit), str(4 << 20))
                    expected[hierarchy_path(dirs[1])] = f"job-{i}"
                    f = files[i % CHURN_ALIVE]
                    f.evict()
                    proc = subprocess.Popen([binary("file_reader"), "--file", f.path, "--cgroup",
                                             dirs[1], "--passes", "3"],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    live.append((proc, dirs, bundle))
                    while len(live) >= CHURN_ALIVE:
                        end_oldest()
                    if i == 99:
                        rss_warm = rss_kb(tool.proc.pid)
                while live:
                    end_oldest()
                seconds = time.monotonic() - started
                time.sleep(1.2)  # one more interval
                rss_end = rss_kb(tool.proc.pid)
        finally:
            while live:
                end_oldest()
            for d in reversed(made):
                remove_cgroup_dir(d)
            shutil.rmtree(root, ignore_errors=True)
    log(f"{CHURN_CONTAINERS} containers in {seconds:.1f} s "
        f"({CHURN_CONTAINERS / seconds:.0f} a second), {CHURN_ALIVE} alive at a time; "
        f"memstall's RSS {rss_warm} KiB after 100, {rss_end} KiB at the end")
    t.check_eq("memstall -C exit status", 0, tool.result.rc)
    rows = [r for line in tool.result.json_lines() for r in line.get("cgroups", [])]
    ours = [r for r in rows if r.get("cgroup") in expected]
    wrong = [(r["cgroup"], r.get("workload")) for r in ours
             if (r.get("workload") or {}).get("pod") != expected[r["cgroup"]]
             or (r.get("workload") or {}).get("namespace") != "churn"
             or (r.get("workload") or {}).get("container") != "work"]
    by_id = [r for r in rows if r.get("cgroup") is None or r.get("cgroup", "").isdigit()]
    log(f"rows of churn containers: {len(ours)}, of {len(set(r['cgroup'] for r in ours))} "
        f"containers; {len(by_id)} rows by id only")
    # Which readers stall long enough to count is the kernel's timing, not the names' (238,
    # 259 and 280 of the 500 containers had a row in three runs on 2026-12-07; before memstall
    # watched cgroups being made, 56 could be named). A fifth keeps the checks below from
    # passing on a handful of rows.
    t.check(len({r["cgroup"] for r in ours}) >= CHURN_CONTAINERS // 5,
            "containers with a row", f">= {CHURN_CONTAINERS // 5}",
            len({r["cgroup"] for r in ours}))
    t.check_eq("every such row named by its own pod, namespace and container", [], wrong[:5])
    # memlat top the same: its rows of cgroups gone before its walk keep their paths and names.
    top_ours = [r for line in top.result.json_lines() for r in line.get("cgroups", [])
                if r.get("cgroup") in expected]
    log(f"memlat top: {len(top_ours)} rows of churn containers")
    t.check_eq("memlat top -j exit status", 0, top.result.rc)
    t.check(len(top_ours) >= CHURN_CONTAINERS // 5, "memlat top: rows of churn containers",
            f">= {CHURN_CONTAINERS // 5}", len(top_ours))
    t.check_eq("memlat top: each named by its own pod", [],
               [(r["cgroup"], r.get("name")) for r in top_ours
                if r.get("name") != f"churn/{expected[r['cgroup']]}/work"][:5])
    t.check_eq("memlat top: rows by id only", [],
               [r["cgroup"] for line in top.result.json_lines()
                for r in line.get("cgroups", []) if r["cgroup"].startswith("(cgroup id")][:5])
    # Every cgroup that stalls here was made while memstall ran: none is left with its id.
    t.check_eq("rows by id only (a cgroup whose making was not seen)", [],
               [r.get("cgroup") for r in by_id][:5])
    t.check_le(f"memstall's RSS growth over the last {CHURN_CONTAINERS - 100} containers "
               f"(KiB, at most {CHURN_RSS_GROWTH_KB})", CHURN_RSS_GROWTH_KB,
               rss_end - rss_warm)
    t.check_eq("nothing of the churn left: cgroups", [],
               [d for d in made if os.path.exists(d)])


# ---------------------------------------------------------------- process titles

@scenario("names_process_titles")
def _(t: Test):
    """Processes by the titles they run under (/proc/PID/cmdline, what top -c shows): a reader
    in a 32 MiB memory cgroup, then an OOM kill there. memstall's process rows (JSON `title`,
    text COMMAND) and oomwhy's trigger carry the command lines the test started them with;
    oomwhy's victim its own or none (its memory is being reaped by then)."""
    with MemoryCgroup("names_titles", LIMIT) as cg, \
            TestFile(FILE_SIZE, "names_titles", cold=True) as f:
        with Tool("memstall", "-j") as as_json, Tool("memstall") as text:
            with Workload("file_reader", "--file", f.path, "--cgroup", cg.path, "--passes", "2",
                          "--linger") as reader:
                reader.wait_done(60)
                title = " ".join(reader.proc.args)[:256]
                time.sleep(0.3)
                # The rows are printed at the end: while the reader lives.
                as_json.stop()
                text.stop()
        rows = [r for r in last_line(t, as_json, "processes") if r["pid"] == reader.pid]
        if t.check(len(rows) == 1, "memstall: a row for the reader", "1", len(rows)):
            t.check_eq("memstall -j: the reader's title is its command line", title,
                       rows[0].get("title"))
        line = [ln for ln in text.result.stdout.splitlines()
                if ln.split()[:1] == [str(reader.pid)]]
        t.check(len(line) >= 1 and line[-1].endswith("  " + title),
                "memstall: the reader's line ends with its command line (COMMAND)", title,
                line[-1:] if line else "no line")

        require_oom_kills_allowed()
        wait_for_whole_oom_reports()
        kills_before = oom_kill_count(cg.path)
        with Tool("oomwhy", "-j") as oomwhy:
            with Workload("anon_toucher", "--mb", "24", "--cgroup", cg.path,
                          "--linger") as victim:
                victim.wait_done(30)
                write_file(f"/proc/{victim.pid}/oom_score_adj", "1000")
                with Workload("anon_toucher", "--mb", "24", "--cgroup", cg.path) as trigger:
                    trigger.proc.wait(60)
                victim.proc.wait(30)
            time.sleep(1.5)
        kills = oom_kill_count(cg.path) - kills_before
    reports = [r for r in oomwhy.result.json_lines() if r.get("type") == "kill"]
    # The cgroup's own count is the oracle: the kernel may kill the trigger as well when the
    # victim's memory is not yet uncharged as the trigger charges again (seen once in CI).
    t.check_eq("oomwhy: reports = the cgroup's oom_kill count", kills, len(reports))
    ours = [r for r in reports if r["victim"]["pid"] == victim.pid]
    if t.check(len(ours) == 1, "oomwhy: a report of the victim's kill", "1",
               [r["victim"]["pid"] for r in reports]):
        r = ours[0]
        # The victim's memory is being reaped when the kill reaches user space: its command
        # line is mostly gone by then (null), never another's.
        t.check(r["victim"].get("title") in (None, " ".join(victim.proc.args)),
                "oomwhy: the victim's title, when it could be read, is its own",
                " ".join(victim.proc.args), r["victim"].get("title"))
        t.check_eq("oomwhy: the trigger's title", " ".join(trigger.proc.args),
                   r["trigger"].get("title"))


if __name__ == "__main__":
    sys.exit(main())
