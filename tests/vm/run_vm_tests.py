#!/usr/bin/env python3
"""The VM tests: memlat's static binaries on Debian's kernels (5.10, 6.1, 6.12, the newest; arm64
6.1 for an arm64 build), in a qemu guest with two NUMA nodes, booted from an initramfs this
script builds.

    run_vm_tests.py [--build-dir DIR] [--kernel 6.1] [--tools all|tlbflush,drsnoop]
                    [--hide-btf] [--keep] [--timeout S]
    run_vm_tests.py --kernel 5.10 --prepare   # only fetch the kernel, check the prerequisites

Steps: fetch the kernel pinned in kernels.txt with apt-get download through a scratch apt
configuration into the machine-wide cache (vmkernel.py; once), extract vmlinux; build an
initramfs (busybox-static, the tools BUILD/TOOL, the static workloads BUILD/tests/vm/*,
guest/init + guest/lib.sh, scenarios/TOOL.sh, the modules the scenarios need, decompressed);
boot it under qemu (TCG: the host's KVM cannot run this guest) with -smp 2,sockets=2 and
one memory backend per node; the guest runs every scenario and writes its report to the second
serial port, a file here; each scenario is judged by tests/vm/check_TOOL.py.

Every scenario prints "PASS", "FAIL" or "SKIP (reason)" with its name TOOL.SCENARIO.HOOKPATH.
Exit status: 0 all passed (skips allowed), 1 a failure or a guest that did not finish, 77 when
the VM cannot run here at all (no qemu, no kernel package) unless MEMLAT_VM_REQUIRED=1, which
makes that a failure too (CI sets it). Installs nothing.
"""
from __future__ import annotations

import argparse
import glob
import importlib
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "runtime"))
import vmkernel  # noqa: E402
from libbpf_candidates import compare_candidates  # noqa: E402
from memlat_test import Test, log, run, source_tools, verdict  # noqa: E402
from vmcheck import find_checker, parse_report, required_verdicts  # noqa: E402

SKIP_STATUS = 77
BUSYBOX_PATHS = ["/bin/busybox", "/usr/bin/busybox"]


class Arch:
    """What differs between the guests of two architectures (the kernel package's, Debian's
    name: amd64, arm64)."""

    def __init__(self, qemu: str, machine: list[str], console: str, results: str,
                 elf_machine: int, boot_modules: dict[str, str], disk_device: str,
                 disk_modules: dict[str, str]):
        self.qemu = qemu
        self.machine = machine          # -machine/-cpu arguments
        self.console = console          # the guest's console device (the first serial port)
        self.results = results          # the device the guest reports on (a file here)
        self.elf_machine = elf_machine  # e_machine of the binaries it runs
        self.boot_modules = boot_modules  # module -> CONFIG_, loaded by init before anything
        self.disk_device = disk_device  # qemu's virtio-blk device on this machine
        self.disk_modules = disk_modules  # module -> CONFIG_, loaded by vm_swapdisk (its driver)


ARCHES = {
    # pc: two 16550 UARTs, ttyS0 the console, ttyS1 the results.
    "amd64": Arch("qemu-system-x86_64", ["-machine", "pc", "-cpu", "max"], "ttyS0", "ttyS1",
                  62, {}, "virtio-blk-pci",
                  {"virtio_pci": "CONFIG_VIRTIO_PCI", "virtio_blk": "CONFIG_VIRTIO_BLK"}),
    # virt has one PL011 UART (the console); the results go over a virtio console (hvc0),
    # whose drivers Debian's arm64 kernel builds as modules. pauth-impdef: pointer
    # authentication with qemu's cheap hash instead of emulated QARMA (the kernel signs
    # every return address; with QARMA TCG spends most of its time there).
    "arm64": Arch("qemu-system-aarch64", ["-machine", "virt", "-cpu", "max,pauth-impdef=on"],
                  "ttyAMA0", "hvc0", 183,
                  {"virtio_mmio": "CONFIG_VIRTIO_MMIO", "virtio_console": "CONFIG_VIRTIO_CONSOLE"},
                  "virtio-blk-device", {"virtio_blk": "CONFIG_VIRTIO_BLK"}),
}
# One host thread runs both vCPUs: with qemu 7.2's multi-threaded TCG a 6.12 guest died of
# "Oops: int3" in flush_tlb_func while tlbflush attached (the other vCPU still ran a stale
# translation of the int3 that text_poke_bp puts in while patching a tracepoint's static
# key). Single-threaded TCG keeps code patching coherent, and on this 2-CPU machine, busy
# with other builds, a whole run was no slower (6.12: 120 s against 126-138 s).
# MEMLAT_VM_TCG=thread=multi brings the other back for experiments.
TCG = "tcg," + os.environ.get("MEMLAT_VM_TCG", "thread=single")
NODE_MEM_MB = 256           # per NUMA node; the guest has 2 nodes and 2 CPUs (CPU i on node i)
DEFAULT_TIMEOUT = 1800      # seconds for one boot (all scenarios of the selected tools)
DEFAULT_KERNEL = "6.1"
# Kernel modules the scenarios may load (insmod /modules/NAME.ko); brd gives a block device
# whose page cache is reclaimable without any disk. Built in (=y) instead, its parameters go on
# the kernel command line.
MODULES = {"brd": {"CONFIG": "CONFIG_BLK_DEV_RAM",
                   "params": "rd_nr=2 rd_size=1048576 max_part=0"}}
