"""The real parts of a deployment, started on loopback by the test run: a Ray head node plus a
worker node whose custom resource stands in for an accelerator kind, and a PostgreSQL server
initialised in a temporary directory (initdb / pg_ctl; as the `postgres` user when the tests run
as root, which PostgreSQL refuses)."""
from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import free_port

ACCEL = "jaxmem_test_accel"  # the worker's custom resource: "the GPU workers" of a real cluster
PG_BIN = next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin"))), None) if Path("/usr/lib/postgresql").exists() else None


@dataclass
class RayCluster:
    address: str
    worker_node: str
    env: dict


def _ray(*args: str, env: dict) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("ray")
    return subprocess.run([str(exe), *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory):
    # Short: Ray's socket paths live under it, and an AF_UNIX path may not exceed 107 bytes (a
    # pytest-xdist worker's temporary folder is long enough to pass that).
    temp = Path(tempfile.mkdtemp(prefix="jm-ray-", dir="/tmp"))
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "RAY_DEDUP_LOGS": "0"}
    port = free_port()
    t = time.monotonic()
    head = _ray("start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port), "--num-cpus", "1",
                "--include-dashboard", "false", "--disable-usage-stats", "--temp-dir", str(temp), env=env)
    assert head.returncode == 0, head.stdout + head.stderr
    worker = _ray("start", "--address", f"127.0.0.1:{port}", "--node-ip-address", "127.0.0.1", "--num-cpus", "2",
                  "--resources", json.dumps({ACCEL: 1}), "--disable-usage-stats", env=env)
    assert worker.returncode == 0, worker.stdout + worker.stderr
    started = time.monotonic() - t
    import ray

    ray.init(address=f"127.0.0.1:{port}", namespace="jaxmem-tests", log_to_driver=False, logging_level="ERROR")
    deadline = time.monotonic() + 60
    node = None
    while node is None and time.monotonic() < deadline:
        node = next((n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get(ACCEL)), None)
        time.sleep(0.2)
    ray.shutdown()
    assert node, "the worker node did not join"
    print(f"\n[cluster] Ray head + worker ({ACCEL}) started in {started:.1f} s")
    yield RayCluster(f"127.0.0.1:{port}", node, env)
    import ray as ray_

    ray_.shutdown()
    _ray("stop", "--force", env=env)
    shutil.rmtree(temp, ignore_errors=True)


@dataclass
class Postgres:
    url: str
    restart: object  # () -> None: stop the server and start it again on the same data directory
    database: object  # (name) -> URL of a new, empty database on the same server


@pytest.fixture(scope="session")
def postgres(tmp_path_factory):
    """A throwaway PostgreSQL server; yields its URL and a way to restart it."""
    if PG_BIN is None or not (PG_BIN / "initdb").exists():
        pytest.fail("PostgreSQL is missing: run scripts/install-system-packages.sh (Debian's postgresql)")
    # Not under pytest's temp folder: that is private to the user running the tests, and the server
    # may have to run as another one.
    root = Path(tempfile.mkdtemp(prefix="jaxmem-pg-"))
    data, port = root / "data", free_port()
    as_user: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        shutil.chown(root, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]

    def run(*cmd):
        proc = subprocess.run([*as_user, *cmd], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr

    def start():
        run(str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", f"-p {port} -k {root} -h 127.0.0.1 -c fsync=off",
            "-l", str(root / "log"), "-w", "start")

    def restart():
        run(str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        start()

    made = itertools.count()

    def database(name: str) -> str:
        # One server for the session, one database per test that needs a clean slate: the
        # evidence a test stores must not show up in another test's answers.
        name = f"{name}_{next(made)}"
        run(str(PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "jaxmem", name)
        return f"postgresql+psycopg://jaxmem@127.0.0.1:{port}/{name}"

    t = time.monotonic()
    run(str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "jaxmem", "--no-sync")
    start()
    url = database("jaxmem")
    print(f"\n[cluster] PostgreSQL {PG_BIN.parent.name} on 127.0.0.1:{port} started in {time.monotonic() - t:.1f} s")
    yield Postgres(url, restart, database)
    subprocess.run([*as_user, str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                   capture_output=True, timeout=60)
    shutil.rmtree(root, ignore_errors=True)
