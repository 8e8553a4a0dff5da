#!/usr/bin/env python3
"""Runtime test of the Debian package: build BUILD/memlat_VERSION_ARCH.deb, install it into
the live system with dpkg -i, run what it installed, purge it, and check that nothing is left.

While installed: dpkg says "install ok installed" and every path the package holds
(check_deb.expected_contents) is on disk, links pointing where they should; /usr/sbin/memlat
prints its version and lists every tool; each /usr/sbin/memlat-TOOL and
/usr/libexec/memlat/TOOL answers -h exactly as `memlat TOOL -h`; systemd-analyze verify accepts
each installed service (its ExecStart is there); one real counting run:
/usr/sbin/memlat-cachestat -j -p (this process) while it reads a warm file of its own, whose
hits must be the file's pages (oracle: the file size, 5%, as runtime.cachestat_warm_read).
After the purge: dpkg knows no memlat, and none of the package's paths or directories is left.
The package is purged whatever happens in between (failure, SIGTERM); a memlat package that
was installed before the test is never touched (the test skips).
"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_deb import expected_contents, units  # noqa: E402
from memlat_test import (Failure, Test, TestFile, Tool, build_dir, log, main, run,  # noqa: E402
                         scenario, skip, source_entries, source_tools)

PAGE = 4096
FILE_SIZE = 16 << 20
TOL = 0.05


def own_dirs() -> list[str]:
    """The directories only this package creates: gone after the purge (the units' drop-in
    directories among them)."""
    drop_ins = {os.path.dirname(u) for u in units() if "/" in u}
    return ["/usr/libexec/memlat", "/usr/share/doc/memlat", "/usr/share/memlat"] + \
        [f"/usr/lib/systemd/system/{d}" for d in sorted(drop_ins)]


def cache_entry(name: str) -> str:
    with open(os.path.join(build_dir(), "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split("=", 1)[1].strip()
    raise Failure(f"{name} is not in {build_dir()}/CMakeCache.txt")


def package_status() -> str:
    """dpkg's status of memlat ('' when dpkg knows no such package)."""
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Status}", "memlat"], capture_output=True,
                       text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def dpkg(*args: str) -> None:
    """dpkg ARGS, waiting (up to 5 min) while another dpkg or apt holds dpkg's lock."""
    deadline = time.monotonic() + 300
    while True:
        r = run(["dpkg", *args], timeout=300)
        if r.rc == 0:
            log(r.stdout.strip())
            return
        if "lock" not in r.stderr or time.monotonic() > deadline:
            raise Failure(f"dpkg {' '.join(args)}:\n{r.describe()}")
        time.sleep(2)


def deb_path() -> str:
    version = cache_entry("CMAKE_PROJECT_VERSION")
    arch = run(["dpkg", "--print-architecture"]).stdout.strip()
    return os.path.join(build_dir(), f"memlat_{version}_{arch}.deb")


def listed_tools() -> list[str]:
    """The tools the installed memlat -h lists."""
    listing = run(["/usr/sbin/memlat", "-h"]).stdout.splitlines()
    start = listing.index("Tools:") + 1 if "Tools:" in listing else len(listing)
    end = listing.index("", start) if "" in listing[start:] else len(listing)
    return sorted(line.split()[0] for line in listing[start:end])


def check_installed(t: Test, version: str, names: dict[str, str]) -> None:
    t.check_eq("dpkg status", "install ok installed", package_status())
    files, links = expected_contents(names)
    missing = sorted(f for f in files if not os.path.isfile("/" + f))
    t.check(not missing, f"every file of the package is installed ({len(files)})", "none missing",
            missing)
    wrong = {p: target for p, target in links.items()
             if not os.path.islink("/" + p) or os.readlink("/" + p) != target}
    t.check(not wrong, f"every link of the package is installed ({len(links)}), pointing where "
            "it should", "none wrong", wrong)
    r = run(["/usr/sbin/memlat", "--version"])
    t.check_eq("/usr/sbin/memlat --version", (0, f"memlat {version}\n"), (r.rc, r.stdout))
    for tool, bare in names.items():
        own = run(["/usr/sbin/memlat", tool, "-h"])
        links = [f"/usr/sbin/memlat-{tool}"] + ([f"/usr/libexec/memlat/{tool}"] if bare == tool
                                                 else [])
        for link in links:
            r = run([link, "-h"])
            t.check((r.rc, r.stdout, r.stderr) == (own.rc, own.stdout, own.stderr) and r.rc == 0,
                    f"{link} -h is `memlat {tool} -h`",
                    f"exit 0 and the same output ({len(own.stdout)} bytes)",
                    f"exit {r.rc}, {len(r.stdout)} bytes")