# The swap disk (/dev/vda in the guest): a virtio-blk disk backed by a sparse file here. A ram
# disk or zram completes a swap-in synchronously, on the CPU; this one is a real block device
# whose reads qemu completes asynchronously, so a swap-in waits off the CPU as on real hardware.
# Nothing touches it until a scenario calls vm_swapdisk (the driver is loaded then).
SWAP_DISK_MB = 256


class VmSkip(Exception):
    pass


def which(prog: str) -> str | None:
    return shutil.which(prog)


def tools_in(build: str) -> list[str]:
    """The tools with a VM scenario script, and whether their binary exists."""
    return sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(HERE, "scenarios",
                                                                          "*.sh")))


def is_static(path: str) -> bool:
    r = subprocess.run(["readelf", "-l", path], capture_output=True, text=True)
    return r.returncode == 0 and "INTERP" not in r.stdout


def elf_machine(path: str) -> int | None:
    with open(path, "rb") as f:
        head = f.read(20)
    return int.from_bytes(head[18:20], "little") if head[:4] == b"\x7fELF" else None


# ---------------------------------------------------------------- initramfs (newc cpio)

class Cpio:
    """Writes a newc-format cpio archive (what the kernel unpacks as initramfs)."""

    def __init__(self, path: str):
        self.f = open(path, "wb")
        self.ino = 1
        self.dirs: set[str] = set()

    def _entry(self, name: str, mode: int, data: bytes = b"") -> None:
        name_b = name.encode() + b"\0"
        hdr = "070701" + "".join(f"{v:08x}" for v in (
            self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name_b), 0))
        self.ino += 1
        self.f.write(hdr.encode() + name_b)
        self.f.write(b"\0" * ((4 - (110 + len(name_b)) % 4) % 4))
        self.f.write(data)
        self.f.write(b"\0" * ((4 - len(data) % 4) % 4))

    def mkdir(self, name: str) -> None:
        parts = name.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d and d not in self.dirs:
                self.dirs.add(d)
                self._entry(d, stat.S_IFDIR | 0o755)

    def file(self, name: str, data: bytes, mode: int = 0o755) -> None:
        self.mkdir(os.path.dirname(name.strip("/")))
        self._entry(name.strip("/"), stat.S_IFREG | mode, data)

    def copy(self, name: str, src: str, mode: int = 0o755) -> None:
        with open(src, "rb") as f:
            self.file(name, f.read(), mode)

    def symlink(self, name: str, target: str) -> None:
        self.mkdir(os.path.dirname(name.strip("/")))
        self._entry(name.strip("/"), stat.S_IFLNK | 0o777, target.encode())

    def close(self) -> None:
        self._entry("TRAILER!!!", 0)
        self.f.close()


# The terminfo entry of the terminal memlat top is given in tmux's panes (scenarios/top.sh).
PANE_TERMINFO = ["/lib/terminfo/s/screen", "/usr/share/terminfo/s/screen"]
C_UTF8 = "/usr/lib/locale/C.utf8"


