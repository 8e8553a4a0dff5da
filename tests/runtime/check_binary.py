#!/usr/bin/env python3
"""Build check: a release tool binary is fully static, under 2 MB, and its --help runs.

usage: check_binary.py BINARY STATIC(ON|OFF)
With STATIC=OFF (the developer build) only the --help check applies."""
import os
import subprocess
import sys

MAX_BYTES = 2 * 1024 * 1024


def main() -> int:
    binary, static = sys.argv[1], sys.argv[2].upper() in ("ON", "1", "TRUE", "YES")
    failures = []
    with open(binary, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF":
        failures.append(f"{binary} is not an ELF file")
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
        if size >= MAX_BYTES:
            failures.append(f"{binary} is {size} bytes, not under {MAX_BYTES}")
    help_run = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=10)
    if help_run.returncode != 0 or "Usage:" not in help_run.stdout:
        failures.append(f"{binary} --help exited {help_run.returncode}:\n{help_run.stdout}"
                        f"{help_run.stderr}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
