#!/usr/bin/env python3
"""A program in a tmux pane (a real terminal emulator, on a tmux server of its own): what
test_top.py drives memlat top with, and test_examples.py runs the pages' live commands in."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time

from memlat_test import Test, binary, log, skip


class ScreenTool:
    """memtop in a tmux pane of ROWS x COLUMNS (a real terminal emulator, on a server of its own),
    as a user drives it: keys sent with send-keys, the screen read with capture-pane. The
    shell around it records the terminal's settings before and after (stty -g), memtop's
    exit status and pid, and stays a few seconds, so the screen after the exit can be read.
    Closed on leaving its `with`: memtop killed if it still runs, the tmux server ended."""
    ROWS, COLUMNS = 40, 200

    def __init__(self, *args: str, env: str = "", rows: int = 0, columns: int = 0,
                 program: str = "memtop", cwd: str | None = None):
        self.ROWS, self.COLUMNS = rows or self.ROWS, columns or self.COLUMNS
        if shutil.which("tmux") is None:
            skip("tmux is not installed (scripts/install-deps.sh installs it)")
        self.dir = tempfile.mkdtemp(prefix="memlat_top_screen_")
        # A server of its own each time: one just killed may still be going away.
        self.socket = os.path.basename(self.dir)
        self.exited = False
        d = self.dir
        command = " ".join([binary(program) if program == "memtop" else program, *args])
        script = (f"stty -g > {d}/stty.before; "
                  f"sh -c 'echo $$ > {d}/pid; "
                  f"exec env -u NO_COLOR MEMLAT_READY=1 {env} {command}' 2> {d}/err; "
                  f"echo $? > {d}/rc; stty -g > {d}/stty.after; sleep 5")
        log(f"$ {program} {' '.join(args)}  (in a {self.ROWS}x{self.COLUMNS} tmux pane)")
        self.tmux("new-session", "-d", "-s", "top", "-x", str(self.COLUMNS), "-y",
                  str(self.ROWS), *(["-c", cwd] if cwd else []), script)

    def tmux(self, *args: str) -> str:
        r = subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args],
                           capture_output=True, text=True, timeout=10)
        return r.stdout

    def file(self, name: str) -> str:
        try:
            with open(os.path.join(self.dir, name)) as f:
                return f.read()
        except OSError:
            return ""

    def wait_ready(self, timeout: float = 30) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if "memlat: ready" in self.file("err"):
                return True
            if self.file("rc"):
                return False
            time.sleep(0.1)
        return False

    def screen(self, styled: bool = False) -> list[str]:
        """The screen's lines; `styled`: with the SGR sequences of their colours and video."""
        return self.tmux("capture-pane", "-p", *(["-e"] if styled else []), "-t",
                         "top").rstrip("\n").split("\n")

    def wait_screen(self, until, timeout: float = 5.0) -> list[str] | None:
        """The screen once `until(lines)` holds, or None after `timeout`."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            lines = self.screen()
            if until(lines):
                return lines
            time.sleep(0.1)
        return None

    def press(self, *keys: str, until=None, timeout: float = 5.0) -> list[str] | None:
        """Sends `keys` (tmux key names, e.g. Enter, Escape, Home, BSpace, or literal text as
        "-l", TEXT) and waits for the screen `until` accepts."""
        self.tmux("send-keys", "-t", "top", *keys)
        return self.wait_screen(until, timeout) if until else None

    def wait_exit(self, timeout: float = 10) -> int | None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            rc = self.file("rc").strip()
            # The shell writes the settings after the status: both, for the checks after.
            if rc and self.file("stty.after"):
                self.exited = True
                return int(rc)
            time.sleep(0.1)
        return None

    def check_terminal_settings(self, t: Test, how: str = "given back") -> None:
        """The terminal's settings after memtop are those it had before (stty -g)."""
        t.check_eq(f"the terminal's settings {how} (stty -g)", self.file("stty.before"),
                   self.file("stty.after"))

    def __enter__(self) -> "ScreenTool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if not self.exited and self.file("pid").strip():
            try:
                os.kill(int(self.file("pid")), 9)
            except (OSError, ValueError):
                pass
        self.tmux("kill-server")
        shutil.rmtree(self.dir, ignore_errors=True)
