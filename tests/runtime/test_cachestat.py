#!/usr/bin/env python3
"""Runtime tests of cachestat: page-cache reads and writes of our own files, on the live kernel.

Files live in the build directory (a disk file system) and are evicted from the page cache with
posix_fadvise(DONTNEED) on those files only (after fsync): the machine's page cache is left
alone. The reader (file_reader --wait) finishes starting up, prints "ready" and waits, so a
cachestat given its PID counts only its reads of the file, not the dynamic loader's.

Oracles: the file size (a 64 MiB file is 16384 pages: every page is missed once when cold, and
looked up once per read pass), the kernel's own trace (an ftrace instance of our own records
mm_filemap_add_to_page_cache for the reader's PID, summed as 1 << order pages: cachestat's
MISSES must equal it exactly), and the bytes the writer wrote (16 MiB = 4096 dirtied pages).
Tolerance 5% unless stated otherwise.
"""
import os
import re
import select
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tolerances import PAGE_CACHE_PAGES  # noqa: E402
from memlat_test import (Failure, FtraceOracle, MemoryCgroup, PerfStat, Test, TestFile,  # noqa: E402
                         Tool,
                         binary, build_dir, check_bad_arguments, check_help, process_storm,
                         check_variant_chosen, field, log, main, own_name, read_file, run_workload,
                         scenario, skip, variant_env, variant_scenarios,
                         shared_bad_arguments)

FILE_SIZE = 64 << 20
FILE_PAGES = FILE_SIZE // 4096
WRITE_MIB = 16
WRITE_PAGES = WRITE_MIB * 256
TOL = PAGE_CACHE_PAGES.rel  # tolerances.py


def require_page_size() -> None:
    if os.sysconf("SC_PAGE_SIZE") != 4096:
        skip("the expected page counts assume 4 KiB pages")


# ---------------------------------------------------------------- files and workloads

def data_file(cold: bool = False) -> TestFile:
    """The file the reads are measured on: FILE_SIZE bytes in the build directory (with `cold`,
    evicted from the page cache on entry)."""
    return TestFile(FILE_SIZE, "cachestat_data", cold=cold)


def written_file_path() -> str:
    """Where cache_writer writes its WRITE_MIB MiB (in the build directory; removed by the
    scenario)."""
    return os.path.join(build_dir(), own_name("cachestat_write") + ".dat")


class Reader:
    """file_reader --wait: started, ready (its start-up done), then released with go()."""

    def __init__(self, path: str, *args: str):
        self.argv = [binary("file_reader"), "--file", path, "--wait", *args]

    def __enter__(self) -> "Reader":
        log(f"$ {' '.join(self.argv)}")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True)
        self.pid = self.proc.pid
        line = self.proc.stdout.readline().decode()
        if line.strip() != "ready":
            self.proc.kill()
            raise Failure(f"file_reader did not get ready: {line!r} "
                          f"{self.proc.stderr.read().decode()!r}")
        return self

    def go(self, timeout: float = 60) -> None:
        """Lets the reader read; returns when it has (with --hold: it lives on, the file
        open, until the context ends)."""
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()
        if "--hold" in self.argv:
            self.proc.stdin.close()
            ready = select.select([self.proc.stdout], [], [], timeout)[0]
            out = self.proc.stdout.readline().decode() if ready else ""
            if not re.search(r"pid=\d+ iterations=\d+", out):
                self.proc.kill()
                raise Failure(f"file_reader failed: {out!r} "
                              f"{self.proc.stderr.read().decode()!r}")
            log(f"  reader {self.pid}: {out.strip()} (holds the file open)")
            return
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise Failure("file_reader did not finish")
        if self.proc.returncode != 0 or not re.search(r"pid=\d+ iterations=\d+", out.decode()):
            raise Failure(f"file_reader failed: {out.decode()!r} {err.decode()!r}")
        log(f"  reader {self.pid}: {out.decode().strip()}")

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


ADDED_TO_PAGE_CACHE = "filemap/mm_filemap_add_to_page_cache"


def pages_added(oracle: FtraceOracle) -> int:
    """Stops the oracle of ADDED_TO_PAGE_CACHE; the pages added: 1 << order summed over the
    folios added."""
    added = oracle.stop()["mm_filemap_add_to_page_cache"]
    orders = [int(e["order"]) for e in added if "order" in e]
    if not orders and added:
        skip("this kernel's mm_filemap_add_to_page_cache has no order field")
    return sum(1 << o for o in orders)


