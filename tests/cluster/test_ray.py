"""Verification as Ray jobs on a real (loopback) cluster: the job runs on the worker that has the
resource, its node id is in the evidence, another replica's answers show it; a killed worker is
retried; no worker with the resource is a clear error, not a hang; the queues are visible."""
from __future__ import annotations

import os
import shutil
import signal
import threading
import time

import pytest

from tests.cluster.conftest import ACCEL
from tests.conftest import MINI, ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture
def cluster_settings(ray_cluster, tmp_path, monkeypatch):
    """The fixture corpus plus the real buffer-donation pair; verification through the cluster."""
    from jaxmem.core.settings import Settings

    for k, v in ray_cluster.env.items():
        if k.startswith("RAY_"):
            monkeypatch.setenv(k, v)
    corpus = tmp_path / "corpus"
    shutil.copytree(MINI, corpus)
    shutil.copytree(ROOT / "corpus/snippets/buffer-donation", corpus / "snippets/buffer-donation")
    return Settings(data_dir=tmp_path / "data", corpus_dir=corpus, ray_address=ray_cluster.address,
                    ray_accelerator=ACCEL, verify_repeats=1, ray_timeout=300)


def services(settings, nano):
    from jaxmem.app.advisor import Advisor
    from jaxmem.app.services import Services
    from jaxmem.ingest.pipeline import ingest

    ingest(settings, embeddings=nano, show_progress=False)
    return Services(settings, advisor=Advisor(settings, embeddings=nano))


def test_a_verification_runs_on_the_worker_with_the_resource(cluster_settings, ray_cluster, nano, capsys):
    svc = services(cluster_settings, nano)
    progress = []
    t = time.monotonic()
    evidence = svc.verify_card("buffer-donation", on_progress=progress.append)
    through_ray = time.monotonic() - t
    assert evidence.verdict == "confirmed" and evidence.node == ray_cluster.worker_node
    assert any(p.stage == "running" and "Ray node" in (p.where or "") for p in progress)
    # "another replica": a second service layer on the same database sees the record, node and all
    other = services(cluster_settings, nano)
    ans = other.ask("How do I reuse the input buffer with donate_argnums so parameters are not held twice?")
    ev = next(c.evidence for c in ans.citations if c.card == "buffer-donation")
    assert ev["node"] == ray_cluster.worker_node and ev["origin"] == "measured run"
    from jaxmem.evaluators.verify.jobs import LocalVerifier

    t = time.monotonic()
    LocalVerifier(cluster_settings).run(
        __import__("jaxmem.evaluators.verify.jobs", fromlist=["Request"]).Request("card", topic="buffer-donation", repeats=1))
    local = time.monotonic() - t
    with capsys.disabled():
        print(f"\n[ray] verification through Ray on the {ACCEL} worker: {through_ray:.1f} s "
              f"(the same job on this machine without Ray: {local:.1f} s); node {evidence.node[:12]} in the evidence, "
              f"seen by a second replica's answer")


def test_a_killed_worker_is_retried(cluster_settings, ray_cluster, nano, capsys):
    import ray

    from jaxmem.evaluators.verify import ray_jobs

    svc = services(cluster_settings, nano)
    killed, seen = [], []

    def kill_first_attempt(progress):
        seen.append(progress)
        if killed or progress.stage != "running":
            return
        board = ray.get_actor(ray_jobs.BOARD, namespace=ray_jobs.NAMESPACE)
        for j in ray.get(board.all.remote()).values():
            if j.get("pid") and j["attempts"] == 1:
                os.kill(j["pid"], signal.SIGKILL)  # the worker process running the job dies
                killed.append(j["pid"])

    t = time.monotonic()
    evidence = svc.verify_card("buffer-donation", on_progress=kill_first_attempt)
    elapsed = time.monotonic() - t
    assert killed and evidence.verdict == "confirmed"
    assert any("attempt 2" in p.message for p in seen), [p.message for p in seen]
    with capsys.disabled():
        print(f"\n[ray] worker process {killed[0]} killed mid-run: Ray retried the job once (attempt 2), "
              f"verdict {evidence.verdict}, {elapsed:.1f} s in all")


def test_no_worker_with_the_resource_is_a_clear_error_not_a_hang(cluster_settings, nano, capsys):
    from jaxmem.core.errors import JaxmemError

    settings = cluster_settings.model_copy(update={"ray_accelerator": "no_such_accelerator", "ray_timeout": 5})
    svc = services(settings, nano)
    queued = []
    t = time.monotonic()
    with pytest.raises(JaxmemError) as err:
        svc.verify_card("buffer-donation", on_progress=queued.append)
    elapsed = time.monotonic() - t
    assert "no free worker with 'no_such_accelerator'" in err.value.message and "JAXMEM_RAY_TIMEOUT" in err.value.message
    assert queued and queued[0].stage == "queued" and queued[0].position == 1
    assert elapsed < 30
    with capsys.disabled():
        print(f"\n[ray] no worker with the resource: a clear error after {elapsed:.1f} s (timeout 5 s), "
              f"the job shown queued meanwhile")


def test_the_queues_show_what_waits_and_runs_where(cluster_settings, ray_cluster, nano):
    svc = services(cluster_settings, nano)
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("ev", svc.verify_card("buffer-donation")))
    t.start()
    seen = []
    deadline = time.monotonic() + 120
    while t.is_alive() and time.monotonic() < deadline:
        q = next(q for q in svc.queues() if q["queue"] == f"ray:{ACCEL}")
        seen.append((q["waiting"], q["running"], q["where"]))
        time.sleep(0.3)
    t.join()
    assert any(running == 1 and ray_cluster.worker_node[:12] in where for _, running, where in seen), seen
    assert result["ev"].verdict == "confirmed"


def test_the_cli_verifies_through_the_cluster_and_names_the_worker(cluster_settings, ray_cluster, tmp_path):
    """`jaxmem verify` with JAXMEM_RAY_ADDRESS set runs on the Ray pool the front ends use (an
    operator records GPU evidence from the command line), and its record names the worker node."""
    import json
    import subprocess
    import sys

    env = {**{k: v for k, v in os.environ.items() if not k.startswith("JAXMEM_")}, **ray_cluster.env,
           "JAXMEM_RAY_ADDRESS": ray_cluster.address, "JAXMEM_RAY_ACCELERATOR": cluster_settings.ray_accelerator,
           "JAXMEM_CORPUS_DIR": str(cluster_settings.corpus_dir), "JAXMEM_DATA_DIR": str(tmp_path / "cli-data"),
           "JAXMEM_RAY_TIMEOUT": "300"}
    proc = subprocess.run([sys.executable, "-m", "jaxmem.app.cli", "verify", "buffer-donation", "--json", "--repeats", "1"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (record,) = json.loads(proc.stdout)["records"]
    assert record["node"] == ray_cluster.worker_node and record["verdict"] == "confirmed"
    assert f"verifying on the Ray cluster at {ray_cluster.address}" in proc.stderr
    unknown = subprocess.run([sys.executable, "-m", "jaxmem.app.cli", "verify", "no-such-topic"], env=env,
                             capture_output=True, text=True, timeout=120)
    assert unknown.returncode != 0 and "no snippet pair for topic 'no-such-topic'" in unknown.stderr
    assert "Traceback" not in unknown.stderr
