"""Test helpers written once: free ports, waiting for a server, finding processes, a subprocess
that is always cleaned up, the headless browser, and the import graph of a source file."""
from __future__ import annotations

import ast
import os
import signal
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

# Debian's Chromium (scripts/install-system-packages.sh), driven by Playwright: no tool downloads
# a browser of its own. Shared by the browser tests and benchmarks/fresh_machine.py.
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-quic", "--disable-sync"]


def require_chromium() -> None:
    if not os.access(CHROMIUM, os.X_OK):
        import pytest

        pytest.fail(f"{CHROMIUM} is missing: run scripts/install-system-packages.sh (Debian's chromium package)")


def launch_chromium(pw):
    """A headless browser from a `sync_playwright()` context."""
    return pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


# Navigation waits out a loaded machine: in a CI run where the suite took 42 minutes (2,833 s for
# the job, against 16 usual), Streamlit pages missed Playwright's default 30 s load timeout.
PAGE_TIMEOUT_MS = 120_000


def open_page(browser):
    """A new page of the size the screenshots use, with navigation and waits that tolerate load."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_navigation_timeout(PAGE_TIMEOUT_MS)
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    return page


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def wait_http(url: str, proc: subprocess.Popen | None = None, timeout: float = 60, expect: bytes | None = None,
              log: Path | None = None) -> None:
    """Wait until `url` answers (with `expect` in the body, when given); fail early if `proc` exits."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                body = r.read()
                if expect is None or expect in body:
                    return
        except OSError:
            pass
        tail = log.read_text()[-3000:] if log and log.exists() else ""
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{proc.args} exited ({proc.returncode}) before {url} answered\n{tail}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} did not answer within {timeout:g} s\n{tail}")
        time.sleep(0.3)


def running_with(marker: str, where: str = "cmdline") -> list[int]:
    """Host pids whose command line (or environment) contains `marker`, zombies excluded."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if marker.encode() in (proc / where).read_bytes() and (proc / "stat").read_text().split()[2] != "Z":
                found.append(int(proc.name))
        except (OSError, IndexError):
            continue
    return found


@contextmanager
def background(argv: list[str], *, env: dict, log: Path, cwd: Path | None = None):
    """A process in its own group, its output in `log`; killed with its group on the way out."""
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=30)


def imports(path: Path, names: bool = False) -> set[str]:
    """Modules a source file imports (absolute names); with `names`, `from a import b` also
    yields `a.b` (b may be a module: the caller resolves which)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
            if names:
                out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


ROOT = Path(__file__).resolve().parent.parent


def load_benchmark(rel: str):
    """A script under benchmarks/ as a module: benchmarks are scripts, not an importable package,
    so that nothing of them can end up in the wheel."""
    import importlib.util
    import sys

    path = ROOT / "benchmarks" / rel
    name = "benchmarks_" + rel.removesuffix(".py").replace("/", "_")
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