def run_total(summary: dict) -> dict:
    """cachestat's exit summary as one dict: its "total" (the run's counts and seconds) with
    its rows ("processes" or "files", with -P or -f) beside them."""
    return {**summary["total"], **{k: summary[k] for k in ("processes", "files") if k in summary}}


def summary_of(tool: Tool, t: Test) -> dict:
    res = tool.result
    t.check_eq(f"{os.path.basename(res.argv[0])} {' '.join(res.argv[1:])}: exit status", 0,
               res.rc)
    objs = [j for j in res.json_lines() if j.get("type") == "summary"]
    t.require(len(objs) == 1, "one exit summary (JSON)", "1", len(objs))
    return run_total(objs[0])


def measure_read(t: Test, f: TestFile, *reader_args: str, env: dict = None,
                 tool_args=(), oracle: bool = False) -> dict:
    """Reads `f` once with a gated reader while `cachestat -j -p READER` runs; returns the
    summary (and checks MISSES against the ftrace oracle when asked). The summary also holds
    `_resident_before` (the file's pages in the page cache before the read, from mincore) and
    `_added` (the oracle's pages added by the reader, or None)."""
    resident_before = f.resident_pages()
    with Reader(f.path, *reader_args) as reader:
        oracle_ctx = FtraceOracle([ADDED_TO_PAGE_CACHE], reader.pid, buffer_kb=8192) \
            if oracle else None
        if oracle_ctx:
            oracle_ctx.__enter__()
        try:
            with Tool("cachestat", "-j", "-p", str(reader.pid), *tool_args, env=env) as tool:
                reader.go()
                time.sleep(0.2)
            oracle_pages = pages_added(oracle_ctx) if oracle_ctx else None
        finally:
            if oracle_ctx:
                oracle_ctx.__exit__(None, None, None)
    s = summary_of(tool, t)
    s["_tool"] = tool
    s["_resident_before"] = resident_before
    s["_added"] = oracle_pages
    log(f"  summary: accesses={s['accesses']} hits={s['hits']} misses={s['misses']} "
        f"dirties={s['dirties']} hit_ratio_pct={s['hit_ratio_pct']}; the file's pages resident "
        f"before: {resident_before} of {FILE_PAGES}, added by the reader (ftrace): "
        f"{oracle_pages}")
    if oracle_pages is not None:
        t.check_eq("MISSES vs the ftrace oracle (pages added by the reader, exact)",
                   oracle_pages, s["misses"])
    return s


def check_cold(t: Test, s: dict, what: str = "cold read") -> None:
    t.check_close(f"{what}: MISSES vs the file's pages", FILE_PAGES, s["misses"], TOL)
    t.check_close(f"{what}: ACCESSES vs the file's pages", FILE_PAGES, s["accesses"], TOL)
    t.check_le(f"{what}: HITRATIO %", 5.0, s["hit_ratio_pct"])


def warm_pages(t: Test, s: dict, what: str) -> int:
    """The pages a warm read (measured with the oracle) should hit: the file's pages less those
    the kernel had to add for the reader. A machine under memory pressure may evict some of the
    file between two reads (a CI run once lost 1082 of 16384 pages between the cold and the warm
    read); the oracle counts them, so the checks hold either way. Skips if more than half was
    evicted: the read is then no longer warm."""
    if s["_added"] is None:
        raise Failure(f"{what}: measured without the ftrace oracle")
    # mincore's view and the oracle's must agree: the pages not resident before the read are
    # among those the kernel added for it (a mincore that saw nothing would skip below).
    t.check_le(f"{what}: pages not resident before (mincore) <= pages added (ftrace) + 5%",
               s["_added"] + TOL * FILE_PAGES, FILE_PAGES - s["_resident_before"])
    if s["_resident_before"] < FILE_PAGES // 2:
        skip(f"{what}: only {s['_resident_before']} of the file's {FILE_PAGES} pages were still "
             f"in the page cache before the read (memory pressure)")
    if s["_added"]:
        log(f"  {what}: the kernel added {s['_added']} of the file's pages again "
            f"({FILE_PAGES - s['_resident_before']} were not resident before the read)")
    return FILE_PAGES - s["_added"]