def check_units(t: Test) -> None:
    """systemd-analyze verify each installed service (a template as each instance that has a
    drop-in, e.g. memlat@exporter, or as memlat@test): it loads the unit with its drop-ins and
    fails on a command that is not there, such as an ExecStart still naming /usr/local."""
    services = [u for u in units() if u.endswith(".service")]
    t.check(bool(services), "the package has systemd services", "at least one", services)
    drop_ins = {os.path.dirname(u).removesuffix(".d") for u in units() if "/" in u}
    for service in services:
        instances = [service]
        if "@." in service:
            prefix = service.split("@.")[0] + "@"
            instances = sorted(d for d in drop_ins if d.startswith(prefix)) or \
                [service.replace("@.", "@test.")]
        for instance in instances:
            r = run(["systemd-analyze", "verify", instance])
            t.check(r.rc == 0 and not r.stderr.strip(), f"systemd-analyze verify {instance}",
                    "exit 0, no complaint", f"exit {r.rc} {r.stderr.strip()!r}")


def check_counting_run(t: Test) -> None:
    """memlat-cachestat counts this process's warm read of a file of its own: every page hit."""
    pages = FILE_SIZE // PAGE
    with TestFile(FILE_SIZE, "deb_read") as f:
        f.warm()
        with Tool("cachestat", "-j", "-p", str(os.getpid()),
                  program="/usr/sbin/memlat-cachestat") as tool:
            f.warm()
            time.sleep(0.2)
    res = tool.result
    t.check_eq("memlat-cachestat exit status", 0, res.rc)
    summaries = [j["total"] for j in res.json_lines() if j.get("type") == "summary"]
    t.require(len(summaries) == 1, "one exit summary (JSON)", "1", len(summaries))
    s = summaries[0]
    log(f"  summary: accesses={s['accesses']} hits={s['hits']} misses={s['misses']}")
    t.check_close("installed memlat-cachestat: HITS vs the file's pages (warm read)", pages,
                  s["hits"], TOL)
    t.check_le("installed memlat-cachestat: MISSES of a warm read", TOL * pages, s["misses"])


def check_purged(t: Test, names: dict[str, str]) -> None:
    t.check_eq("dpkg status after the purge", "", package_status())
    files, links = expected_contents(names)
    left = [p for p in sorted(files | set(links)) if os.path.lexists("/" + p)]
    left += [d for d in own_dirs() if os.path.lexists(d)]
    t.check(not left, "nothing of the package is left", "nothing", left)


@scenario("deb_install")
def _(t: Test):
    if package_status():
        skip(f"a memlat package is installed already ({package_status()}): this test installs "
             "and purges its own and leaves that one alone; dpkg --purge memlat to run it")
    deb = deb_path()
    r = run([cache_entry("CMAKE_COMMAND"), "--build", build_dir(), "--target", "deb"],
            timeout=600)
    made = r.rc == 0 and os.path.isfile(deb)
    t.require(made, f"cmake --build --target deb makes {deb}", "exit 0",
              f"exit {r.rc}" if made else r.describe())
    version = cache_entry("CMAKE_PROJECT_VERSION")

    def stop(signum, _frame):
        raise Failure(f"signal {signum}: purging the package before exiting")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        dpkg("-i", deb)
        t.check_eq("the tools the installed memlat -h lists", source_tools(), listed_tools())
        names = source_entries()
        check_installed(t, version, names)
        check_units(t)
        check_counting_run(t)
        dpkg("--purge", "memlat")
        check_purged(t, names)
    finally:
        if package_status():
            log("the package is still installed: purging it")
            dpkg("--purge", "memlat")
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
