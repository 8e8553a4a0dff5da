#!/usr/bin/env python3
"""Build check: a release binary is fully static, under its size budget, built for the
expected machine, and its --help runs; a tool's BINARY is a symbolic link to the multi-call
memlat (--link-to memlat), run through the link.

usage: check_binary.py [--machine x86_64|aarch64] [--emulator PROG] [--max-bytes N]
                       [--link-to NAME] BINARY STATIC(ON|OFF)
With STATIC=OFF (the developer build) only the machine and --help checks apply. --emulator
runs a cross-built binary (qemu-aarch64-static); an empty one means the build machine cannot
run it: the other checks are made and --help is reported as skipped (exit 77)."""
import argparse
import os
import struct
import subprocess
import sys

MAX_BYTES = 2 * 1024 * 1024
SKIP_STATUS = 77
# ELF e_machine values (elf.h: EM_X86_64, EM_AARCH64).
MACHINES = {"x86_64": 62, "aarch64": 183}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--machine", choices=sorted(MACHINES))
    ap.add_argument("--emulator")
    ap.add_argument("--max-bytes", type=int, default=MAX_BYTES)
    ap.add_argument("--link-to")
    ap.add_argument("binary")
    ap.add_argument("static")
    a = ap.parse_args()
    binary, static = a.binary, a.static.upper() in ("ON", "1", "TRUE", "YES")
    failures = []
    if a.link_to is not None and (not os.path.islink(binary)
                                  or os.readlink(binary) != a.link_to):
        failures.append(f"{binary} is not a symbolic link to {a.link_to}")
    runnable = True  # an executable for the machine the check expects
    with open(binary, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF":
        failures.append(f"{binary} is not an ELF file")
        runnable = False
    elif a.machine:
        machine, = struct.unpack_from("<H", data, 18)
        if machine != MACHINES[a.machine]:
            failures.append(f"{binary} is built for ELF machine {machine}, not {a.machine} "
                            f"({MACHINES[a.machine]})")
            runnable = False
    if static:
        # A dynamic executable has a PT_INTERP program header and DT_NEEDED entries.
        headers = subprocess.run(["readelf", "-lW", binary], capture_output=True, text=True,
                                 check=True).stdout
        dynamic = subprocess.run(["readelf", "-dW", binary], capture_output=True, text=True,
                                 check=True).stdout
        if "INTERP" in headers or "NEEDED" in dynamic:
            failures.append(f"{binary} is dynamically linked:\n{headers}\n{dynamic}")
        size = os.path.getsize(binary)
        print(f"{os.path.basename(binary)}: {size} bytes")
        if size >= a.max_bytes:
            failures.append(f"{binary} is {size} bytes, not under {a.max_bytes}")
    skipped = ""
    if not runnable:
        pass  # running it would say nothing more
    elif a.emulator is not None and not a.emulator:
        skipped = (f"--help not run: {binary} is for {a.machine} and there is no emulator "
                   f"(install qemu-user-static)")
    else:
        argv = ([a.emulator] if a.emulator else []) + [binary, "--help"]
        help_run = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        if help_run.returncode != 0 or "Usage:" not in help_run.stdout:
            failures.append(f"{' '.join(argv)} exited {help_run.returncode}:\n"
                            f"{help_run.stdout}{help_run.stderr}")
    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    if skipped:
        print("skipped:", skipped)
        return SKIP_STATUS
    return 0


if __name__ == "__main__":
    sys.exit(main())
