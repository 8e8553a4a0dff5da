"""Host checks of cachestat's VM scenarios (tests/vm/scenarios/cachestat.sh): a cold and a
warm read of the same 64 MiB of /dev/ram0, on a kernel without filemap access tracepoints."""
from __future__ import annotations

from memlat_test import Failure, Test, log
from vmcheck import Block, checker, show_hooks

# Read-ahead may add pages past what dd asked for (the read-ahead window, at most a few
# hundred pages) or find some already cached: 5% either way.
MISS_TOL = 0.05
# Without the access tracepoints, 6.1's filemap_read() marks the first folio of each batch
# of up to 15 folios (PAGEVEC_SIZE) accessed: accesses are a lower bound of at least
# pages/15 for a read of base-page folios (block-device page cache).
BATCH = 15


def _summary(t: Test, b: Block, phase: str) -> tuple[dict, str]:
    res = b.tool(f"{phase}.tool")
    reader = b.tool(f"{phase}.reader")
    t.check_eq(f"{phase}: dd exit status", 0, reader.rc)
    t.check_eq(f"{phase}: cachestat exit status after SIGINT", 0, res.rc)
    objs = [o for o in res.json_lines() if "summary" in o]
    if len(objs) != 1:
        raise Failure(f"{phase}: cachestat printed {len(objs)} summary objects\n"
                      f"{res.describe()}")
    s = objs[0]["summary"]
    log(f"  {phase}: misses {s.get('misses')} accesses {s.get('accesses')} hits "
        f"{s.get('hits')} dirties {s.get('dirties')}")
    return s, res.stderr


@checker("cachestat.cold_warm")
def cold_warm(t: Test, b: Block) -> None:
    pages = int(b.meta["pages"])
    cold, err = _summary(t, b, "cold")
    warm, _ = _summary(t, b, "warm")
    show_hooks(err)
    probe = "(accesses): using "
    if b.variant == "no_accesses":
        t.check_in("-v: no way to count accesses", "(accesses): not traced", err, "stderr")
        t.check_eq("hits without an access hook", (None, None), (cold.get("hits"),
                                                                 warm.get("hits")))
    else:
        fn = ("folio_mark_accessed" if "folio_mark_accessed" in b.facts.get("kernel_functions",
                                                                           "")
              else "mark_page_accessed")
        if "filemap/mm_filemap_get_pages" in b.facts.get("tracepoints", ""):
            t.check_in("-v: accesses from the filemap tracepoints", probe, err, "stderr")
        else:
            t.check_in(f"-v: accesses through {fn}/{b.variant}", f"{probe}{fn}/{b.variant}",
                       err, "stderr")
        t.check_ge("warm: hits (a lower bound: one per batch of folios)", pages // BATCH,
                   warm.get("hits") or 0, f"{pages} pages / {BATCH}")
        t.check_le("warm: hits", pages, warm.get("hits") or 0, "the pages read")
        t.check_le("cold: hits", round(pages * MISS_TOL), cold.get("hits") or 0,
                   f"{MISS_TOL * 100:g}% of the pages read")
    t.check_close("cold: misses vs the pages read", pages, cold.get("misses", 0),
                  rel_tol=MISS_TOL)
    t.check_le("warm: misses", round(pages * MISS_TOL), warm.get("misses", 0),
               f"{MISS_TOL * 100:g}% of the pages read")
    t.check_eq("dirties of a read-only workload", (0, 0), (cold.get("dirties"),
                                                          warm.get("dirties")))