def in_tree(root: str, path: str) -> str | None:
    """`path` (absolute, as the guest sees it) inside the tree `root`, its symbolic links
    followed inside the tree; None when it is not there."""
    at = os.path.join(root, path.lstrip("/"))
    for _ in range(10):
        if not os.path.islink(at):
            return at if os.path.isfile(at) else None
        target = os.readlink(at)
        at = os.path.join(root, target.lstrip("/")) if target.startswith("/") else \
            os.path.normpath(os.path.join(os.path.dirname(at), target))
    return None


def add_with_libraries(c: Cpio, root: str, binary: str, name: str, triplet: str) -> str | None:
    """The ELF `binary` of tree `root` (a path as the guest sees it) as `name`, with the
    interpreter and the shared libraries it loads, found in the tree's library directories
    and put at their paths there. Returns what is missing, or None."""
    todo, done = [(binary, name)], set()
    dirs = [f"/lib/{triplet}", f"/usr/lib/{triplet}", "/lib", "/usr/lib"]
    while todo:
        guest_path, dest = todo.pop()
        src = in_tree(root, guest_path)
        if src is None:
            return f"no {guest_path} in {root}"
        c.copy(dest, src)
        r = subprocess.run(["readelf", "-d", "-l", src], capture_output=True, text=True)
        interp = re.search(r"Requesting program interpreter: ([^\]]+)\]", r.stdout)
        wanted = [interp.group(1)] if interp else []
        for lib in re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", r.stdout):
            found = next((f"{d}/{lib}" for d in dirs if in_tree(root, f"{d}/{lib}")), None)
            if found is None:
                return f"{lib}, which {guest_path} loads, is in none of {dirs} of {root}"
            wanted.append(found)
        for w in wanted:
            if w not in done:
                done.add(w)
                todo.append((w, w.lstrip("/")))
    return None


def add_tmux(c: Cpio, kernel: vmkernel.Kernel, cache: str) -> str | None:
    """tmux as /bin/tmux with the libraries it loads, the terminfo entry of its panes and the
    C.UTF-8 locale it needs, for memlat top's screen scenario: the machine's own for an amd64
    guest, Debian's of the guest's suite otherwise (vmkernel.fetch_tmux). Returns why not, or
    None."""
    if kernel.arch == "amd64":
        tmux = which("tmux")
        if tmux is None:
            return "the host has no tmux (scripts/install-deps.sh installs it)"
        root, binary, triplet = "/", tmux, "x86_64-linux-gnu"
    else:
        root = vmkernel.fetch_tmux(kernel, cache, log)
        binary, triplet = "/usr/bin/tmux", "aarch64-linux-gnu"
    why = add_with_libraries(c, root, binary, "bin/tmux", triplet)
    if why:
        return why
    # The panes' terminal, whose entry memlat top's ncurses reads (the machine's: terminfo
    # files are the same on every architecture).
    terminfo = next((p for p in PANE_TERMINFO if os.path.isfile(p)), None)
    if terminfo is None:
        return f"no terminfo entry 'screen' ({', '.join(PANE_TERMINFO)})"
    c.copy(terminfo, terminfo, 0o644)
    # tmux refuses to start without a UTF-8 locale; it tries C.UTF-8, glibc's compiled one.
    ctype = in_tree(root, f"{C_UTF8}/LC_CTYPE")
    if ctype is None:
        return f"no {C_UTF8}/LC_CTYPE in {root} (tmux needs a UTF-8 locale)"
    c.copy(f"{C_UTF8}/LC_CTYPE", ctype, 0o644)
    return None


