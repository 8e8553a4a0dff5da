#!/usr/bin/env python3
"""Build check: `cmake --build BUILD --target deb` makes BUILD/memlat_VERSION_ARCH.deb, and
- its control data (dpkg-deb -I) names the package, version, architecture (Debian's name),
  maintainer, section and description, and depends on nothing (the binary is static);
- it holds exactly what cmake/Package.cmake says (dpkg-deb -c): /usr/sbin/memlat, identical to
  BUILD/memlat and an ELF of ARCH, owned by root; a link /usr/sbin/memlat-TOOL -> memlat and
  /usr/libexec/memlat/TOOL -> ../../sbin/memlat per tool; contrib/systemd's units and drop-ins
  in /usr/lib/systemd/system naming /usr where the tree says /usr/local; the dashboard; the
  README, the .env templates, copyright and changelog.gz in /usr/share/doc/memlat; the manual
  page memlat.8 (naming every tool) and a link memlat-TOOL.8.gz to it per tool; the lintian
  overrides;
- lintian reports no error and no warning (overridden tags are listed, each override in
  contrib/debian/lintian-overrides says why).
runtime.deb_install (test_deb.py) installs, runs and purges it.

usage: check_deb.py CMAKE BUILD_DIR DEB VERSION ARCH TOOL..."""
import filecmp
import gzip
import os
import subprocess
import sys
import tempfile

SOURCE = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
UNIT_DIR = "usr/lib/systemd/system"
# e_machine of the ELF header (offset 18, little-endian) for each Debian architecture.
ELF_MACHINE = {"amd64": 62, "arm64": 183}


def units() -> list[str]:
    """contrib/systemd's units and drop-ins, relative to it (the .env files are templates of
    /etc/memlat, installed as examples)."""
    top = os.path.join(SOURCE, "contrib", "systemd")
    found = []
    for root, _, files in os.walk(top):
        found += [os.path.relpath(os.path.join(root, f), top) for f in files
                  if not f.endswith(".env")]
    return sorted(found)


def installed_unit_text(unit: str) -> str:
    """What the package's copy of contrib/systemd/UNIT says: the tree's, under /usr."""
    with open(os.path.join(SOURCE, "contrib", "systemd", unit)) as f:
        return f.read().replace("/usr/local/", "/usr/")


def expected_contents(entries: dict[str, str]) -> tuple[set[str], dict[str, str]]:
    """The package's files and its links (path -> target), paths without the leading '/', for
    the registry's ENTRIES (name -> its bare link, "" for none; tools/NAME/tool.cmake): every
    entry as memlat-NAME with its manual page; the BCC names (a link named as the entry) also
    under libexec/memlat."""
    files = {"usr/sbin/memlat", "usr/share/memlat/grafana/memlat.json",
             "usr/share/doc/memlat/README.md", "usr/share/doc/memlat/copyright",
             "usr/share/doc/memlat/changelog.gz", "usr/share/lintian/overrides/memlat",
             "usr/share/man/man8/memlat.8.gz"}
    files |= {f"{UNIT_DIR}/{u}" for u in units()}
    for folder in ("docs", "docs/tools"):
        files |= {f"usr/share/doc/memlat/{folder}/{page}"
                  for page in os.listdir(os.path.join(SOURCE, folder)) if page.endswith(".md")}
    files |= {f"usr/share/doc/memlat/examples/{e}"
              for e in os.listdir(os.path.join(SOURCE, "contrib", "systemd")) if e.endswith(".env")}
    links = {f"usr/sbin/memlat-{t}": "memlat" for t in entries}
    links |= {f"usr/libexec/memlat/{t}": "../../sbin/memlat"
              for t, link in entries.items() if link == t}
    links |= {f"usr/share/man/man8/memlat-{t}.8.gz": "memlat.8.gz" for t in entries}
    return files, links


def parse_entries(words: list[str]) -> dict[str, str]:
    """NAME=LINK words (CMakeLists.txt's MEMLAT_TOOL_AND_LINK) as name -> link."""
    return dict(w.split("=", 1) for w in words)


