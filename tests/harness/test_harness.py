#!/usr/bin/env python3
"""Unit tests of the test harness itself (tests/runtime/memlat_test.py's verdict(), and the VM
runner's judge() that uses it): a check that failed stays failed whatever the scenario does
next, a skip is a skip only when nothing failed before it, and a scenario that checked nothing
proved nothing. Needs no root and no kernel: `python3 test_harness.py`."""
from __future__ import annotations

import contextlib
import io
import os
import sys
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "runtime"))
sys.path.insert(0, os.path.join(HERE, "..", "vm"))
import memlat_test  # noqa: E402
from memlat_test import Failure, Test, skip, verdict  # noqa: E402


def judged(body) -> tuple[str, str, Test]:
    """verdict() of `body(t)` on a fresh Test, its log kept out of the test's output."""
    t = Test("harness")
    with contextlib.redirect_stdout(io.StringIO()):
        status, detail = verdict(t, lambda: body(t))
    return status, detail, t


class Verdict(unittest.TestCase):
    def test_passing_checks_pass(self):
        status, detail, _ = judged(lambda t: t.check_eq("one", 1, 1))
        self.assertEqual(("PASS", "1 checks"), (status, detail))

    def test_a_failed_check_fails(self):
        status, detail, _ = judged(lambda t: (t.check_eq("one", 1, 2), t.check_eq("two", 2, 2)))
        self.assertEqual("FAIL", status)
        self.assertIn("1 of 2 checks failed", detail)
        self.assertIn("one", detail)

    def test_skip_before_any_check_is_a_skip(self):
        status, detail, _ = judged(lambda t: skip("no shootdown IPIs here"))
        self.assertEqual(("SKIP", "no shootdown IPIs here"), (status, detail))

    def test_skip_after_passing_checks_is_a_skip(self):
        def body(t):
            t.check_eq("precondition's own check", 1, 1)
            skip("the oracle saw nothing to compare")
        self.assertEqual("SKIP", judged(body)[0])

    def test_skip_after_a_failed_check_is_a_failure(self):
        # tlbflush's measured_run once checked the tool's exit status, then skipped for want
        # of IPIs: a crashing tool read "skipped" on a hypervisor-flushed guest.
        def body(t):
            t.check_eq("tool exit status after SIGINT", 0, 1)
            skip("remote TLB flushes on this machine go through the hypervisor")
        status, detail, t = judged(body)
        self.assertEqual("FAIL", status)
        self.assertIn("tool exit status after SIGINT", detail)
        self.assertTrue(any("skipped after a failed check" in f for f in t.failures))

    def test_require_stops_and_fails(self):
        def body(t):
            t.require(False, "the tool printed one JSON object")
            t.check_eq("never reached", 1, 1)
        status, _, t = judged(body)
        self.assertEqual("FAIL", status)
        self.assertEqual(1, t.checks)

    def test_harness_failure_fails(self):
        def body(t):
            raise Failure("workload failed")
        status, detail, _ = judged(body)
        self.assertEqual("FAIL", status)
        self.assertIn("workload failed", detail)

    def test_a_bug_of_the_test_fails(self):
        def body(t):
            t.check_eq("one", 1, 1)
            return {}["missing"]
        self.assertEqual("FAIL", judged(body)[0])

    def test_no_check_is_a_failure(self):
        status, detail, _ = judged(lambda t: None)
        self.assertEqual(("FAIL", "no check was made"), (status, detail))