def build_initramfs(path: str, build: str, tools: list[str], kernel: vmkernel.Kernel,
                    busybox: str, cache: str, bench: str | None = None) -> list[str]:
    """Writes the initramfs; returns the notes about what it lacks (missing tool binaries).
    With `bench` (a guest script of bench/vm/), that script is the only scenario."""
    notes = []
    c = Cpio(path)
    for d in ("bin", "sbin", "proc", "sys", "dev", "tmp", "memlat", "modules", "scenarios",
              "sys", "root"):
        c.mkdir(d)
    c.copy("bin/busybox", busybox)
    if kernel.arch == "amd64":
        applets = subprocess.run([busybox, "--list"], capture_output=True,
                                 text=True).stdout.split()
    else:
        # This machine cannot run a foreign busybox to list its applets: the guest's init
        # links them itself (busybox --install) when it finds no /bin/mount.
        applets = ["sh"]
    for a in applets:
        if a != "busybox":
            c.symlink(f"bin/{a}", "busybox")
    c.copy("init", os.path.join(HERE, "guest", "init"))
    c.copy("lib.sh", os.path.join(HERE, "guest", "lib.sh"), 0o644)
    for tool in tools:
        c.copy(f"scenarios/{tool}.sh", bench if bench else
               os.path.join(HERE, "scenarios", f"{tool}.sh"), 0o644)
    # Every tool built goes in (a scenario may use another tool, and a debugging session
    # any of them); the ones whose scenarios run must be there.
    all_tools = sorted(os.path.basename(p)[:-len(".bpf.c")] for p in glob.glob(os.path.join(
        HERE, "..", "..", "tools", "*", "*.bpf.c")))
    # The multi-call binary itself too, for `memlat exporter` (scenarios/exporter.sh).
    for tool in sorted(set(all_tools) | set(tools) | {"memlat"}):
        if tool in ("exporter", "top", "bench", "names"):
            continue  # scenarios of the memlat binary (or --bench), not binaries of their own
        binary = os.path.join(build, tool)
        if os.path.isfile(binary) and is_static(binary):
            c.copy(f"memlat/{tool}", binary)
        elif tool in tools:
            notes.append(f"{binary} is not static (MEMLAT_STATIC=OFF?): the guest has no libc"
                         if os.path.isfile(binary) else f"{binary} not built")
    wl_dir = os.path.join(build, "tests", "vm")
    for wl in sorted(glob.glob(os.path.join(wl_dir, "*"))):
        if os.path.isfile(wl) and os.access(wl, os.X_OK) and is_static(wl):
            c.copy(f"memlat/{os.path.basename(wl)}", wl)
    if "top" in tools:
        why = add_tmux(c, kernel, cache)
        if why:
            notes.append(f"no tmux in the guest: {why}")
    for m in sorted(set(modules_needed(kernel) + boot_modules(kernel) + disk_modules(kernel))):
        c.copy(f"modules/{m}.ko", vmkernel.find_module(kernel, m), 0o644)
    # Loaded by init, in this order (dependencies first), before it opens the results device.
    c.file("modules/boot.list", "".join(m + "\n" for m in boot_modules(kernel)).encode(), 0o644)
    # The swap disk's driver, loaded by vm_swapdisk in this order (those init loaded are skipped).
    c.file("modules/disk.list", "".join(m + "\n" for m in disk_modules(kernel)).encode(), 0o644)
    c.close()
    return notes


def boot_modules(kernel: vmkernel.Kernel) -> list[str]:
    """The modules init loads first (the results channel's drivers), with their dependencies."""
    return _with_deps(kernel, {m: {"CONFIG": config}
                               for m, config in ARCHES[kernel.arch].boot_modules.items()})


def disk_modules(kernel: vmkernel.Kernel) -> list[str]:
    """The swap disk's driver modules (those not built in), with their dependencies."""
    return _with_deps(kernel, {m: {"CONFIG": config}
                               for m, config in ARCHES[kernel.arch].disk_modules.items()})


def modules_needed(kernel: vmkernel.Kernel) -> list[str]:
    """MODULES and what they depend on, each checked to exist in the package (decompressed by
    find_module); raises KernelError naming a module the package lacks."""
    return _with_deps(kernel, MODULES)


def _with_deps(kernel: vmkernel.Kernel, modules: dict[str, dict[str, str]]) -> list[str]:
    out = []
    for m, spec in modules.items():
        if vmkernel.config_value(kernel, spec["CONFIG"]) == "y":
            continue
        for dep in vmkernel.module_deps(kernel, m) + [m]:
            if vmkernel.find_module(kernel, dep) is None:
                value = vmkernel.config_value(kernel, spec["CONFIG"])
                raise vmkernel.KernelError(f"{kernel.version} has no {dep}.ko (needed for {m}; "
                                           f"{spec['CONFIG']}={value})")
            if dep not in out:
                out.append(dep)
    return out


def builtin_params(kernel: vmkernel.Kernel) -> list[str]:
    """Command-line parameters of the MODULES this kernel has built in."""
    return [f"{m}.{p}" for m, spec in MODULES.items()
            if vmkernel.config_value(kernel, spec["CONFIG"]) == "y"
            for p in spec["params"].split()]