def check_warm(t: Test, s: dict, what: str = "warm read") -> None:
    # MISSES are checked exactly against the oracle by measure_read.
    expected_hits = warm_pages(t, s, what)
    t.check_close(f"{what}: HITS vs the file's pages less those the kernel added",
                  expected_hits, s["hits"], TOL, abs_tol=TOL * FILE_PAGES)
    t.check_ge(f"{what}: HITRATIO % (>= the resident share - 5)",
               100.0 * expected_hits / FILE_PAGES - 5, s["hit_ratio_pct"])


# ---------------------------------------------------------------- scenarios

@scenario("cachestat_cold_read", btf_file=True, unprivileged=True)
def _(t: Test):
    require_page_size()
    with data_file(cold=True) as f:
        s = measure_read(t, f, oracle=True)
    check_cold(t, s)


@scenario("cachestat_warm_read")
def _(t: Test):
    require_page_size()
    with data_file() as f:
        f.warm()
        s = measure_read(t, f, oracle=True)
        check_warm(t, s)
        t.check_eq("warm read: DIRTIES", 0, s["dirties"])
        # Two passes look every page up twice: the read cursor de-duplicates within a read,
        # never across reads.
        s2 = measure_read(t, f, "--passes", "2", oracle=True)
        t.check_close("two warm passes: HITS vs twice the file's pages, less those the kernel "
                      "added", 2 * FILE_PAGES - s2["_added"], s2["hits"], TOL)


@scenario("cachestat_mmap")
def _(t: Test):
    require_page_size()
    with data_file(cold=True) as f:
        cold = measure_read(t, f, "--mmap", oracle=True)
        warm = measure_read(t, f, "--mmap", oracle=True)
    t.check_close("cold mmap read: MISSES vs the file's pages", FILE_PAGES, cold["misses"], TOL)
    t.check_le("cold mmap read: HITRATIO %", 5.0, cold["hit_ratio_pct"])
    t.check_ge("cold mmap read: ACCESSES (faults and fault-around windows seen)", 1,
               cold["accesses"])
    # Kernels map whole large folios at a fault, beyond the fault-around window the
    # tracepoint reports, so mmap accesses are a lower bound of the pages touched: the check
    # is that hits are counted, not how many.
    t.check_ge("warm mmap read: HITS", 1, warm["hits"])
    t.check_le("warm mmap read: HITS <= pages touched (+5%)", FILE_PAGES * (1 + TOL),
               warm["hits"])
    # MISSES are checked exactly against the oracle by measure_read.
    t.check_ge("warm mmap read: HITRATIO % (>= the resident share - 5)",
               100.0 * warm_pages(t, warm, "warm mmap read") / FILE_PAGES - 5, warm["hit_ratio_pct"])


@scenario("cachestat_dirties")
def _(t: Test):
    require_page_size()
    path = written_file_path()
    try:
        for extra in ([], ["--fsync"]):
            # Held before exec (so the tool can be given its PID): the writer's own start-up
            # is counted too, but it dirties nothing and its library pages are cached.
            proc = subprocess.Popen(["/bin/sh", "-c", 'read -r _go && exec "$0" "$@"',
                                     binary("cache_writer"), "--file", path, "--mib",
                                     str(WRITE_MIB), *extra],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    start_new_session=True)
            try:
                with Tool("cachestat", "-j", "-p", str(proc.pid)) as tool:
                    proc.stdin.write(b"go\n")
                    proc.stdin.flush()
                    out, _ = proc.communicate(timeout=60)
                    log(f"  writer {proc.pid} {' '.join(extra)}: {out.decode().strip()}")
                    time.sleep(0.2)
            finally:
                if proc.poll() is None:
                    proc.kill()
            s = summary_of(tool, t)
            what = f"write of {WRITE_MIB} MiB{' + fsync' if extra else ''}"
            t.check_close(f"{what}: DIRTIES vs the pages written", WRITE_PAGES, s["dirties"],
                          TOL)
            # A new file's pages are created by the write: they count as misses.
            t.check_close(f"{what}: MISSES (pages the write created)", WRITE_PAGES,
                          s["misses"], TOL)
            os.unlink(path)
    finally:
        if os.path.exists(path):
            os.unlink(path)


