#!/usr/bin/env python3
"""Runtime test of --web.config.file: the exporter over TLS with basic authentication, scraped
by a real Prometheus (Debian's package, started by the test as in test_prometheus.py).

The test makes a self-signed certificate for 127.0.0.1 (openssl) and a bcrypt hash of a
password (libxcrypt, through Python's crypt module), starts cachestat --prometheus
(runtime.prometheus_tls_basic_auth) or memlat exporter (runtime.exporter_tls_basic_auth) with a
web configuration naming them, then checks:
- by hand (Python's ssl, verifying the certificate): no credentials and a wrong password get
  401 with a Basic challenge, the right one gets the metrics; plain HTTP gets no answer;
- a Prometheus scraping with scheme https, the certificate as its CA and the right password
  scrapes (up 1) and stores the tool's metrics;
- a Prometheus given a wrong password is refused: its scrapes fail with 401 (up 0).
A build without TLS (cmake -DMEMLAT_TLS=OFF, the default) refuses --web.config.file with a usage
error naming the option that adds it; there the test checks that and reports itself skipped.
"""
import base64
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
import warnings

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memlat_test import (Failure, Test, Tool, binary, build_dir, log, main, run,  # noqa: E402
                         scenario, skip)

USER, PASSWORD = "prometheus", "s3cret pass"


def tls_build() -> bool:
    with open(os.path.join(build_dir(), "CMakeCache.txt")) as f:
        return any(line.strip() in ("MEMLAT_TLS:BOOL=ON", "MEMLAT_TLS:BOOL=TRUE") for line in f)


def bcrypt_hash(password: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import crypt
        except ImportError:
            skip("Python's crypt module (libxcrypt) is not there to make a bcrypt hash")
    hashed = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 10))
    if not hashed or not hashed.startswith("$2"):
        skip(f"libxcrypt made no bcrypt hash here: {hashed!r}")
    return hashed


def make_certificate(directory: str) -> tuple[str, str]:
    openssl = shutil.which("openssl")
    if not openssl:
        skip("openssl is not installed (it makes the test's certificate)")
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    r = run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
             "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert, "-days",
             "1", "-subj", "/CN=memlat test", "-addext", "subjectAltName=IP:127.0.0.1"])
    if r.rc != 0:
        raise Failure(f"openssl could not make a certificate:\n{r.describe()}")
    return cert, key


def get(url: str, cafile: str, auth: tuple[str, str] = None) -> tuple[int, dict, str]:
    headers = {}
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    context = ssl.create_default_context(cafile=cafile)
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10,
                                    context=context) as r:
            body = r.read()
            # A profile is gzip's bytes: returned as latin-1 text, one character a byte.
            return r.status, dict(r.headers), body.decode(
                "latin-1" if body.startswith(b"\x1f\x8b") else "utf-8")
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode("utf-8", "replace")


def failed_scrape(prom, timeout: float = 15.0) -> str:
    """Waits for Prometheus to have scraped its target and failed; returns its lastError."""
    import test_prometheus as tp
    import json
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        targets = json.loads(tp.http_get(prom.url + "/api/v1/targets")[2])["data"]["activeTargets"]
        if targets and targets[0]["health"] == "down" and targets[0]["lastError"]:
            return targets[0]["lastError"]
        time.sleep(0.1)
    raise Failure(f"no failed scrape within {timeout:.0f} s")


def job_options(cert: str, password: str) -> str:
    return ("    scheme: https\n"
            f"    tls_config:\n      ca_file: {cert}\n"
            f"    basic_auth:\n      username: {USER}\n      password: '{password}'\n")


