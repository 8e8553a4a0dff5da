"""Host checks of cachestat's VM scenarios (tests/vm/scenarios/cachestat.sh): a cold and a
warm read of the same 64 MiB of /dev/ram0 by dd (1 MiB reads), each watched by its own
`cachestat -j --per-file -p DD`, on a kernel without the filemap access tracepoints (6.1).

What the access fall-back counts there (Linux 6.1 mm/filemap.c filemap_read(), mm/memory.c
zap_pte_range()):
- read(2) calls folio_mark_accessed() for EVERY folio it copies; only the first folio of a
  batch is skipped, and only when the previous read ended inside it. dd's reads are 1 MiB at
  page-aligned offsets, so every page read is counted once, cold or warm: the same number the
  access tracepoints of 6.12+ give, so the host test's cold/warm assertions
  (tests/runtime/test_cachestat.py check_cold/check_warm, 5%) are asserted unchanged. It is
  NOT a lower bound of one call per folio batch.
- Unmapping a file page whose PTE is young marks it accessed too: dd's own program text at
  its exit, a few hundred pages counted under dd's PID but in another file (seen: 333 pages
  of one initramfs file, 0:2 ino 13, in both reads). -f separates
  them: the ram disk's row (the file that took the misses) must count the pages read within
  RAMDISK_TOL, and the totals above absorb the rest within the 5%.
"""
from __future__ import annotations

from tolerances import PAGE_CACHE_PAGES, RAMDISK_PAGES
from memlat_test import Failure, Test, field, log
from vmcheck import Block, checker, hook_path, show_hooks

# As the host test (tolerances.py): read-ahead, and dd's own exec and exit (see above).
TOL = PAGE_CACHE_PAGES.rel
RAMDISK_TOL = RAMDISK_PAGES.rel


def _summary(t: Test, b: Block, phase: str) -> tuple[dict, str]:
    res = b.tool(f"{phase}.tool")
    reader = b.tool(f"{phase}.reader")
    t.check_eq(f"{phase}: dd exit status", 0, reader.rc)
    t.check_eq(f"{phase}: cachestat exit status after SIGINT", 0, res.rc)
    objs = [o for o in res.json_lines() if o.get("type") == "summary"]
    if len(objs) != 1:
        raise Failure(f"{phase}: cachestat printed {len(objs)} summary objects\n"
                      f"{res.describe()}")
    s = {**objs[0]["total"], **{k: objs[0][k] for k in ("files", "processes") if k in objs[0]}}
    log(f"  {phase}: misses {s.get('misses')} accesses {s.get('accesses')} hits "
        f"{s.get('hits')} hit_ratio_pct {s.get('hit_ratio_pct')} dirties {s.get('dirties')}")
    for f in s.get("files", []):
        log(f"    {phase} -f: {f.get('dev')} {f.get('ino')} accesses {f.get('accesses')} "
            f"misses {f.get('misses')} path {f.get('path')}")
    return s, res.stderr


def _file_row(rows: list[dict], key: tuple) -> dict:
    for f in rows:
        if (f.get("dev"), f.get("ino")) == key:
            return f
    return {}


@checker("cachestat.cold_warm")
def cold_warm(t: Test, b: Block) -> None:
    pages = int(b.meta["pages"])
    cold, err = _summary(t, b, "cold")
    warm, _ = _summary(t, b, "warm")
    show_hooks(err)
    tol = f"{TOL * 100:g}% of the pages read"
    # Misses and dirties need no access hook: the same on every path.
    t.check_close("cold: MISSES vs the pages read", pages, field(t, cold, "misses", "cold"),
                  rel_tol=TOL)
    t.check_le("warm: MISSES", round(pages * TOL), field(t, warm, "misses", "warm"), tol)
    t.check_eq("DIRTIES of a read-only workload", (0, 0), (cold.get("dirties"),
                                                          warm.get("dirties")))
    probe = "(accesses): using "
    if b.variant == "no_accesses":
        t.check_in("-v: no way to count accesses", "(accesses): not traced", err, "stderr")
        t.check_eq("HITS without an access hook", (None, None), (cold.get("hits"),
                                                                 warm.get("hits")))
        return
    fn = ("folio_mark_accessed" if "folio_mark_accessed" in b.facts.get("kernel_functions", "")
          else "mark_page_accessed")
    # The scenarios disable the filemap tracepoints (kernels with them prefer them).
    path = hook_path(t, b, b.variant, err)
    t.check_in(f"-v: accesses through the {fn}/{path} fall-back",
               f"{probe}{fn}/{path}", err, "stderr")
    # The host test's assertions (check_cold, check_warm), same tolerance.
    t.check_close("cold: ACCESSES vs the pages read", pages, field(t, cold, "accesses", "cold"),
                  rel_tol=TOL)
    t.check_le("cold: HITRATIO %", 5.0, field(t, cold, "hit_ratio_pct", "cold"))
    t.check_close("warm: HITS vs the pages read", pages, field(t, warm, "hits", "warm"),
                  rel_tol=TOL)
    t.check_ge("warm: HITRATIO %", 95.0, field(t, warm, "hit_ratio_pct", "warm"))
    # The ram disk alone (-f): one access per page read, cold and warm.
    cold_files, warm_files = cold.get("files", []), warm.get("files", [])
    if not cold_files:
        raise Failure("cold: no -f rows in the summary")
    disk = max(cold_files, key=lambda f: f.get("misses", 0))
    key = (disk.get("dev"), disk.get("ino"))
    t.check_close("cold: ram disk's ACCESSES (-f) vs the pages read", pages,
                  field(t, disk, "accesses", "the ram disk's -f row"), rel_tol=RAMDISK_TOL)
    t.check_close("warm: ram disk's ACCESSES (-f) vs the pages read", pages,
                  field(t, _file_row(warm_files, key), "accesses",
                        "the ram disk's warm -f row"), rel_tol=RAMDISK_TOL)
