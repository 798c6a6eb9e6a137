"""What a newcomer waits for: the README's two commands on a clean clone, timed.

  1. `git clone` of this repository's HEAD into a temporary folder, with an empty HOME (so an
     empty data directory, embedding cache, model caches and pip cache: every package comes from
     the registry again);
  2. `make run` there: the install, then `jaxmem web`; the first question is typed into the real
     page in headless Chromium (Debian's, as the browser tests use) and timed until the answer is
     rendered;
  3. `make test` in a second clean clone, timed, with its summary line.

Prints install time, time to first answer of `make run`, `make test` time and result. Run it
from the project's dev environment (it drives Chromium with Playwright from there):

  .venv/bin/python benchmarks/fresh_machine.py [--keep-pip-cache] [--skip-test | --skip-run]
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.helpers import free_port, launch_chromium  # noqa: E402  (a dev-environment script, like the tests)

QUESTION = "How do I stop JAX from grabbing 75% of the GPU at startup?"


def clean_clone(where: Path) -> Path:
    subprocess.run(["git", "clone", "-q", "--no-local", str(ROOT), str(where)], check=True)
    return where


def fresh_env(home: Path, keep_pip_cache: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JAXMEM_", "VIRTUAL_ENV", "CHROMA_", "PYTHON")) and k != "PATH"}
    home.mkdir(parents=True, exist_ok=True)
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if ".venv" not in p)
    env.update(HOME=str(home), PATH=path, XDG_CACHE_HOME=str(home / ".cache"))
    # The machine's pip configuration (package index, local wheels) is not a cache: keep it.
    user_conf = Path.home() / ".config" / "pip" / "pip.conf"
    if user_conf.exists() and "PIP_CONFIG_FILE" not in env:
        env["PIP_CONFIG_FILE"] = str(user_conf)
    if keep_pip_cache:
        env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")
    return env


def first_answer(url: str, timeout_s: float) -> float:
    """Open the page, ask, return when the answer (its feedback widget) is on screen."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        page = browser.new_page()
        page.goto(url)
        box = page.get_by_test_id("stChatInputTextArea")
        box.wait_for(timeout=timeout_s * 1000)
        box.fill(QUESTION)
        box.press("Enter")
        page.get_by_test_id("stChatMessage").nth(1).get_by_test_id("stFeedback").wait_for(timeout=timeout_s * 1000)
        text = page.get_by_test_id("stChatMessage").nth(1).inner_text()
        browser.close()
    if "XLA_PYTHON_CLIENT_PREALLOCATE" not in text:
        raise SystemExit(f"the first answer does not name the fix:\n{text[:1500]}")
    return time.monotonic()


def time_make_run(clone: Path, env: dict, limit_s: float) -> dict:
    port = free_port()
    log = clone / "make-run.log"
    t0 = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(["make", "run", f"ARGS=--port {port}"], cwd=clone, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    installed = healthy = None
    try:
        while time.monotonic() - t0 < limit_s:
            if installed is None and (clone / ".venv" / ".installed").exists():
                installed = time.monotonic()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        healthy = time.monotonic()
                        break
            except OSError:
                pass
            if proc.poll() is not None:
                raise SystemExit(f"make run exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        if healthy is None:
            raise SystemExit(f"make run did not serve within {limit_s:.0f} s:\n{log.read_text()[-3000:]}")
        answered = first_answer(f"http://127.0.0.1:{port}", timeout_s=limit_s - (time.monotonic() - t0))
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
        except ProcessLookupError:  # make already exited (the error above says why)
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    built = re.search(r"built the index: .*", log.read_text())
    return {"install_s": (installed or healthy) - t0, "serving_s": healthy - t0, "first_answer_s": answered - t0,
            "index": built.group(0) if built else "index already there"}


def time_make_test(clone: Path, env: dict) -> dict:
    t0 = time.monotonic()
    proc = subprocess.run(["make", "test"], cwd=clone, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - t0
    # The whole output stays beside the clone: a failure here must be readable afterwards.
    (clone / "make-test.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")
    tail = (proc.stdout + proc.stderr).strip().splitlines()
    summary = next((line for line in reversed(tail) if re.search(r"\d+ (passed|failed)", line)), tail[-1] if tail else "")
    failed = [line for line in tail if line.startswith("FAILED ")]
    return {"test_s": elapsed, "rc": proc.returncode, "summary": summary.strip("= "),
            "failed": failed, "log": str(clone / "make-test.log")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep-pip-cache", action="store_true", help="let pip use this machine's download cache")
    ap.add_argument("--skip-test", action="store_true", help="only time `make run`")
    ap.add_argument("--skip-run", action="store_true", help="only time `make test`")
    ap.add_argument("--limit", type=float, default=900, help="seconds `make run` may take to answer")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="jaxmem-fresh-"))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    print(f"clean clones of {commit} under {work}; empty HOME each; pip cache {'kept' if args.keep_pip_cache else 'empty'}",
          flush=True)
    rows = []
    if not args.skip_run:
        run = time_make_run(clean_clone(work / "run"), fresh_env(work / "home-run", args.keep_pip_cache), args.limit)
        rows += [("make run: install", f"{run['install_s']:.0f} s", ""),
                 ("make run: serving (index built)", f"{run['serving_s']:.0f} s", run["index"]),
                 ("make run: first answer in the browser", f"{run['first_answer_s']:.0f} s", "target <= 300 s")]
    if not args.skip_test:
        test = time_make_test(clean_clone(work / "test"), fresh_env(work / "home-test", args.keep_pip_cache))
        rows.append(("make test (install + tests)", f"{test['test_s']:.0f} s",
                     f"rc {test['rc']}: {test['summary']}; target <= 900 s"))
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"{name:{width}}  {value:>7}  {note}")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    if not args.skip_test and test["rc"] != 0:
        for line in test["failed"]:
            print(line)
        print(f"the whole output of make test: {test['log']}")
        sys.exit(1)


if __name__ == "__main__":
    main()
