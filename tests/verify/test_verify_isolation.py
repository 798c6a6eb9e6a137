"""Isolation: timeouts kill the group, the memory ceiling holds, secrets stay out, errors report."""
from __future__ import annotations

import json
import time

import pytest

from jaxmem.evaluators.verify.runner import run_snippet
from jaxmem.evaluators.verify.sandbox import GiB, Limits, scrub_env
from tests.helpers import running_with

SECRETS = {"SLACK_BOT_TOKEN": "xoxb-secret", "SLACK_SIGNING_SECRET": "s3", "OPENAI_API_KEY": "sk-1",
           "AWS_SECRET_ACCESS_KEY": "a", "GITHUB_TOKEN": "g", "MY_SERVICE_PASSWORD": "p",
           "TF_CPP_MIN_LOG_LEVEL": "3", "JAX_LOGGING_LEVEL": "ERROR"}


def test_scrub_env_keeps_the_allow_list_and_drops_secrets():
    parent = {"PATH": "/bin", "HOME": "/root", "LANG": "C.UTF-8", "LC_ALL": "C", "JAX_PLATFORMS": "cpu",
              "UNRELATED": "x", **SECRETS}
    env = scrub_env(parent, {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"})
    assert {"PATH", "HOME", "LANG", "LC_ALL", "JAX_PLATFORMS", "XLA_FLAGS"} <= set(env)
    assert not set(SECRETS) & set(env)
    assert "UNRELATED" not in env


def test_scrub_env_refuses_a_secret_from_a_manifest():
    with pytest.raises(ValueError, match="SLACK_BOT_TOKEN"):
        scrub_env({}, {"SLACK_BOT_TOKEN": "x"})


@pytest.mark.slow
def test_snippet_sees_no_secret_of_the_parent(case, monkeypatch):
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    run = run_snippet(case("print_env"))
    assert run.ok, run.error
    out = json.loads(run.stdout)
    seen = out["env"]
    assert "jaxmem-verify-" in out["cwd"]   # a private temp cwd
    # temporary files: the sandbox's private /tmp, or the run's own directory without the sandbox
    assert seen["TMPDIR"] == ("/tmp" if run.isolation == "bwrap" else out["cwd"])
    # Compare values: importing jax sets TF_CPP_MIN_LOG_LEVEL=1 itself (harmless: warnings show).
    assert not {k for k, v in SECRETS.items() if seen.get(k) == v}
    assert not [k for k in seen if k.startswith(("SLACK_", "OPENAI_", "AWS_"))]
    assert not set(SECRETS.values()) & set(seen.values())
    assert seen["JAX_TRANSFER_GUARD"] == "log_explicit"


@pytest.mark.slow
def test_infinite_loop_is_killed_at_the_timeout_with_its_process_group(case):
    # 10 s, not 4: in a loaded CI run (the suite took 42 minutes) the child had not yet printed its
    # marker when 4 s were up; alone it prints within a second. The kill, not the wait, is tested.
    start = time.monotonic()
    run = run_snippet(case("infinite_loop"), limits=Limits(timeout_s=10))
    elapsed = time.monotonic() - start
    assert not run.ok
    assert "timed out after 10 s" in run.error
    assert elapsed < 25, elapsed
    assert run.stdout.split(), "the snippet printed no marker before the timeout"
    marker = run.stdout.split()[0]
    time.sleep(0.2)
    assert not running_with(marker), "the grandchild survived the timeout"


@pytest.mark.slow
def test_allocation_far_beyond_the_ceiling_is_a_clear_error(case):
    before = _available_memory()
    run = run_snippet(case("huge_allocation"), limits=Limits(memory_bytes=2 * GiB))
    assert not run.ok
    assert "memory ceiling of 2.0 GiB" in run.error, run.error
    assert "MemoryError" in run.error
    # The machine is unharmed: the allocation never happened.
    assert _available_memory() > before - 1 * GiB


def _available_memory() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


@pytest.mark.slow
def test_raising_snippet_is_reported_with_its_traceback(case):
    run = run_snippet(case("raises"))
    assert not run.ok
    assert run.error == "ValueError: batch 0 is corrupt"
    assert 'raises.py", line 6, in <module>' in run.traceback
    assert 'raises.py", line 2, in load_batch' in run.traceback
    assert "evaluators/verify/probe.py" not in run.traceback


@pytest.mark.slow
def test_syntax_error_is_reported_not_crashed_on(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("for i in range(3)\n    pass\n")
    run = run_snippet(bad)
    assert not run.ok
    assert run.error.startswith("SyntaxError: expected ':'"), run.error


@pytest.mark.slow
def test_hard_exit_without_a_result_is_an_error(tmp_path):
    gone = tmp_path / "gone.py"
    gone.write_text("import os, sys\nsys.stderr.write('bye\\n')\nos._exit(0)\n")
    run = run_snippet(gone)
    assert run.error == "the child ended without writing a result: bye"


@pytest.mark.parametrize("isolation", ["process", "bwrap"])
def test_a_snippet_imports_the_standard_library_not_the_verifiers_modules(case, isolation):
    from jaxmem.evaluators.verify.sandbox import bwrap_problem

    if isolation == "bwrap" and bwrap_problem():
        pytest.skip(bwrap_problem())
    run = run_snippet(case("stdlib_names"), isolation=isolation)
    assert run.ok, run.error
    out = json.loads(run.stdout)
    assert out["queue"] == 1 and "evaluators" not in out["from"], out


def test_a_task_cap_is_emptied_against_a_forking_child_and_closes_once():
    """The run's cgroup is closed with no task left in it even while what is in it keeps forking
    (further forks are refused first), and a second close returns at once: the sandbox closes
    it on the way out and again in its `finally`, and a second close used to spin until its
    deadline on the directory the first had removed."""
    import subprocess
    import sys

    from jaxmem.evaluators.verify.sandbox import TaskCap

    cap = TaskCap(16)
    if cap.path is None:
        cap.close()
        pytest.skip("no writable pids cgroup on this machine")
    forker = ("import os, time\n"
              "while True:\n"
              "    try:\n"
              "        if os.fork() == 0:\n"
              "            time.sleep(60)\n"
              "            os._exit(0)\n"
              "    except OSError:\n"
              "        time.sleep(0.001)\n")
    proc = subprocess.Popen([sys.executable, "-c", forker], preexec_fn=cap.join, start_new_session=True)
    try:
        time.sleep(1.0)
        assert cap.hit()
        path = cap.path
        cap.close()
        assert not path.exists()
        start = time.monotonic()
        cap.close()
        assert time.monotonic() - start < 0.5
    finally:
        proc.kill()
        proc.wait(timeout=30)