@scenario("cachestat_per_process", unprivileged=True)
def _(t: Test):
    require_page_size()
    with data_file(cold=True) as f:
        dev, ino = f.dev_ino()
        with Reader(f.path) as cold, Reader(f.path) as warm, \
                Tool("cachestat", "-P", "-j") as procs, Tool("cachestat", "--per-file", "-j") as files:
            cold.go()
            warm.go()
            time.sleep(0.3)
    p = {r["pid"]: r for r in summary_of(procs, t)["processes"]}
    t.require(cold.pid in p and warm.pid in p, "rows for both readers in -P",
              f"{cold.pid} and {warm.pid}", sorted(p)[:20])
    c, w = p[cold.pid], p[warm.pid]
    t.check_eq("COMM of the reader", "file_reader", c["comm"])
    t.check_eq("UID of the reader", os.getuid(), c["uid"])
    t.check_close("cold reader: MISSES vs the file's pages", FILE_PAGES, c["misses"], TOL)
    t.check_le("cold reader: READ_HIT%", 5.0, c["hit_ratio_pct"])
    t.check_close("warm reader: HITS vs the file's pages", FILE_PAGES, w["hits"], TOL)
    t.check_ge("warm reader: READ_HIT%", 95.0, w["hit_ratio_pct"])
    rows = [r for r in summary_of(files, t)["files"] if r["dev"] == dev and r["ino"] == ino]
    t.require(len(rows) == 1, f"a -f row for the file ({dev} inode {ino})", "1", len(rows))
    # Every page of the file missed (all processes, from -f) is attributed to the cold reader,
    # and every page looked up to the two readers: none went to another process.
    t.check_close("file's MISSES (all processes) vs the cold reader's (1%)", rows[0]["misses"],
                  c["misses"], 0.01)
    t.check_close("file's ACCESSES (all processes) vs the readers' (2%)", rows[0]["accesses"],
                  c["accesses"] + w["accesses"], 0.02)
    # Rows come busiest first. (Not "the busiest is a reader": on a machine that compiles
    # beside the test, a compiler reading its headers was busier once.)
    activity = [(r["accesses"] or 0) + r["misses"] + r["dirties"]
                for r in summary_of(procs, t)["processes"]]
    t.check(activity == sorted(activity, reverse=True),
            "-P rows sorted by activity (accesses + misses + dirties), busiest first",
            "non-increasing", activity[:10])


COUNT_FIELDS = ("accesses", "hits", "misses", "dirties")


def check_rows_add_up(t: Test, what: str, total: dict, rows: list) -> None:
    """Every event counts in the total and in its row in the same epoch (cachestat.bpf.c
    count()): the rows of an interval or of the summary add up to its total exactly."""
    for name in COUNT_FIELDS:
        t.check_eq(f"{what}: sum of the rows' {name} vs the total", field(t, total, name),
                   sum(field(t, r, name) for r in rows))


def prefetch(f: TestFile) -> int:
    """Asks the kernel to read all of `f` ahead (POSIX_FADV_WILLNEED, 2 MiB at a time: one call
    added only 2,048 of 16,384 pages on 6.18) from this process, which then reads none of it:
    misses that no access follows. Returns the pages it made resident (mincore)."""
    before = f.resident_pages()
    fd = os.open(f.path, os.O_RDONLY)
    try:
        for off in range(0, FILE_SIZE, 2 << 20):
            os.posix_fadvise(fd, off, 2 << 20, os.POSIX_FADV_WILLNEED)
    finally:
        os.close(fd)
    deadline = time.monotonic() + 20
    while f.resident_pages() < FILE_PAGES and time.monotonic() < deadline:
        time.sleep(0.05)
    return f.resident_pages() - before


TOTAL_LINE = re.compile(r"^Total over [\d.]+ s: HITS (\d+) MISSES (\d+) DIRTIES (\d+) ", re.M)
PROC_LINE = re.compile(r"^\s*(\d+)\s+(\d+)\s+(.{16})\s+(\d+)\s+(\d+)\s+(\d+)\s+\S+$", re.M)