def fentry_possible(kernel: vmkernel.Kernel) -> bool:
    """Whether the kernel can attach fentry/fexit programs: BPF trampolines are called through
    ftrace's direct calls (arm64 has them from 6.4; Debian's 6.1 arm64 refuses with
    ENOTSUPP)."""
    return vmkernel.config_value(kernel, "CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS") == "y"


# ---------------------------------------------------------------- qemu

def qemu_argv(kernel: vmkernel.Kernel, initrd: str, console: str, results: str,
              swap_disk: str, only: list[str], hide_btf: bool, psi: bool = True,
              btf_paths_only: bool = False, mem: int = NODE_MEM_MB) -> list[str]:
    arch = ARCHES[kernel.arch]
    if arch.results.startswith("hvc"):
        results_dev = ["-chardev", f"file,id=results,path={results}",
                       "-device", "virtio-serial-device",
                       "-device", "virtconsole,chardev=results"]
    else:
        results_dev = ["-serial", f"file:{results}"]
    return [
        arch.qemu, *arch.machine, "-accel", TCG,
        "-smp", "2,sockets=2,cores=1,threads=1", "-m", f"{2 * mem}M",
        "-object", f"memory-backend-ram,id=m0,size={mem}M",
        "-object", f"memory-backend-ram,id=m1,size={mem}M",
        "-numa", "node,nodeid=0,cpus=0,memdev=m0",
        "-numa", "node,nodeid=1,cpus=1,memdev=m1",
        "-kernel", kernel.boot_image, "-initrd", initrd,
        # psi=1: Debian builds PSI disabled by default, and memstall's oracles need it; psi=0
        # (--psi-off) is Debian's default, which memstall must measure without.
        "-append", " ".join([f"console={arch.console} panic=-1 loglevel=4 rdinit=/init "
                             f"psi={1 if psi else 0}",
                             f"memlat.results={arch.results}",
                             "memlat.only=" + ",".join(only)]
                            + (["memlat.nobtf=1"] if hide_btf else [])
                            + (["memlat.btf_paths_only=1"] if btf_paths_only else [])
                            + ([] if fentry_possible(kernel) else ["memlat.nofentry=1"])
                            + builtin_params(kernel)),
        "-nodefaults", "-display", "none", "-no-reboot",
        "-serial", f"file:{console}", *results_dev,
        "-drive", f"file={swap_disk},if=none,id=swapdisk,format=raw",
        "-device", f"{arch.disk_device},drive=swapdisk",
    ]


