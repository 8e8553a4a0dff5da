"""cmake/libbpf/0003 finds the CO-RE candidates of a relocation through an index of the target
BTF's names instead of libbpf's scan of every type: the same candidates in the same order, and
the same final instructions, or the patch is wrong. core_candidates (tests/libbpf/), built
against memlat's libbpf (core_candidates_indexed) and against the same libbpf without 0003
(core_candidates_scan), relocates BPF objects against a BTF and prints both. Used by
runtime.libbpf_index_candidates (the recorded kernels' BTF and the host's) and by the VM runner
(each x86 guest kernel's BTF, libbpf.core_candidates)."""
from __future__ import annotations

import difflib
import os

from memlat_test import Test, log, run


def compare_candidates(t: Test, what: str, btf: str, objects: list[str], tests_dir: str) -> None:
    """Relocates OBJECTS against BTF with both builds of core_candidates in TESTS_DIR and
    checks that their outputs are the same, line for line, and not vacuous."""
    out = {}
    for variant in ("indexed", "scan"):
        res = run([os.path.join(tests_dir, f"core_candidates_{variant}"), btf, *objects],
                  timeout=120)
        t.require(res.rc == 0, f"{what}: core_candidates_{variant} ran", "0",
                  f"{res.rc}: {res.stderr[-300:]}")
        out[variant] = res.stdout.splitlines()
    tried = [line for line in out["scan"] if " candidate #" in line]
    per_object = [line for line in out["scan"] if line.startswith("object ")]
    log(f"  {what}: {len(tried)} candidates tried by {len(objects)} objects; "
        + "; ".join(line.split(": ", 1)[0][7:] + ": " + line.split(", ")[-1]
                    for line in per_object))
    # Not vacuous: every object has relocations, and each found candidates.
    t.check_eq(f"{what}: objects relocated", len(objects), len(per_object))
    t.check_eq(f"{what}: objects whose relocations tried no candidate", [],
               [line for line in per_object if line.endswith(" 0 candidate lines")])
    diff = [line for line in difflib.unified_diff(out["scan"], out["indexed"], lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    t.check_eq(f"{what}: lines of the index's output unlike the scan's (of "
               f"{len(out['scan'])})", [], diff[:10])