@scenario("cachestat_totals_are_sums")
def _(t: Test):
    """Issue 42: HITS were ACCESSES - MISSES over the machine, clamped at 0, so one process
    prefetching a file zeroed everyone's hits while the -P and -f rows showed thousands.
    Here a warm reader hits the cache while this process prefetches a cold file it never reads:
    the rows of -P and -f (JSON, every interval and the summary) and of -P's text summary add
    up to their totals exactly, and the machine-wide hits hold at least the warm reader's,
    which its row holds against the file's size."""
    require_page_size()
    with data_file() as warm_file, TestFile(FILE_SIZE, "cachestat_prefetched", cold=True) as cold:
        warm_file.warm()
        with Reader(warm_file.path) as reader, \
                Tool("cachestat", "-P", "-j", "0.5") as procs, \
                Tool("cachestat", "--per-file", "-j", "0.5") as files, \
                Tool("cachestat", "-j", "0.5") as machine, \
                Tool("cachestat", "-P", "0.5") as text:
            prefetched = prefetch(cold)
            time.sleep(0.6)  # the prefetch and the reads in intervals of their own too
            reader.go()
            time.sleep(0.7)
    log(f"  this process ({os.getpid()}) prefetched {prefetched} pages; reader {reader.pid}")
    t.require(prefetched >= FILE_PAGES // 2, "pages the prefetch made resident (mincore)",
              f">= {FILE_PAGES // 2}", prefetched)
    for tool, rows_name in ((procs, "processes"), (files, "files")):
        view = "-P" if rows_name == "processes" else "--per-file"
        intervals = [o for o in tool.result.json_lines() if o.get("type") == "interval"]
        t.check_ge(f"{view}: intervals printed", 2, len(intervals))
        for n, o in enumerate(intervals):
            t.check_eq(f"{view} interval {n}: table_full", 0, o["table_full"])
            check_rows_add_up(t, f"{view} interval {n}", o["total"], o[rows_name])
        s = summary_of(tool, t)
        last = [j for j in tool.result.json_lines() if j.get("type") == "summary"][0]
        # left_out_total: what the listed rows do not hold; nothing here (no row dropped, no
        # table full), so every count of it is 0.
        t.check_eq(f"{view} summary: left_out_total (rows and counts)",
                   {"rows": 0, **{name: 0 for name in COUNT_FIELDS}},
                   {k: v for k, v in (last.get("left_out_total") or {}).items()
                    if k == "rows" or k in COUNT_FIELDS})
        t.check_eq(f"{view} summary: table_full", 0, last["table_full"])
        check_rows_add_up(t, f"{view} summary", s, s[rows_name])
    by_pid = {r["pid"]: r for r in summary_of(procs, t)["processes"]}
    t.require(reader.pid in by_pid and os.getpid() in by_pid,
              "-P rows for the reader and for this process", f"{reader.pid}, {os.getpid()}",
              sorted(by_pid)[:20])
    w, me = by_pid[reader.pid], by_pid[os.getpid()]
    t.check_close("warm reader: HITS vs the file's pages", FILE_PAGES, w["hits"], TOL)
    # Python's own lookups (the interpreter reading its modules) are all it may hit.
    t.check_close("prefetcher: MISSES vs the pages it made resident (mincore)", prefetched,
                  me["misses"], TOL)
    t.check_le("prefetcher: HITS (it read none of the file)", TOL * FILE_PAGES, me["hits"])
    m = summary_of(machine, t)
    t.check_ge("machine-wide HITS >= the warm reader's (a prefetch subtracts from no one)",
               w["hits"] * (1 - TOL), m["hits"])
    err = text.result.stderr
    total = TOTAL_LINE.search(err)
    t.require(total is not None, "-P text: the summary's Total line", "Total over ...", err[-400:])
    rows = [r for r in PROC_LINE.findall(err[total.end():])]
    t.check_ge("-P text summary: rows", 2, len(rows))
    t.check("not listed" not in err and "missing from the rows" not in err,
            "-P text: no rows left out", "none", err[-400:])
    for i, field in enumerate(("HITS", "MISSES", "DIRTIES")):
        t.check_eq(f"-P text summary: sum of the rows' {field} vs its Total line",
                   int(total.group(1 + i)), sum(int(r[3 + i]) for r in rows))


STORM_ENTRIES = 1024      # cachestat --max-entries for the storm
STORM_PROCESSES = 3 * STORM_ENTRIES
STORM_RATE = 400          # processes started per second at most: ~400 per interval