def boot(argv: list[str], timeout: float, results: str) -> tuple[int | None, float]:
    """Runs qemu to its end (the guest powers off), killed after `timeout` s."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while True:
            try:
                proc.wait(5)
                break
            except subprocess.TimeoutExpired:
                pass
            if time.monotonic() - t0 > timeout:
                log(f"vm: the guest did not finish within {timeout:.0f} s: killing qemu")
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
                return None, time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    out = proc.stdout.read().decode(errors="replace").strip()
    if out:
        log("vm: qemu said: " + out[-2000:])
    return proc.returncode, time.monotonic() - t0


# ---------------------------------------------------------------- main

def prerequisites(arch: str) -> str | None:
    """The busybox to use (None: fetch the architecture's, vmkernel.fetch_busybox); raises
    VmSkip naming what is missing."""
    missing = [p for p in (ARCHES[arch].qemu, "apt-get", "apt-cache", "dpkg-deb", "readelf")
               if not which(p)]
    if arch != "amd64":
        busybox = None
    else:
        busybox = next((p for p in BUSYBOX_PATHS if os.path.isfile(p) and is_static(p)), None)
    if busybox is None and arch == "amd64":
        missing.append("a static busybox (package busybox-static)")
    if missing:
        raise VmSkip("missing " + ", ".join(missing) + " (scripts/install-deps.sh installs them)")
    return busybox


def guest_crash(console: str) -> str:
    """The guest kernel's first Oops/BUG/panic line in the console log, "" when none."""
    try:
        with open(console, errors="replace") as f:
            for line in f:
                if any(w in line for w in ("Oops:", "BUG:", "Kernel panic", "RIP: 0010:",
                                           "Internal error:")):
                    return line.strip()
    except OSError:
        pass
    return ""


def judge(blocks, facts, done: bool, only: list[str],
          crash: str = "") -> tuple[list[tuple[str, str, str]], bool]:
    rows = []
    ok = True
    kernel = facts.get("kernel", "?")
    for tool in only:
        mod = f"check_{tool}"
        if os.path.isfile(os.path.join(HERE, mod + ".py")):
            importlib.import_module(mod)
    for b in blocks:
        b.facts = facts
        log(f"\n==== {b.name} (guest kernel {kernel}) ====")
        if not b.complete:
            rows.append((b.name, "FAIL", "the guest's report of it was cut short"))
            ok = False
            continue
        if b.skip:
            log(f"skipped: {b.skip}")
            rows.append((b.name, "SKIP", b.skip))
            continue
        fn, variant = find_checker(b.name)
        if fn is None:
            rows.append((b.name, "FAIL", "no checker for it in tests/vm/check_*.py"))
            ok = False
            continue
        b.variant = variant
        t = Test(b.name)
        status, detail = verdict(t, lambda: fn(t, b))
        ok = ok and status != "FAIL"
        rows.append((b.name, status, detail))
    # Scenarios that must run on this kernel (vmcheck.required): a skip or none at all fails.
    checked = required_verdicts(facts, rows)
    for i, (name, status, detail) in enumerate(checked):
        if status == "FAIL" and (i >= len(rows) or rows[i][1] != "FAIL"):
            ok = False
            log(f"FAIL  {name}: {detail}")
    rows = checked
    if not done:
        ok = False
        rows.append(("(guest)", "FAIL", "the guest did not finish (no \"@@vm done\"): "
                     + (f"its kernel said: {crash}" if crash else "see the console log")))
    return rows, ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=os.environ.get("MEMLAT_BUILD_DIR"))
    ap.add_argument("--kernel", default=DEFAULT_KERNEL,
                    help=f"a key of tests/vm/kernels.txt (default {DEFAULT_KERNEL})")
    ap.add_argument("--tools", default="all",
                    help="comma-separated, or all (default): every scenario script, one boot")
    ap.add_argument("--hide-btf", action="store_true",
                    help="the guest mounts a tmpfs over /sys/kernel/btf before the scenarios "
                         "(they see MEMLAT_VM_NO_BTF=1)")
    ap.add_argument("--btf-paths-only", action="store_true",
                    help="skip the scenarios of hook paths that need no kernel BTF (raw_tp, "
                         "tracepoint, kprobe): the kernel's --hide-btf boot runs them, with the "
                         "BTF the tools embed (they see MEMLAT_VM_BTF_PATHS_ONLY=1)")
    ap.add_argument("--psi-off", action="store_true",
                    help="boot with psi=0, as Debian's kernels do by default (the other runs "
                         "boot with psi=1)")
    ap.add_argument("--prepare", action="store_true", help="only fetch and unpack the kernel")
    ap.add_argument("--rejudge", action="store_true",
                    help="judge the last run's report again (after editing a checker), no boot")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    ap.add_argument("--keep", action="store_true", help="keep the console log on success")
    ap.add_argument("--bench", metavar="SCRIPT",
                    help="boot to run this guest script of bench/vm/ instead of the scenarios; "
                         "its report is left in BUILD/vm-run/KERNEL-bench-NAME/results.log for "
                         "the bench that asked (nothing is judged)")
    ap.add_argument("--node-mem-mb", type=int, default=NODE_MEM_MB,
                    help=f"memory of each of the guest's two nodes (default {NODE_MEM_MB})")
    args = ap.parse_args()
    if not args.build_dir:
        log("run_vm_tests.py: give --build-dir or set MEMLAT_BUILD_DIR")
        return 2
    build = os.path.abspath(args.build_dir)
    required = os.environ.get("MEMLAT_VM_REQUIRED") == "1"
    cache = vmkernel.cache_dir(build)
    try:
        table = vmkernel.kernel_table()
        if args.kernel not in table:
            raise vmkernel.KernelError(f"no kernel {args.kernel!r} in tests/vm/kernels.txt")
        arch = vmkernel.image_arch(table[args.kernel][1])
        busybox = prerequisites(arch)
        t0 = time.monotonic()
        kernel = vmkernel.fetch_kernel(args.kernel, cache, log)
        modules = modules_needed(kernel) + boot_modules(kernel) + disk_modules(kernel)
        if busybox is None:
            busybox = vmkernel.fetch_busybox(kernel, cache, log)
    except (VmSkip, vmkernel.KernelError, OSError, subprocess.SubprocessError) as e:
        log(f"{'FAIL' if required else 'skipped'}: the VM tests cannot run here: {e}")
        return 1 if required else SKIP_STATUS
    log(f"vm: kernel {args.kernel}: {kernel.version} from {kernel.package} (cache {cache}, "
        f"{time.monotonic() - t0:.1f} s); boots {'vmlinux (PVH)' if kernel.pvh else 'bzImage' if kernel.arch == 'amd64' else 'Image'}; "
        f"modules: {', '.join(modules) or 'none'}"
        + (f"; built in: {' '.join(builtin_params(kernel))}" if builtin_params(kernel) else ""))
    if args.prepare:
        return 0
    # An arm64 kernel boots an arm64 build's binaries (build-arm64/), never the native ones.
    wrong = [p for p in (os.path.join(build, t) for t in ("tlbflush", "drsnoop"))
             if os.path.isfile(p) and elf_machine(p) != ARCHES[kernel.arch].elf_machine]
    if wrong:
        log(f"FAIL: {wrong[0]} is not built for {kernel.arch} (kernel {args.kernel}): give the "
            f"build directory of that architecture (./build.sh --arch arm64: build-arm64)")
        return 1

    if args.bench:
        return run_bench(args, build, kernel, busybox, cache)
    only = [x for x in args.tools.split(",") if x and x != "all"] or tools_in(build)
    unknown = [x for x in only if not os.path.isfile(os.path.join(HERE, "scenarios", x + ".sh"))]
    if unknown:
        log(f"skipped: no VM scenarios for {', '.join(unknown)} yet "
            f"(tests/vm/scenarios/TOOL.sh and tests/vm/check_TOOL.py)")
        only = [x for x in only if x not in unknown]
        if not only:
            return SKIP_STATUS
    name = args.kernel + ("-nobtf" if args.hide_btf else "") + ("-psi0" if args.psi_off else "")
    if only != tools_in(build):
        name += "-" + "-".join(only)
    work = os.path.join(build, "vm-run", name)
    console, results = os.path.join(work, "console.log"), os.path.join(work, "results.log")
    # Once per x86 kernel (its plain boot, with every tool): 0003 on this kernel's BTF.
    candidates = kernel.arch == "amd64" and bool(kernel.vmlinux) and not args.hide_btf and \
        not args.psi_off and only == tools_in(build)

    def extra() -> list[tuple[str, str, str]]:
        return [core_candidates_row(build, kernel, work)] if candidates else []
    if args.rejudge:
        return report(args, results, console, only, None, extra())
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    initrd = os.path.join(work, "initramfs.cpio")
    notes = build_initramfs(initrd, build, only, kernel, busybox, cache)
    for n in notes:
        log(f"vm: note: {n}")
    if not glob.glob(os.path.join(build, "tests", "vm", "*")):
        log(f"FAIL: no static workloads in {build}/tests/vm (build the vm_* targets: make)")
        return 1
    swap_disk = os.path.join(work, "swap.img")
    with open(swap_disk, "wb") as f:
        f.truncate(SWAP_DISK_MB << 20)  # sparse: only what the guest writes takes host space
    argv = qemu_argv(kernel, initrd, console, results, swap_disk, only, args.hide_btf,
                     psi=not args.psi_off, btf_paths_only=args.btf_paths_only)
    log("vm: $ " + " ".join(argv))
    rc, took = boot(argv, args.timeout, results)
    os.remove(swap_disk)
    log(f"vm: qemu exit {rc} after {took:.1f} s")
    return report(args, results, console, only, took, extra())


