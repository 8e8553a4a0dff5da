"""Real container runtimes from Debian, for the tests of the names memlat gives cgroups
(test_names.py): Podman, and Docker's daemon (docker.io). Each runs containers of an image made
here, offline: busybox-static's binary as the root file system, imported (`podman import`,
`docker import`), so that no registry is needed. Each says what it is (`inspect`): that is the
oracle the tools' names are checked against.

What this machine kind needs (measured here, Debian 12, a VM without systemd, cgroup v1):
- Podman: `--runtime runc` (Debian's default, crun, refuses the hybrid cgroup layout) and
  `--ulimit nofile=...,nproc=...` within the machine's hard limits; without systemd its cgroup
  manager is cgroupfs (/libpod_parent/libpod-ID).
- Docker: no daemon runs at start; the test starts Debian's dockerd (without its iptables rules
  and bridge: the containers need no network) and stops it after, with what it made.
Everything made is removed on exit: containers, the image, and a runtime's state directory
when it did not exist before."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from typing import Optional

from memlat_test import log, own_name, skip

IMAGE = "localhost/memlat-busybox:test"
BUSYBOX = "/bin/busybox"  # busybox-static (scripts/install-deps.sh)


def busybox_rootfs_tar(directory: str) -> str:
    """A root file system of busybox's static binary and its applets' links, as a tar file."""
    if not os.path.isfile(BUSYBOX):
        skip(f"{BUSYBOX} missing (Debian's busybox-static): it is the containers' image")
    out = subprocess.run(["file", "-L", BUSYBOX], capture_output=True, text=True).stdout \
        if shutil.which("file") else "statically linked"
    if "statically linked" not in out and "static-pie" not in out:
        skip(f"{BUSYBOX} is not the static busybox (busybox-static): {out.strip()}")
    root = os.path.join(directory, "rootfs")
    os.makedirs(os.path.join(root, "bin"))
    os.makedirs(os.path.join(root, "data"))
    shutil.copy2(BUSYBOX, os.path.join(root, "bin", "busybox"))
    for applet in ("sh", "cat", "dd", "sleep", "true"):
        os.symlink("busybox", os.path.join(root, "bin", applet))
    path = os.path.join(directory, "rootfs.tar")
    with tarfile.open(path, "w") as tar:
        tar.add(root, arcname=".")
    return path


class Runtime:
    """A container runtime's command line: `command` (the CLI), the options every `run` needs
    here, and its own statement of what a container is (`inspect`)."""
    name = ""

    def __init__(self) -> None:
        self.command: list[str] = []
        self.run_options: list[str] = []
        self.rm_options: list[str] = []
        self.containers: list[str] = []
        self.image_made = False
        self.tmp = tempfile.mkdtemp(prefix=f"{own_name(self.name)}_")

    def cli(self, *args: str, timeout: float = 60, check: bool = True) -> str:
        p = subprocess.run([*self.command, *args], capture_output=True, text=True,
                           timeout=timeout)
        if check and p.returncode != 0:
            raise RuntimeError(f"{' '.join([*self.command, *args])}: exit {p.returncode}: "
                               f"{p.stderr.strip()[-600:]}")
        return p.stdout

    def __enter__(self) -> "Runtime":
        try:
            self.start()
            self.cli("import", busybox_rootfs_tar(self.tmp), IMAGE, timeout=120)
            self.image_made = True
            # The precondition, measured: a container runs here at all.
            p = subprocess.run([*self.command, "run", "--rm", *self.run_options, IMAGE,
                                "/bin/true"], capture_output=True, text=True, timeout=120)
            if p.returncode != 0:
                skip(f"{self.name} cannot run a container on this machine: "
                     f"{p.stderr.strip()[-400:]}")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def start(self) -> None:
        pass

    def run(self, name: str, *args: str, detach: bool = True) -> str:
        """Starts a container NAME (made unique to this test) of the image with `args` (run's
        options, then the command); returns its full name."""
        full = own_name(f"{self.name}_{name}")
        self.containers.append(full)
        self.cli("run", *(["-d"] if detach else []), "--name", full, *self.run_options, *args,
                 timeout=120, check=detach)
        return full

    def inspect(self, container: str) -> dict:
        return json.loads(self.cli("inspect", container))[0]

    def wait(self, container: str, timeout: float = 60) -> int:
        return int(self.cli("wait", container, timeout=timeout).strip().splitlines()[-1])

    def image_of(self, info: dict) -> str:
        raise NotImplementedError

    def stop(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        for c in self.containers:
            self.cli("rm", "-f", *self.rm_options, c, check=False)
        if self.image_made:
            self.cli("rmi", "-f", IMAGE, check=False)
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


class Podman(Runtime):
    name = "podman"
    STORAGE = "/var/lib/containers/storage"

    def start(self) -> None:
        exe = shutil.which("podman")
        if not exe:
            skip("podman is not installed (scripts/install-deps.sh installs it)")
        if not shutil.which("runc"):
            skip("runc is not installed (scripts/install-deps.sh installs it)")
        self.storage_existed = os.path.isdir(self.STORAGE)
        self.command = [exe]
        soft, hard = 1024, 1024
        self.run_options = ["--runtime", "runc", "--ulimit", f"nofile={soft}:{hard}",
                            "--ulimit", f"nproc={soft}:{hard}"]
        # Killed at once: a shell as PID 1 ignores the SIGTERM `rm -f` sends first (10 s).
        self.rm_options = ["--time", "0"]

    def image_of(self, info: dict) -> str:
        return info["ImageName"]

    def stop(self) -> None:
        if not getattr(self, "storage_existed", True):
            # Podman's storage did not exist before the test: none of it is left.
            self.cli("system", "reset", "--force", check=False, timeout=120)


class Docker(Runtime):
    name = "docker"
    DATA = "/var/lib/docker"

    def start(self) -> None:
        # Debian's client (docker.io) beside its daemon; another client on PATH may speak a
        # newer API than the daemon.
        exe = "/usr/bin/docker" if os.path.isfile("/usr/bin/docker") else shutil.which("docker")
        daemon = shutil.which("dockerd") or "/usr/sbin/dockerd"
        if not exe or not os.path.isfile(daemon):
            skip("Docker's daemon is not installed (docker.io; scripts/install-deps.sh "
                 "installs it)")
        self.command = [exe]
        self.run_options = ["--network", "none"]
        self.daemon: Optional[subprocess.Popen] = None
        self.made = [d for d in (self.DATA, "/run/docker", "/var/run/docker.sock", "/etc/docker")
                     if not os.path.exists(d)]
        if subprocess.run([exe, "info"], capture_output=True).returncode == 0:
            log("docker: a daemon already runs; it is used and left running")
            self.made = []
            return
        self.daemon_log = open(os.path.join(self.tmp, "dockerd.log"), "w")
        self.daemon = subprocess.Popen(
            [daemon, "--iptables=false", "--ip6tables=false", "--bridge=none",
             "--pidfile", os.path.join(self.tmp, "dockerd.pid")],
            stdout=self.daemon_log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while subprocess.run([exe, "info"], capture_output=True).returncode != 0:
            if self.daemon.poll() is not None or time.monotonic() > deadline:
                self.daemon_log.flush()
                tail = open(self.daemon_log.name).read()[-600:]
                skip(f"dockerd does not start on this machine: {tail.strip()}")
            time.sleep(0.2)
        log("docker: started Debian's dockerd for the test")

    def image_of(self, info: dict) -> str:
        return info["Config"]["Image"]

    def stop(self) -> None:
        if self.daemon is None:
            return
        self.daemon.terminate()
        try:
            self.daemon.wait(30)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
            self.daemon.wait(10)
        self.daemon_log.close()
        for d in self.made:
            if os.path.isdir(d):
                # Its overlay mounts are gone with the daemon; what is left is plain files.
                subprocess.run(["umount", "-R", d], capture_output=True)
                shutil.rmtree(d, ignore_errors=True)
            elif os.path.exists(d):
                os.unlink(d)