class VmJudge(unittest.TestCase):
    """run_vm_tests.judge(): the rows a guest's report turns into."""

    def setUp(self):
        import vmcheck
        self.vmcheck = vmcheck
        self.saved = (list(vmcheck._CHECKERS), list(vmcheck._REQUIRED),
                      list(vmcheck._ALLOWED_SKIPS))

    def tearDown(self):
        (self.vmcheck._CHECKERS[:], self.vmcheck._REQUIRED[:],
         self.vmcheck._ALLOWED_SKIPS[:]) = self.saved

    def judge(self, checker, guest_skip=None, required=False, allowed=None):
        import run_vm_tests
        name = "harnesstool.scenario"
        self.vmcheck.checker(name)(checker)
        if required:
            self.vmcheck.required(name, lambda facts: True)
        if allowed:
            self.vmcheck.allowed_skip(name, allowed, "the test's reason")
        block = self.vmcheck.Block(name + ".tp_btf")
        block.complete = True
        block.skip = guest_skip
        with contextlib.redirect_stdout(io.StringIO()):
            return run_vm_tests.judge([block], {"kernel": "6.1"}, True, [])

    def test_checker_skip_after_failed_check_fails_the_run(self):
        def checker(t, b):
            t.check_eq("-v names the hook", "tp_btf", "raw_tp")
            skip("delay accounting saw no thrashing")
        rows, ok = self.judge(checker)
        self.assertFalse(ok)
        self.assertEqual("FAIL", rows[0][1])
        self.assertIn("-v names the hook", rows[0][2])

    def test_checker_skip_that_is_not_allowed_fails(self):
        rows, ok = self.judge(lambda t, b: skip("not on this kernel"))
        self.assertFalse(ok)
        self.assertEqual("FAIL", rows[0][1])
        self.assertIn("not on this kernel", rows[0][2])

    def test_allowed_skip_is_a_skip(self):
        rows, ok = self.judge(lambda t, b: skip("not on this kernel: no swap"),
                              allowed="not on this kernel")
        self.assertTrue(ok)
        self.assertEqual("SKIP", rows[0][1])

    def test_boot_skip_is_a_skip(self):
        rows, ok = self.judge(lambda t, b: t.check_eq("x", 1, 1),
                              guest_skip="no kernel BTF: tp_btf needs it (--hide-btf)")
        self.assertTrue(ok)
        self.assertEqual("SKIP", rows[0][1])

    def test_required_scenario_skip_fails(self):
        rows, ok = self.judge(lambda t, b: skip("not on this kernel"), required=True)
        self.assertFalse(ok)
        self.assertEqual("FAIL", rows[0][1])

    def test_passing_checker_passes(self):
        rows, ok = self.judge(lambda t, b: t.check_eq("x", 1, 1))
        self.assertTrue(ok)
        self.assertEqual(("PASS", "1 checks"), rows[0][1:])


class DocExamples(unittest.TestCase):
    """test_examples.py's reading of the pages: what a capture must reproduce, and how long a
    documented command asks to run."""

    def setUp(self):
        import test_examples
        self.ex = test_examples

    def test_headings_are_the_lines_without_numbers(self):
        capture = ["Tracing reclaim stalls... Hit Ctrl-C to end.",
                   "COMM             PID       LAT(ms)    PAGES",
                   "file_reader      7209        0.292      916",
                   "Reclaim stalls by process:",
                   "  CPU 1          8271",
                   "  why:     memory cgroup /sys/fs/cgroup/memory/shop",
                   "memcg reclaim, 3 stalls:", "..."]
        self.assertEqual(["COMM PID LAT(ms) PAGES", "Reclaim stalls by process:", "why:"],
                         self.ex.headings(capture))

    def test_a_title_is_compared_before_its_parenthesis(self):
        kvm = "Remote flush requests naming each CPU (by shootdown IPI or by the hypervisor):"
        pvm = "Remote flush requests naming each CPU (by the hypervisor, without IPIs):"
        self.assertEqual(self.ex.heading_key(kvm), self.ex.heading_key(pvm))
        self.assertNotEqual(self.ex.heading_key("CPU  REASON  COUNT"),
                            self.ex.heading_key("CPU  REASON  TOTAL"))

    def test_bounds(self):
        bound = self.ex.bound_seconds
        self.assertEqual(10, bound(["drsnoop", "-T", "-d", "10"]))
        self.assertEqual(3, bound(["cachestat", "1", "3"]))
        self.assertEqual(10, bound(["memlat", "top", "-b", "1", "10"]))
        self.assertIsNone(bound(["memstall", "5"]))
        self.assertIsNone(bound(["oomwhy"]))

    def test_info_series_are_compared_by_name(self):
        lines = ['memlat_tool_up{tool="oomwhy"} 1',
                 'memlat_tlb_remote_flush_path_info{path="hypervisor",hypervisor="PVM"} 1']
        self.assertEqual({'memlat_tool_up{tool="oomwhy"}', "memlat_tlb_remote_flush_path_info"},
                         self.ex.series(lines))


if __name__ == "__main__":
    unittest.main()