def core_candidates_row(build: str, kernel: vmkernel.Kernel, work: str) -> tuple[str, str, str]:
    """libbpf.core_candidates: memlat's libbpf (cmake/libbpf/0003's index of names) finds, on
    this guest kernel's BTF (the .BTF section of the vmlinux it boots), the CO-RE candidates
    and instructions of libbpf's own scan for every tool's BPF object, as
    runtime.libbpf_index_candidates proves on the recorded kernels' BTF and the host's. Run on
    this host (x86 builds only: the binaries are the build's own)."""
    name = "libbpf.core_candidates"
    log(f"\n==== {name} (kernel {kernel.version}, on this host) ====")
    btf = os.path.join(work, "vmlinux.btf")
    t = Test(name)

    def body() -> None:
        res = run(["objcopy", "-O", "binary", "--only-section=.BTF", kernel.vmlinux, btf],
                  timeout=60)
        t.require(res.rc == 0 and os.path.getsize(btf) > 0,
                  f"the .BTF section of {kernel.vmlinux}", "extracted",
                  f"{res.rc}: {res.stderr[-300:]}")
        objects = [os.path.join(build, "bpf", f"{tool}.bpf.o") for tool in source_tools()]
        compare_candidates(t, kernel.version, btf, objects, os.path.join(build, "tests"))

    status, detail = verdict(t, body)
    return name, status, detail