@scenario("cachestat_process_storm")
def _(t: Test):
    """Many short-lived processes under -P with a small table: each interval's rows must be
    that interval's processes and add up to its events. The table used to keep every process
    of the run, filled, and later intervals had no rows (issue 23)."""
    with TestFile(64 << 10, "cachestat_storm") as f:
        f.warm()
        with Tool("cachestat", "-P", "-j", "--max-entries", str(STORM_ENTRIES), "1") as tool:
            time.sleep(1.2)
            started = time.monotonic()
            # Until the count is reached, on a slow or busy machine too (measured: 1,842
            # processes in 20 s while other work loaded a 2-CPU machine); ctest allows 120 s.
            readers = process_storm(f.path, STORM_PROCESSES, STORM_RATE, started + 75)
            took = time.monotonic() - started
            time.sleep(1.2)
    log(f"  {readers} file_reader processes in {took:.1f} s")
    t.check_eq("exit status", 0, tool.result.rc)
    t.require(readers > 2 * STORM_ENTRIES, "processes started (more than the table holds, "
              "twice)", f"> {2 * STORM_ENTRIES}", readers)
    intervals = [o for o in tool.result.json_lines() if o.get("type") == "interval"]
    t.check_ge("intervals printed", int(took), len(intervals))
    seen = 0
    for n, o in enumerate(intervals):
        rows, total = o["processes"], o["total"]
        storm_rows = sum(1 for r in rows if r["comm"] == "file_reader")
        seen += storm_rows
        log(f"  interval {n}: {len(rows)} rows ({storm_rows} file_reader), table_full "
            f"{o['table_full']}")
        t.check_eq(f"interval {n}: events the table had no room for", 0, o["table_full"])
        check_rows_add_up(t, f"interval {n}", total, rows)
    t.check_ge("file_reader rows over all intervals (one per process) vs processes started",
               round(0.98 * readers), seen)
    # The summary keeps at most --max-entries processes (twice as many were run): the rows it
    # drops are counted in left_out, rows and counts, so that the two add up to its totals.
    summary = summary_of(tool, t)
    left = [j for j in tool.result.json_lines()
            if j.get("type") == "summary"][0].get("left_out_total") or {}
    t.check_ge("summary: rows left out (more processes than it keeps)", 1, left.get("rows", 0))
    for name in COUNT_FIELDS:
        t.check_eq(f"summary: the rows' {name} + left_out's vs the total", summary[name],
                   sum(r[name] for r in summary["processes"]) + left.get(name, 0))


PER_FILE_PASSES = 600


@scenario("cachestat_per_file", unprivileged=True)
def _(t: Test):
    require_page_size()
    with data_file() as f:
        f.warm()
        dev, ino = f.dev_ino()
        # The reader holds the file open until the tools have printed their summaries: the
        # path is found in its /proc/PID/fd however fast it read. (Without --hold, 60 passes
        # took under 0.2 s in a CI run: all fell in one interval, which ended after the
        # reader had exited, and that text run had no path to print.)
        with Reader(f.path, "--passes", str(PER_FILE_PASSES), "--hold") as reader:
            with Tool("cachestat", "--per-file", "-j", "-p", str(reader.pid), "0.2") as tool, \
                    Tool("cachestat", "--per-file", "-p", str(reader.pid), "0.2") as text:
                reader.go()
                time.sleep(0.3)
    rows = summary_of(tool, t)["files"]
    mine = [r for r in rows if r["dev"] == dev and r["ino"] == ino]
    t.require(len(mine) == 1, f"a row for the file ({dev} inode {ino})", "1", len(mine))
    t.check_close(f"HITS vs {PER_FILE_PASSES} passes over the file's pages",
                  PER_FILE_PASSES * FILE_PAGES, mine[0]["hits"], TOL)
    t.check_eq("PATH of the file", f.path, mine[0]["path"])
    t.check(rows[0] == mine[0], "the file is the busiest row", f"{dev} {ino}",
            f"{rows[0]['dev']} {rows[0]['ino']}")
    out = text.result.stdout
    t.check_in("text header", "DEV          INO      HITS    MISSES   DIRTIES  HITRATIO PATH", out)
    t.check(re.search(rf"^\s*{re.escape(dev)}\s+{ino}\s+\d+\s+\d+\s+\d+\s+[\d.]+%\s+"
                      rf"{re.escape(f.path)}$", out, re.M) is not None,
            "text row with dev, inode and path", f"a line '{dev} {ino} ... {f.path}'", out[-600:])


