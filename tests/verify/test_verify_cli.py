"""`jaxmem verify` through click's runner: usage errors, a real run, --json, --script."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from jaxmem.evaluators.verify.cli import command

from .conftest import write_pair
from .test_verify_api import LOOP, MANIFEST


@pytest.fixture
def env(pair_settings, monkeypatch):
    monkeypatch.setenv("JAXMEM_DATA_DIR", str(pair_settings.data_dir))
    monkeypatch.setenv("JAXMEM_CORPUS_DIR", str(pair_settings.corpus_dir))
    write_pair(pair_settings.corpus_dir, "explicit-device-put", LOOP.format(x="np.ones(3)"),
               LOOP.format(x="jax.device_put(np.ones(3))"), MANIFEST.format(id="explicit-device-put"))
    return pair_settings


def test_command_is_named_verify():
    assert command.name == "verify"


def test_no_topics_and_no_all_is_a_usage_error(env):
    result = CliRunner().invoke(command, [])
    assert result.exit_code == 2
    assert "name topics or pass --all" in result.output and "explicit-device-put" in result.output


def test_unknown_topic_is_a_clean_error(env):
    result = CliRunner().invoke(command, ["no-such-topic"])
    assert result.exit_code == 1
    assert "no snippet pair for topic 'no-such-topic'; valid: explicit-device-put" in result.output
    assert "Traceback" not in result.output


def test_script_and_topics_do_not_mix(env, tmp_path):
    script = tmp_path / "s.py"
    script.write_text("x = 1\n")
    result = CliRunner().invoke(command, ["--script", str(script), "explicit-device-put"])
    assert result.exit_code == 2


@pytest.mark.slow
def test_all_prints_a_table_and_json_with_the_recorded_fields(env):
    result = CliRunner().invoke(command, ["--all"])
    assert result.exit_code == 0, result.output
    assert "explicit-device-put  h2d_transfers" in result.output
    assert "verified on cpu, jax " in result.output
    assert "not measurable on cpu" in result.output       # the gpu-only metric, labelled
    as_json = CliRunner().invoke(command, ["explicit-device-put", "--json"])
    body = json.loads(as_json.stdout)
    rec = body["records"][0]
    assert rec["origin"] == "cache"
    assert {"jax", "jaxlib", "backend", "device_kind", "date", "snippet_hash", "metrics"} <= set(rec)


@pytest.mark.slow
def test_script_reports_sync_points_by_line(env, tmp_path):
    script = tmp_path / "loop.py"
    script.write_text("import jax.numpy as jnp\nx = jnp.arange(3)\nfor i in range(3):\n    print(int(x[i]))\n")
    result = CliRunner().invoke(command, ["--script", str(script)])
    assert result.exit_code == 0, result.output
    assert "host sync points: 3" in result.output
    assert "line 4: 3x  print(int(x[i]))" in result.output


def test_missing_script_is_a_usage_error(env, tmp_path):
    result = CliRunner().invoke(command, ["--script", str(tmp_path / "nope.py")])
    assert result.exit_code == 2
    assert "does not exist" in result.output and "Traceback" not in result.output


def cgroup_here() -> bool:
    from jaxmem.evaluators.verify.sandbox import TaskCap

    cap = TaskCap(16)
    try:
        return cap.path is not None
    finally:
        cap.close()


SLOW_SCRIPT = '''
import subprocess, time
subprocess.Popen(["sleep", "{marker}"], start_new_session=True)  # a grandchild in a session of its own
print("started", flush=True)
time.sleep(120)
'''


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", ["bwrap", "process"])
def test_sigterm_stops_a_running_verification_and_everything_it_started(tmp_path, sandbox, capsys):
    """`jaxmem verify --script` stopped as a service manager stops it: the script's child processes
    go too: in the sandbox its PID namespace ends them; without it the run's cgroup does (the
    grandchild left the process group), where the machine lets us make one."""
    import os
    import signal
    import sys
    import time

    from tests.helpers import background, running_with

    marker = f"302.{time.time_ns() % 10**9:09d}"
    script = tmp_path / "slow.py"
    script.write_text(SLOW_SCRIPT.format(marker=marker))
    env = {**os.environ, "JAXMEM_SANDBOX": sandbox, "JAXMEM_DATA_DIR": str(tmp_path / "data")}
    log = tmp_path / "verify.log"
    with background([sys.executable, "-m", "jaxmem.app.cli", "verify", "--script", str(script), "--timeout", "300"],
                    env=env, log=log) as proc:
        deadline = time.monotonic() + 60
        while not running_with(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert running_with(marker), log.read_text()
        start = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        stopped = time.monotonic() - start
        time.sleep(0.3)
        survivors = running_with(marker)
    assert proc.returncode == 143 and "stopped" in log.read_text(), log.read_text()[-2000:]
    if sandbox == "bwrap" or cgroup_here():
        assert survivors == []
    else:  # no sandbox, no cgroup: a grandchild in a new session is beyond the group (README: Security)
        for pid in survivors:
            os.kill(pid, signal.SIGKILL)
    assert stopped < 10
    with capsys.disabled():
        print(f"\n[shutdown] jaxmem verify --script ({sandbox}): stopped {stopped:.1f} s after SIGTERM; "
              f"{len(survivors)} process(es) of the script left")