def report(args, results: str, console: str, only: list[str], took: float | None,
           extra: list[tuple[str, str, str]] = ()) -> int:
    """Judges the guest's report and the host-side rows EXTRA, and prints the summary; the
    exit status of the run."""
    with open(results, "rb") as f:
        text = f.read().decode(errors="replace")
    facts, blocks, done = parse_report(text)
    log("vm: guest: " + ", ".join(f"{k}={v}" for k, v in facts.items() if k != "cmdline"))
    rows, ok = judge(blocks, facts, done, only, guest_crash(console))
    rows += list(extra)
    ok = ok and all(status != "FAIL" for _, status, _ in extra)
    if not ok or args.keep:
        with open(console, errors="replace") as f:
            tail = f.read()[-6000:]
        log(f"\n---- guest console ({console}), last lines ----\n{tail}")
    btf = (" without kernel BTF (--hide-btf)" if args.hide_btf else "") + \
        (" booted with psi=0" if args.psi_off else "")
    when = "re-judged" if took is None else f"{took:.0f} s"
    log(f"\n==== VM results: kernel {args.kernel}, {facts.get('kernel', '?')}{btf} ({when}; "
        f"guest init at {facts.get('init_uptime', '?')} s) ====")
    width = max((len(r[0]) for r in rows), default=10)
    for name, status, detail in rows:
        log(f"{status:4}  {name:{width}}  {detail}")
    # The failures once more, last: CI keeps only the end of a long output.
    failed = [r for r in rows if r[1] == "FAIL"]
    if failed:
        log(f"\n{len(failed)} of {len(rows)} scenarios failed on kernel {args.kernel}{btf}:")
        for name, _, detail in failed:
            log(f"FAILED  {name}  {detail}")
    if not rows:
        log("FAIL: the guest reported no scenario")
        return 1
    if not ok:
        return 1
    if all(r[1] == "SKIP" for r in rows):
        return SKIP_STATUS
    return 0


def run_bench(args, build: str, kernel: vmkernel.Kernel, busybox: str, cache: str) -> int:
    """--bench: one boot running the script alone; 0 when the guest finished it."""
    name = os.path.basename(args.bench).removesuffix(".sh")
    work = os.path.join(build, "vm-run", f"{args.kernel}-bench-{name}")
    console, results = os.path.join(work, "console.log"), os.path.join(work, "results.log")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    initrd = os.path.join(work, "initramfs.cpio")
    for n in build_initramfs(initrd, build, ["bench"], kernel, busybox, cache, args.bench):
        log(f"vm: note: {n}")
    swap_disk = os.path.join(work, "swap.img")
    with open(swap_disk, "wb") as f:
        f.truncate(SWAP_DISK_MB << 20)
    argv = qemu_argv(kernel, initrd, console, results, swap_disk, ["bench"], False,
                     mem=args.node_mem_mb)
    log("vm: $ " + " ".join(argv))
    rc, took = boot(argv, args.timeout, results)
    os.remove(swap_disk)
    with open(results, "rb") as f:
        _, _, done = parse_report(f.read().decode(errors="replace"))
    log(f"vm: qemu exit {rc} after {took:.1f} s; report {results}")
    if not done:
        with open(console, errors="replace") as f:
            log(f"vm: the guest did not finish the bench; its console's end:\n{f.read()[-4000:]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