@scenario("cachestat_cgroup")
def _(t: Test):
    require_page_size()
    with data_file(cold=True) as f, MemoryCgroup("cachestat_in") as cg, \
            MemoryCgroup("cachestat_empty") as empty:
        with Reader(f.path) as reader:
            cg.add(reader.pid)
            with Tool("cachestat", "-j", "-G", cg.path) as inside, \
                    Tool("cachestat", "-j", "-G", empty.path) as outside:
                reader.go()
                time.sleep(0.2)
    s = summary_of(inside, t)
    t.check_close("-G the reader's cgroup: MISSES vs the file's pages", FILE_PAGES, s["misses"],
                  TOL)
    t.check_le("-G the reader's cgroup: HITRATIO %", 5.0, s["hit_ratio_pct"])
    e = summary_of(outside, t)
    t.check_eq("-G an empty cgroup: MISSES", 0, e["misses"])
    t.check_eq("-G an empty cgroup: ACCESSES", 0, e["accesses"])


@scenario("cachestat_hits_unavailable")
def _(t: Test):
    require_page_size()
    env = {"MEMLAT_DISABLE_HOOKS": "filemap_access"}
    with data_file(cold=True) as f:
        s = measure_read(t, f, env=env)
        err = s["_tool"].result.stderr
    t.check_in("stderr says why", "HITS and HITRATIO are unavailable", err, "stderr")
    t.check_eq("JSON hits", None, s["hits"])
    t.check_eq("JSON hit_ratio_pct", None, s["hit_ratio_pct"])
    t.check_eq("JSON accesses", None, s["accesses"])
    t.check_close("MISSES still counted", FILE_PAGES, s["misses"], TOL)
    with Tool("cachestat", "1", "1", env=env, wait_exit=True) as tool:
        pass
    lines = tool.result.stdout.splitlines()
    t.check_eq("text: one interval line after the header", True,
               len(lines) >= 2 and lines[0].split()[0] == "HITS")
    if len(lines) >= 2:
        fields = lines[1].split()
        t.check_eq("text: HITS and HITRATIO print as '-'", ["-", "-"], [fields[0], fields[3]])


def fallback(t: Test, disabled: str, expect: str, dirties: bool, variant: str = ""):
    require_page_size()
    env = variant_env(variant, disabled)
    with data_file(cold=True) as f:
        cold = measure_read(t, f, env=env, tool_args=("-v",), oracle=True)
        warm = measure_read(t, f, env=env, oracle=True)
    err = cold["_tool"].result.stderr
    for probe in ("(misses): using " + expect, "(dirties): using writeback_dirty_folio/" + expect,
                  "(accesses): using filemap_access/" + expect):
        t.check_in(f"-v: {probe}", probe, err, "stderr")
    check_cold(t, cold)
    check_warm(t, warm)
    state = check_variant_chosen(t, variant, err)
    if state is not None:  # always: a hash map on every kernel
        # The reader (one thread, the only one -p counts) kept its read cursor until it
        # exited: the thread-exit program must have removed it.
        t.check_eq("hash map: thread states created (the reader's thread)", 1, state["created"])
        t.check_eq("hash map: thread states removed when the reader exited", 1,
                   state["removed_at_exit"])
        t.check_eq("hash map: entries left after the reader exited", 0, state["left"])
    if dirties:
        path = written_file_path()
        try:
            with Tool("cachestat", "-j", env=env) as tool:
                w = run_workload("cache_writer", "--file", path, "--mib", str(WRITE_MIB))
                time.sleep(0.2)
        finally:
            if os.path.exists(path):
                os.unlink(path)
        s = summary_of(tool, t)
        # Machine-wide (the writer's PID is known only once it runs): at least its pages.
        t.check_ge("DIRTIES machine-wide >= the writer's pages (-5%)", WRITE_PAGES * (1 - TOL),
                   s["dirties"])
        log(f"  writer {w['pid']}: machine-wide dirties {s['dirties']}")