def tls_basic_auth(t: Test, exporter: bool) -> None:
    """The checks of the module's docstring, on `cachestat --prometheus` or on `memlat exporter
    --tools cachestat,memstall --memstall.profiles`."""
    directory = tempfile.mkdtemp(prefix="memlat_web_")
    try:
        web = os.path.join(directory, "web.yml")
        if not tls_build():
            with open(web, "w") as f:
                f.write("tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n")
            r = run(serving(exporter) + ["--web.config.file", web])
            t.check_eq("a build without TLS: --web.config.file is a usage error", 2, r.rc)
            t.check_in("the message names the option that adds TLS", "-DMEMLAT_TLS=ON", r.stderr,
                       "stderr")
            skip("this build has no TLS and basic authentication (cmake -DMEMLAT_TLS=ON): only "
                 "their refusal was checked")
        import test_prometheus as tp
        cert, key = make_certificate(directory)
        with open(web, "w") as f:
            f.write("# made by test_web_config.py\ntls_server_config:\n"
                    "  cert_file: cert.pem\n  key_file: key.pem\n"
                    f"basic_auth_users:\n  {USER}: {bcrypt_hash(PASSWORD)}\n")
        argv = serving(exporter)
        with Tool(os.path.basename(argv[0]), *argv[1:], "--web.config.file", web) as tool:
            port = tp.exporter_port(tool)
            t.check_in("it says it serves HTTPS", f"https://127.0.0.1:{port}/metrics",
                       "".join(tool._err.lines), "stderr")
            url = f"https://127.0.0.1:{port}/metrics"
            status, headers, _ = get(url, cert)
            t.check_eq("no credentials: 401", 401, status)
            t.check_eq("... with a Basic challenge", 'Basic realm="memlat"',
                       headers.get("WWW-Authenticate"))
            t.check_eq("a wrong password: 401", 401, get(url, cert, (USER, "wrong"))[0])
            t.check_eq("an unknown user: 401", 401, get(url, cert, ("root", PASSWORD))[0])
            status, _, body = get(url, cert, (USER, PASSWORD))
            t.check_eq("the right password: 200", 200, status)
            t.check_in("... and the metrics", "memlat_page_cache_accesses_total", body, "body")
            try:
                plain = tp.http_get(f"http://127.0.0.1:{port}/metrics", timeout=3)[0]
            except OSError as e:
                plain = f"no answer ({type(e).__name__})"
            t.check(not isinstance(plain, int), "plain HTTP gets no HTTP answer", "no answer",
                    plain)
            if exporter:
                # The stall profile is behind the same TLS and users as the metrics.
                profile = f"https://127.0.0.1:{port}/debug/pprof/memstall?seconds=1"
                t.check_eq("a profile without credentials: 401", 401, get(profile, cert)[0])
                status, _, body = get(profile, cert, (USER, PASSWORD))
                t.check_eq("a profile with the password: 200", 200, status)
                t.check_eq("... gzip's bytes (pprof)", "\x1f\x8b", body[:2])

            with tp.Prometheus(f"127.0.0.1:{port}", job_options(cert, PASSWORD)) as prom:
                t1 = prom.wait_scrape()
                accesses = prom.value("memlat_page_cache_accesses_total", t1)
                up = prom.value('up{job="memlat"}', t1)
            t.check_eq("Prometheus over TLS with the password: up", 1.0, up)
            t.check(accesses is not None, "Prometheus stored memlat_page_cache_accesses_total",
                    "a value", accesses)

            with tp.Prometheus(f"127.0.0.1:{port}", job_options(cert, "wrong"),
                               wait=False) as prom:
                error = failed_scrape(prom)
                up = prom.value('up{job="memlat"}')
            log(f"  the refused scrape: {error}")
            t.check_in("Prometheus with a wrong password is refused (401)", "401", error,
                       "its scrape error")
            t.check_eq("... up", 0.0, up)
        t.check_eq("the exit status after SIGINT", 0, tool.result.rc)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def serving(exporter: bool) -> list[str]:
    """The command line of what serves: memlat exporter (cachestat, and memstall for its
    profile), or cachestat."""
    if exporter:
        return [binary("memlat"), "exporter", "--tools", "cachestat,memstall",
                "--memstall.profiles", "--web.listen-address", "127.0.0.1:0"]
    return [binary("cachestat"), "--prometheus", "127.0.0.1:0"]


@scenario("prometheus_tls_basic_auth")
def _(t: Test):
    tls_basic_auth(t, exporter=False)


@scenario("exporter_tls_basic_auth")
def _(t: Test):
    tls_basic_auth(t, exporter=True)


if __name__ == "__main__":
    sys.exit(main())
