"""The shared database on a real PostgreSQL server (initdb/pg_ctl on loopback): replicas that start
together migrate it once; feedback and verification evidence written by one replica are read by
another, and survive a replica restart and a restart of the server. The SQLite default needs nothing
started."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import MINI, ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture
def env(postgres, tmp_path):
    """A replica's environment: the fixture corpus with the real buffer-donation pair, its own data
    directory, the shared PostgreSQL database."""
    corpus = tmp_path / "corpus"
    shutil.copytree(MINI, corpus)
    shutil.copytree(ROOT / "corpus/snippets/buffer-donation", corpus / "snippets/buffer-donation")
    return {**os.environ, "JAXMEM_DATABASE_URL": postgres.url, "JAXMEM_CORPUS_DIR": str(corpus),
            "JAXMEM_VERIFY_REPEATS": "1", "JAXMEM_RAY_ADDRESS": ""}


def replica(env: dict, data_dir, *argv: str) -> dict:
    """Run one replica process to completion and return what it printed."""
    proc = subprocess.run([sys.executable, "-m", "tests.cluster.replica", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**env, "JAXMEM_DATA_DIR": str(data_dir)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_replicas_starting_together_migrate_the_database_once(env, tmp_path):
    from alembic.script import ScriptDirectory

    head = ScriptDirectory(str(ROOT / "ingest/migrations")).get_current_head()
    t = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda i: replica(env, tmp_path / f"r{i}", "migrate"), range(4)))
    print(f"\n[database] 4 replicas started together on PostgreSQL: {time.monotonic() - t:.1f} s, "
          f"versions {[g['version'] for g in got]}")
    assert head and all(g["version"] == [head] for g in got)


def test_feedback_is_shared_between_replicas_and_survives_restarts(env, postgres, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"  # two replicas: each its own data directory
    replica(env, a, "feedback-record", "ans-1", "up", "clear and right")
    assert replica(env, b, "feedback-get", "ans-1")["comment"] == "clear and right"
    replica(env, b, "feedback-record", "ans-1", "down", "changed my mind")
    postgres.restart()
    t = time.monotonic()
    got = replica(env, a, "feedback-get", "ans-1")  # replica a, restarted, after the server restarted
    print(f"\n[database] feedback read back after a PostgreSQL restart in {time.monotonic() - t:.1f} s "
          "(a fresh replica process)")
    assert (got["rating"], got["comment"]) == ("down", "changed my mind")
    assert not list(a.glob("*.sqlite")) and not list(b.glob("*.sqlite")), "nothing may fall back to SQLite"


def test_evidence_measured_by_one_replica_is_in_anothers_answers(env, postgres, tmp_path):
    t = time.monotonic()
    ran = replica(env, tmp_path / "a", "verify", "buffer-donation")
    print(f"\n[database] buffer-donation verified on replica a in {time.monotonic() - t:.1f} s: {ran['verdict']}")
    assert ran["verdict"] == "confirmed" and ran["node"]
    postgres.restart()
    seen = replica(env, tmp_path / "b", "evidence", "buffer-donation")
    assert seen == {"verdict": "confirmed", "node": ran["node"], "origin": "measured run"}


def test_the_sqlite_default_needs_nothing_started(tmp_path):
    env = {**os.environ, "JAXMEM_DATABASE_URL": "", "JAXMEM_RAY_ADDRESS": ""}
    replica(env, tmp_path / "solo", "feedback-record", "ans-2", "up", "ok")
    assert (tmp_path / "solo" / "jaxmem.sqlite").exists()
    assert replica(env, tmp_path / "solo", "feedback-get", "ans-2")["rating"] == "up"