def run(argv: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def build_deb(cmake: str, build: str) -> str:
    """Runs the deb target; '' when it worked, else what went wrong."""
    r = run([cmake, "--build", build, "--target", "deb"], timeout=600)
    if r.returncode != 0:
        return f"cmake --build {build} --target deb exited {r.returncode}:\n{r.stdout}{r.stderr}"
    return ""


def listing(deb: str) -> dict[str, tuple[str, str, str]]:
    """dpkg-deb -c: path -> (mode, owner, link target or '')."""
    out = run(["dpkg-deb", "-c", deb]).stdout
    entries = {}
    for line in out.splitlines():
        fields = line.split(None, 5)
        mode, owner, name = fields[0], fields[1], fields[5]
        target = ""
        if " -> " in name:
            name, target = name.split(" -> ", 1)
        entries[name.removeprefix("./").rstrip("/")] = (mode, owner, target)
    return entries


def control(deb: str) -> dict[str, str]:
    fields, key = {}, None
    for line in run(["dpkg-deb", "-f", deb]).stdout.splitlines():
        if line.startswith(" ") and key:
            fields[key] += "\n" + line
        elif ":" in line:
            key, value = line.split(":", 1)
            fields[key] = value.strip()
    return fields


def check_package(deb: str, build: str, version: str, arch: str,
                  tools: dict[str, str]) -> list[str]:
    failures = []
    name = f"memlat_{version}_{arch}.deb"
    if os.path.basename(deb) != name or not os.path.isfile(deb):
        return [f"no {name} in {build}: {deb}"]

    fields = control(deb)
    print(run(["dpkg-deb", "-I", deb]).stdout)
    for key, want in (("Package", "memlat"), ("Version", version), ("Architecture", arch),
                      ("Section", "admin"), ("Priority", "optional")):
        if fields.get(key) != want:
            failures.append(f"control field {key}: {fields.get(key)!r}, expected {want!r}")
    for key in ("Maintainer", "Description", "Installed-Size"):
        if not fields.get(key):
            failures.append(f"control field {key} missing")
    for key in ("Depends", "Pre-Depends", "Recommends"):
        if key in fields:
            failures.append(f"control field {key}: {fields[key]!r}; the binary is static and "
                            "the package needs nothing")

    entries = listing(deb)
    print(run(["dpkg-deb", "-c", deb]).stdout)
    files, links = expected_contents(tools)
    got_files = {p for p, (mode, _, _) in entries.items() if mode.startswith("-")}
    got_links = {p: target for p, (mode, _, target) in entries.items() if mode.startswith("l")}
    if got_files != files:
        failures.append(f"files: missing {sorted(files - got_files)}, "
                        f"unexpected {sorted(got_files - files)}")
    if got_links != links:
        failures.append(f"links: {sorted(got_links.items())}, expected {sorted(links.items())}")
    not_root = [p for p, (_, owner, _) in entries.items() if owner != "root/root"]
    if not_root:
        failures.append(f"not owned by root/root: {not_root}")
    mode = entries.get("usr/sbin/memlat", ("",))[0]
    if mode != "-rwxr-xr-x":
        failures.append(f"usr/sbin/memlat has mode {mode}, expected -rwxr-xr-x")

    with tempfile.TemporaryDirectory() as tmp:
        run(["dpkg-deb", "-x", deb, tmp])
        memlat = os.path.join(tmp, "usr/sbin/memlat")
        if os.path.isfile(memlat):
            if not filecmp.cmp(memlat, os.path.join(build, "memlat"), shallow=False):
                failures.append(f"usr/sbin/memlat differs from {build}/memlat")
            with open(memlat, "rb") as f:
                header = f.read(20)
            machine = int.from_bytes(header[18:20], "little")
            if header[:4] != b"\x7fELF" or machine != ELF_MACHINE.get(arch):
                failures.append(f"usr/sbin/memlat: ELF machine {machine}, expected "
                                f"{ELF_MACHINE.get(arch)} ({arch})")
        for unit in units():
            path = os.path.join(tmp, UNIT_DIR, unit)
            if not os.path.isfile(path):
                continue
            with open(path) as f:
                text = f.read()
            if text != installed_unit_text(unit):
                failures.append(f"{UNIT_DIR}/{unit} is not contrib/systemd/{unit} with /usr "
                                "for /usr/local")
            if "/usr/local" in text:
                failures.append(f"{UNIT_DIR}/{unit} still names /usr/local")
        changelog = os.path.join(tmp, "usr/share/doc/memlat/changelog.gz")
        if os.path.isfile(changelog):
            with gzip.open(changelog, "rt") as f:
                first = f.readline()
            if not first.startswith(f"memlat ({version}) "):
                failures.append(f"changelog.gz starts {first!r}, not with version {version}")
        manual = os.path.join(tmp, "usr/share/man/man8/memlat.8.gz")
        if os.path.isfile(manual):
            with gzip.open(manual, "rt") as f:
                page = f.read().splitlines()
            # Each entry under the name its link or `memlat NAME` runs it by.
            missing = [t for t, link in tools.items()
                       if f".B {link}" not in page and f".B memlat {t}" not in page]
            if missing:
                failures.append(f"the manual page memlat.8 has no entry for {missing}")

    # lintian: every error and warning fails. Its overridden tags are shown (with the reason
    # contrib/debian/lintian-overrides gives) by a second run, whose status says nothing:
    # with --show-overrides lintian fails on the overridden tags too.
    lint = run(["lintian", "--fail-on", "error,warning", deb], timeout=600)
    shown = run(["lintian", "--show-overrides", "--display-info", "--pedantic", deb],
                timeout=600)
    print(f"$ lintian --show-overrides --display-info --pedantic {deb}\n{shown.stdout}")
    if lint.returncode != 0:
        failures.append(f"lintian --fail-on error,warning exited {lint.returncode}: "
                        f"{lint.stdout}{lint.stderr}")
    return failures


def main() -> int:
    cmake, build, deb, version, arch = sys.argv[1:6]
    tools = parse_entries(sys.argv[6:])
    for program in ("dpkg-deb", "lintian"):
        if run(["which", program]).returncode != 0:
            print(f"FAIL: {program} is not installed (scripts/install-deps.sh installs it)")
            return 1
    problem = build_deb(cmake, build)
    failures = [problem] if problem else check_package(deb, build, version, arch, tools)
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print(f"{deb}: {os.path.getsize(deb)} bytes, as expected")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
