"""Faults: an ingest killed at random points, feedback written just before a kill, a Chroma
server that goes away mid-session. Each prints its figures."""
from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.faults.asker import QUESTIONS
from tests.faults.conftest import ROOT, jaxmem
from tests.helpers import background, free_port, wait_http

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
TRIALS = 6  # kill points drawn across the whole ingest window; each trial is two process starts


REV = re.compile(r" \(rev \d+\)$")


def rewrite_every_card(corpus: Path, trial: int) -> None:
    """Every prose line of every card changes (code, headings and front matter stay, so the corpus
    check passes): the next ingest has real work, embedding included."""
    for path in sorted((corpus / "cards").glob("*/*.md")):
        head, sep, body = path.read_text(encoding="utf-8").partition("\n---\n")
        out, fenced = [], False
        for line in body.split("\n"):
            if line.startswith("```"):
                fenced = not fenced
            elif line.strip() and not fenced and not line.startswith("#"):
                line = REV.sub("", line) + f" (rev {trial})"
            out.append(line)
        path.write_text(head + sep + "\n".join(out), encoding="utf-8")


def ask_once(env: dict) -> tuple[str, set, dict | str]:
    q, right = QUESTIONS[0]
    proc = subprocess.run(jaxmem("ask", q, "--json"), env=env, capture_output=True, text=True, cwd=ROOT, timeout=120)
    return q, right, json.loads(proc.stdout) if proc.returncode == 0 else proc.stderr


def test_an_ingest_killed_at_random_points_leaves_an_index_that_answers(shared_env, capsys):
    from jaxmem.core.settings import Settings
    from jaxmem.ingest.pipeline import corpus_documents
    from jaxmem.ingest.store import Store

    corpus = Path(shared_env["JAXMEM_CORPUS_DIR"])
    env = {**shared_env, "JAXMEM_EMBED_CACHE": str(Path(shared_env["JAXMEM_DATA_DIR"]).parent / "cold-cache")}
    subprocess.run(jaxmem("ingest"), env=env, check=True, capture_output=True, cwd=ROOT)
    # How long a run with this much work takes, uninterrupted: the kills land inside that window.
    rewrite_every_card(corpus, 100)
    t = time.monotonic()
    subprocess.run(jaxmem("ingest"), env=env, check=True, capture_output=True, cwd=ROOT)
    duration = time.monotonic() - t
    rng = random.Random(11)
    killed_after, answered = [], 0
    for trial in range(2 * TRIALS):
        if sum(d is not None for d in killed_after) >= TRIALS:
            break
        rewrite_every_card(corpus, trial)  # new text: the sync must embed and replace chunks
        delay = rng.uniform(0.2, 0.95) * duration
        proc = subprocess.Popen(jaxmem("ingest"), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                cwd=ROOT, start_new_session=True)
        time.sleep(delay)
        finished = proc.poll() is not None
        if not finished:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            # The timing run was slower than this one (a busy machine): aim the next kills earlier,
            # so the trials still interrupt the ingest mid-run rather than after it finished.
            duration *= 0.7
        proc.wait()
        killed_after.append(None if finished else round(delay, 1))
        q, right, ans = ask_once(env)  # a fresh process, as a web or Slack worker that starts now
        assert isinstance(ans, dict), f"trial {trial}: no answer after the kill: {ans}"
        assert not ans["abstained"] and ans["citations"][0]["card"] in right, (trial, ans["citations"])
        answered += 1
    final = subprocess.run(jaxmem("ingest", "--json"), env=env, capture_output=True, text=True, cwd=ROOT)
    assert final.returncode == 0, final.stderr
    settings = Settings(data_dir=env["JAXMEM_DATA_DIR"], corpus_dir=env["JAXMEM_CORPUS_DIR"])
    store = Store(settings)
    assert store.info()["chunks"] == len(corpus_documents(corpus)), "the re-run did not complete the sync"
    assert store.fingerprint() is not None
    mid = [d for d in killed_after if d is not None]
    assert len(mid) >= TRIALS - 1, killed_after  # the kills landed while the ingest was still running
    with capsys.disabled():
        print(f"\n[faults] ingest (an uninterrupted run: {duration:.1f} s) killed (SIGKILL) {len(mid)} times "
              f"mid-run at {sorted(mid)} s "
              f"({len(killed_after) - len(mid)} runs had finished): {answered}/{len(killed_after)} fresh processes answered right "
              f"after the kill; the re-run completed the sync ({json.loads(final.stdout)['chunks']} chunks)")


WRITER = """
import sys
from jaxmem.app.feedback import FeedbackStore
store = FeedbackStore(sys.argv[1])
i = 0
while True:
    store.record(f"a{i}", "up", f"comment {i}", source="web", question="q", cards=["gpu-preallocation"])
    print(f"a{i}", flush=True)   # printed only after record() returned: committed
    i += 1
"""


def test_feedback_written_just_before_a_kill_survives(tmp_path, capsys):
    from jaxmem.app.feedback import FeedbackStore

    db = tmp_path / "feedback.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    acknowledged = []
    while len(acknowledged) < 40:
        acknowledged.append(proc.stdout.readline().strip())
    proc.kill()  # right after the 40th acknowledgement, mid-way through the next write
    proc.wait()
    stored = {r["answer_id"] for r in FeedbackStore(db).export()}
    assert set(acknowledged) <= stored
    with capsys.disabled():
        print(f"\n[faults] feedback: killed right after {len(acknowledged)} acknowledged writes; "
              f"{len(set(acknowledged) & stored)} of them stored ({len(stored)} rows in all)")


@pytest.fixture
def chroma_path(tmp_path) -> Path:
    return tmp_path / "chroma-server"


def start_chroma(path: Path, port: int, log: Path):
    exe = Path(sys.executable).with_name("chroma")
    return background([str(exe), "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
                      env={**os.environ, "ANONYMIZED_TELEMETRY": "False"}, log=log)


def test_a_chroma_server_that_goes_away_and_comes_back(mini_settings, nano, chroma_path, tmp_path, capsys):
    from jaxmem.app.advisor import Advisor
    from jaxmem.core.errors import StoreUnavailable
    from jaxmem.ingest.pipeline import ingest

    port = free_port()
    settings = mini_settings.model_copy(update={"chroma_host": "127.0.0.1", "chroma_port": port})
    q, right = QUESTIONS[0]
    with start_chroma(chroma_path, port, tmp_path / "chroma1.log") as server:
        wait_http(f"http://127.0.0.1:{port}/api/v2/heartbeat", server, timeout=60)
        ingest(settings, embeddings=nano, show_progress=False)
        advisor = Advisor(settings, embeddings=nano)
        assert advisor.ask(q).citations[0].card in right
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
    errors = []
    for _ in range(3):  # every request while it is gone: a clear error, not a hang or a traceback
        t = time.monotonic()
        with pytest.raises(StoreUnavailable) as err:
            advisor.ask(q)
        errors.append(time.monotonic() - t)
        assert f"127.0.0.1:{port}" in err.value.message and err.value.hint
    with start_chroma(chroma_path, port, tmp_path / "chroma2.log") as server:
        wait_http(f"http://127.0.0.1:{port}/api/v2/heartbeat", server, timeout=60)
        t = time.monotonic()
        ans = advisor.ask(q)  # the same advisor: no restart of the app
        resumed = time.monotonic() - t
        assert not ans.abstained and ans.citations[0].card in right
    with capsys.disabled():
        print(f"\n[faults] Chroma server stopped mid-session: 3 requests got StoreUnavailable in "
              f"{max(errors):.2f} s or less each; after the restart the same advisor answered in {resumed:.2f} s")
