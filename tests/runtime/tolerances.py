"""Every tolerance the tests allow between a tool and an independent oracle, written once, with
the reason it is that wide. The host tests (tests/runtime/) and the VM checkers (tests/vm/)
take them from here; docs/testing.md's "Tolerances" table quotes them, and
runtime.docs_tolerances_quoted holds that table to these values.

A tolerance is relative (`rel`, a share of the oracle's figure) and may add an absolute part
(`abs`, in the figure's own unit, or per event where `per` says so). check_close(..., rel_tol=
T.rel, abs_tol=T.abs) is how a check uses one. Exact checks (the same events on both sides)
have no tolerance and are not listed."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tolerance:
    name: str
    rel: float
    abs: float
    unit: str      # of `abs`: "IPIs", "pages", "us a window", ...
    oracle: str    # what the tool's figure is compared with
    why: str       # what was measured, and why the tolerance is no wider

    def allowed(self) -> str:
        """As docs/testing.md shows it: "2%", "5% + 5 IPIs"."""
        text = f"{self.rel * 100:g}%"
        return text + (f" + {self.abs:g} {self.unit}" if self.abs else "")


TOLERANCES: dict[str, Tolerance] = {}


def _tolerance(name: str, rel: float, oracle: str, why: str, abs: float = 0.0,
               unit: str = "") -> Tolerance:
    t = Tolerance(name, rel, abs, unit, oracle, why)
    TOLERANCES[name] = t
    return t


TLB_ROW_HOST = _tolerance(
    "tlb_row_host", 0.02,
    "the /proc/interrupts TLB row's delta (tlbflush's remote shootdowns, memlat top's, the "
    "exporter's)",
    "measured under 0.1% on 6.18: the row counts each flush IPI the tool counts")
TLB_ROW_GUEST = _tolerance(
    "tlb_row_guest", 0.05, abs=5, unit="IPIs",
    oracle="the guest's /proc/interrupts TLB row (VM matrix)",
    why="under TCG the worker thread is often off its CPU: 6.1 reads up to 2.06% low (an IPI "
        "that finds the CPU idle or lazy returns before tlb:tlb_flush)")
CSD_FALLBACK = _tolerance(
    "csd_fallback", 0.05,
    "culprits and -L without the csd tracepoints (remote_send_ipi, irq_vectors) against the "
    "TLB row and the remote shootdowns",
    "measured: latency totals within 0.1% of the remote shootdowns, sends within 0.5% of the "
    "interrupts delta")
FTRACE_HANDLER_RUNS = _tolerance(
    "ftrace_handler_runs", 0.05,
    "ftrace's IPI handler runs and flush callbacks (tlbflush -L)",
    "the kernel skips a few runs when an IPI finds nothing to flush; the tool and ftrace see "
    "the same tracepoints a little apart at the window's edges")
FTRACE_WINDOW_TIME = _tolerance(
    "ftrace_window_time", 0.03, abs=3, unit="us a window",
    oracle="the summed time of ftrace's begin/end windows (memstall, oomwhy's lead-up)",
    why="ftrace prints microseconds (each window +/- 1 us) and the two tracers read the clock "
        "a little apart at the same tracepoints")
FTRACE_SLEEP_TIME = _tolerance(
    "ftrace_sleep_time", 0.05,
    "the summed time from each switch-out to its switch-in in ftrace's sched_switch (memstall's "
    "THRASH in the guests: at most that of the reader's sleeps and preemptions under a page "
    "wait)",
    "memstall and ftrace read CLOCK_MONOTONIC at the same two tracepoints of each sleep, a "
    "little apart")
PAGE_CACHE_PAGES = _tolerance(
    "page_cache_pages", 0.05,
    "the pages a workload read or wrote (cachestat's accesses, misses and dirties)",
    "read-ahead may add pages past what was asked for, and the workload's exec and exit add "
    "accesses of its own program")
RAMDISK_PAGES = _tolerance(
    "ramdisk_pages", 0.01,
    "the pages read from a ram disk (cachestat --per-file's row of the device, VM matrix)",
    "one count per page read, exact by the kernel source: room for a read-ahead page found or "
    "a batch cut differently, not for a count per batch")
MIGRATION_EDGES = _tolerance(
    "migration_edges", 0.01, abs=4, unit="pages",
    oracle="/proc/vmstat's numa_pages_migrated, pgmigrate_success and pgmigrate_fail deltas "
           "(VM matrix)",
    why="migrations between the tool's start and the first snapshot, and between the last "
        "snapshot and the stop: +27 pages once right after NUMA balancing was switched on, "
        "then +1 and 0, for about 8,200 migrated")
RECLAIM_PAGES = _tolerance(
    "reclaim_pages", 0.10,
    "/proc/vmstat's pgsteal_direct delta (drsnoop's PAGES, VM matrix)",
    "mm_vmscan_direct_reclaim_end's nr_reclaimed adds the slab pages shrinkers freed to the "
    "LRU pages pgsteal_direct counts")
ZONE_FREE_PAGES = _tolerance(
    "zone_free_pages", 0.05,
    "/proc/zoneinfo's free pages of the zone (drsnoop -e's FREE(KB))",
    "the zone's free pages move between the tracepoint and the read of /proc/zoneinfo")
TASKSTATS_THRASHING_COUNT = _tolerance(
    "taskstats_thrashing_count", 0.10, abs=2, unit="stalls",
    oracle="delay accounting's thrashing_count over taskstats (memstall's THRASH stalls, host)",
    why="PSI also charges the readahead of workingset pages (read_pages()) to refaults, which "
        "delay accounting does not count; three runs: equal counts or one more")
FTRACE_FLUSH_CALLBACKS = _tolerance(
    "ftrace_flush_callbacks", 0.01, abs=100, unit="IPIs",
    oracle="ftrace's flush_tlb_func IPI callbacks over memlat top's run (its TLB shootdowns)",
    why="top's intervals begin before it is ready and end before it exits, the oracle's window "
        "runs from ready to exit: the rest of the machine flushes about 15 times a second")
ZONE_WATERMARKS = _tolerance(
    "zone_watermarks", 0.05,
    "/proc/zoneinfo's min, low and high watermarks less their boost (compactsnoop -e)",
    "watermarks move when the zone's managed pages change (this kernel grows its Normal zone "
    "lazily)")
TASKSTATS_THRASHING_OVER = _tolerance(
    "taskstats_thrashing_over", 0.05,
    "delay accounting's thrashing_delay_total (memstall's THRASH time may be this much over)",
    "the readahead sleeps of workingset pages, which PSI charges and delay accounting does not: "
    "0.984-1.0017 of its total in three runs")
TASKSTATS_THRASHING_UNDER = _tolerance(
    "taskstats_thrashing_under", 0.10,
    "delay accounting's thrashing_delay_total (memstall's THRASH time may be this much under)",
    "delay accounting also counts the time on the CPU before the sleep (io_schedule() flushes "
    "the task's plug of reads): 0.919 and 0.930 in two runs on a busy host, 0.984-0.998 after")
TOP_RATE_INTERVALS = _tolerance(
    "top_rate_intervals", 0.01, abs=1, unit="pages an interval",
    oracle="ftrace's nr_reclaimed of a reader's reclaim windows (memlat top -b's RECL/s times "
           "the interval asked for)",
    why="a rate is pages over the interval's measured length, which runs a little past the "
        "0.25 s asked for, and is printed rounded to a page a second: measured -0.02% and "
        "-0.07% over about 516,000 pages")
LOCK_WAIT_TOTAL = _tolerance(
    "lock_wait_total", 0.02,
    "the summed time of ftrace's mmap_lock waits of 1 ms or more, start_locking to "
    "acquire_returned per thread (lockstall's waits, matched wait for wait)",
    "both read CLOCK_MONOTONIC at the same two tracepoints, a little apart (20-35 us when a "
    "timer tick comes between the two probes): measured -0.12% and -0.23% over 0.4-2.3 s of "
    "waits")
LOCK_HOLDER_RECLAIM = _tolerance(
    "lock_holder_reclaim", 0.02,
    "ftrace's mm_vmscan_*_reclaim_begin/end of a lock holder's thread within its hold (the "
    "oracle's mmap_lock pairing): lockstall's reclaim time of that holder, hold for hold and "
    "summed",
    "both read CLOCK_MONOTONIC at the same tracepoints: 0.1-1.5 us apart a reclaim, the sum "
    "+0.3% to +1.3% over 10-22 ms of reclaim in 11-24 holds (a hold has about 50 reclaims); "
    "the absolute part is two timer ticks between a pair of probes (20-35 us each)",
    abs=70, unit="us a hold")
LOCK_WAIT_TOTAL_GUEST = _tolerance(
    "lock_wait_total_guest", 0.05,
    "the summed time of the guest's ftrace mmap_lock waits matched to lockstall's (VM matrix)",
    "qemu's TCG runs the two vCPUs in turns on one host thread while the clock runs on: the "
    "two probes of one tracepoint were up to 4.2 ms apart on 6.1 (a wait of 22.3 ms for the "
    "tool, 18.1 ms for ftrace)")
LOCK_WAITS_GUEST = _tolerance(
    "lock_waits_guest", 0.10,
    "the guest's ftrace mmap_lock waits of 1 ms or more, wait for wait (VM matrix: those one "
    "side has and the other has not, or has under 1 ms)",
    "the same skew of the two probes puts a wait on either side of 1 ms for one of them, or "
    "apart by more than both ends can match: 0.3-4.3% of 256-341 waits in six runs on 6.1, "
    "the most on the classic tracepoints (the perf record is filled between the two probes); "
    "the host holds them to none")
LOCK_ROOT_GUEST = _tolerance(
    "lock_root_guest", 0.05,
    "the waits whose first holder (by the guest's ftrace pairing) was the smaps_rollup reader: "
    "lockstall names it the root (VM matrix; the host: every one)",
    "a probe's skew also moves a hold's start or end: a writer's hold of 145 us for the tool "
    "was under 50 us for ftrace, so the tool's first holder was that writer (134 of 135 on "
    "7.3)")