@variant_scenarios("cachestat_fallback_raw_tp")
def _(t: Test, variant: str):
    # Also with the old kernels' fall-backs forced (FEATURE_VARIANTS).
    fallback(t, "tp_btf", "raw_tp", dirties=True, variant=variant)


@scenario("cachestat_fallback_tracepoint")
def _(t: Test):
    # The classic writeback_dirty_folio format has no folio size: DIRTIES count large folios
    # as one page there (-v says so), so they are not compared.
    fallback(t, "tp_btf,raw_tp", "tracepoint", dirties=False)


@scenario("cachestat_perf_sees_tracepoints")
def _(t: Test):
    """perf stat beside the classic tracepoint programs (forced): perf, counting machine-wide
    over a longer window, must count at least what an ftrace instance saw of the reader."""
    names = ["filemap/mm_filemap_add_to_page_cache", "filemap/mm_filemap_get_pages"]
    with data_file(cold=True) as f:
        with PerfStat([n.replace("/", ":") for n in names]) as perf:
            with Reader(f.path) as reader:
                with FtraceOracle(names, reader.pid, buffer_kb=8192) as oracle, \
                        Tool("cachestat", "-j", "-v", "-p", str(reader.pid),
                             env={"MEMLAT_DISABLE_HOOKS": "tp_btf,raw_tp"}) as tool:
                    reader.go()
                    time.sleep(0.2)
                    trace = oracle.stop()
    s = summary_of(tool, t)
    t.check_in("-v: the classic tracepoints are attached", "(misses): using tracepoint",
               tool.result.stderr, "stderr")
    t.check_ge("the tool's misses of the cold read", FILE_PAGES * (1 - TOL), s["misses"])
    for n in names:
        event = n.split("/")[1]
        t.check_ge(f"ftrace: {event} events of the reader", 1, len(trace[event]))
        t.check_ge(f"perf stat's count of {n.replace('/', ':')} vs ftrace's of the reader",
                   len(trace[event]), perf.counts[n.replace("/", ":")])


@scenario("cachestat_text_output")
def _(t: Test):
    with Tool("cachestat", "-T", "0.2", "3", wait_exit=True) as tool:
        pass
    lines = tool.result.stdout.splitlines()
    t.check_eq("header (BCC's columns, with TIME)",
               ["TIME", "HITS", "MISSES", "DIRTIES", "HITRATIO", "BUFFERS_MB", "CACHED_MB"],
               lines[0].split() if lines else [])
    rows = [l for l in lines[1:] if re.match(r"^\d\d:\d\d:\d\d\s", l)]
    t.check_eq("interval lines for COUNT=3", 3, len(rows))
    meminfo = dict(l.split(":", 1) for l in read_file("/proc/meminfo").splitlines())
    cached_mb = int(meminfo["Cached"].split()[0]) / 1024
    if rows:
        t.check_close("CACHED_MB vs /proc/meminfo Cached", cached_mb, float(rows[-1].split()[6]),
                      0.05)
    # The exit summary is on stderr: stdout holds the header and one line per interval.
    t.check_in("exit summary (stderr)", "Total over", tool.result.stderr)
    t.check_eq("stdout: the header and the interval lines only", 1 + len(rows),
               len([l for l in lines if l.strip()]))
    with Tool("cachestat", "-P", "0.2", "1", wait_exit=True) as per_process:
        pass
    t.check_in("-P header", "    PID    UID COMM                  HITS    MISSES   DIRTIES "
                            "READ_HIT%", per_process.result.stdout)
    t.check_in("-P title", "Buffers MB:", per_process.result.stdout)


@scenario("cachestat_bad_input")
def _(t: Test):
    cases = shared_bad_arguments(cgroup=True, interval_count=True) + [
        (["-P", "--per-file"], "-P and --per-file are two views"),
    ]
    check_bad_arguments(t, "cachestat", cases)
    check_help(t, "cachestat", (
        "--pid", "--cgroup", "--per-process", "--per-file", "--timestamp", "--duration", "--json",
        "--verbose", "interval", "count", "HITRATIO", "MISSES", "DIRTIES", "BUFFERS_MB",
        "READ_HIT%", "MEMLAT_DISABLE_HOOKS"))


if __name__ == "__main__":
    sys.exit(main())
