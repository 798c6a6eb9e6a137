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
from pathlib import Path

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

    head = ScriptDirectory(str(ROOT / "core/migrations")).get_current_head()
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


def test_replicas_on_two_hosts_syncing_one_chroma_server_take_turns(env, postgres, chroma_server, tmp_path):
    """Each replica's lock file covers its own machine only: the second host's ingest must wait for
    the first through the shared database, or its repair step deletes the other's chunks, written
    but not yet recorded, as orphans. Here this process holds the ingest lock as a replica on another
    host would (its own data directory); a replica's ingest waits until it is released."""
    from jaxmem.core.settings import Settings
    from jaxmem.ingest.pipeline import corpus_documents, one_ingest_at_a_time
    from jaxmem.ingest.store import Store

    host, port = chroma_server
    env = {**env, "CHROMA_HOST": host, "CHROMA_PORT": str(port), "JAXMEM_DATABASE_URL": postgres.database("turns")}

    def start_ingest(data_dir):
        return subprocess.Popen([sys.executable, "-m", "jaxmem.app.cli", "ingest", "--json"], cwd=ROOT, text=True,
                                env={**env, "JAXMEM_DATA_DIR": str(data_dir)}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)

    t = time.monotonic()
    first = start_ingest(tmp_path / "a")
    assert first.wait(300) == 0, first.stderr.read()
    alone = time.monotonic() - t  # a whole ingest process, unhindered: the wait below is longer
    corpus = Path(env["JAXMEM_CORPUS_DIR"])
    for path in (corpus / "cards").glob("*/*.md"):
        path.write_text(path.read_text(encoding="utf-8").replace("GPU", "GPU-b"), encoding="utf-8")
    settings = Settings(data_dir=tmp_path / "other-host", corpus_dir=corpus, chroma_host=host, chroma_port=port,
                        database_url=env["JAXMEM_DATABASE_URL"])
    with one_ingest_at_a_time(settings):
        second = start_ingest(tmp_path / "b")
        held = max(2 * alone, 6.0)
        time.sleep(held)
        assert second.poll() is None, f"the ingest did not wait for the other host's ({held:.0f} s held)"
    assert second.wait(300) == 0, second.stderr.read()
    print(f"\n[database] a replica's ingest waited {held:.0f} s for another host's lock (alone it takes "
          f"{alone:.1f} s), then synced")
    assert Store(settings).info()["chunks"] == len(corpus_documents(corpus))
