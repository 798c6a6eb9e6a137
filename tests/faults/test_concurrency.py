"""Several processes on one embedded store, as on one machine: the Slack bot and a web-app asker
answer while `jaxmem ingest` rewrites the index, round after round. Every answer is right or a
clear refusal; the index is whole at the end. Figures are printed."""
from __future__ import annotations

import json
import random
import subprocess
import time

import pytest

from tests.faults.asker import QUESTIONS
from tests.faults.conftest import ROOT, AskerProcess, SlackProcess, jaxmem, verdict

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
ROUNDS = 3
CARD = "cards/buffer-donation/en.md"


def edit(corpus, round_: int) -> None:
    """A real change each round: the caveats section of one card gains (or loses) a sentence."""
    path = corpus / CARD
    text = path.read_text(encoding="utf-8")
    marker = "\nRound marker: this sentence changes with every ingest round."
    text = text.replace(marker, "") if marker in text else text.rstrip("\n") + marker + "\n"
    path.write_text(text, encoding="utf-8")


def test_web_slack_and_ingest_at_once_on_the_embedded_store(shared_env, tmp_path, capsys):
    from pathlib import Path

    corpus = Path(shared_env["JAXMEM_CORPUS_DIR"])
    subprocess.run(jaxmem("ingest", "--json"), env=shared_env, check=True, capture_output=True, cwd=ROOT)
    rng = random.Random(7)
    ingests = []
    slack_rows = []
    with AskerProcess(shared_env, tmp_path) as web, SlackProcess(shared_env, tmp_path) as slack:
        started = time.monotonic()
        for round_ in range(ROUNDS):
            edit(corpus, round_)
            proc = subprocess.Popen(jaxmem("ingest", "--json"), env=shared_env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, cwd=ROOT)
            while proc.poll() is None:  # the bot gets questions while the ingest writes
                q, right = QUESTIONS[rng.randrange(len(QUESTIONS))]
                slack.ask(q, right)
                time.sleep(0.4)
            out, err = proc.communicate()
            ingests.append((proc.returncode, out, err))
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and any(slack.answered(ch) is None for ch in slack.sent):
            time.sleep(0.2)
        for channel, (_q, right, _) in slack.sent.items():
            msg = slack.answered(channel)
            slack_rows.append("missing" if msg is None else verdict(msg, right))
        web_rows = web.stop()
        elapsed = time.monotonic() - started

    failed = [(rc, err[-500:]) for rc, _, err in ingests if rc != 0]
    assert not failed, failed
    synced = [json.loads(out) for rc, out, _ in ingests]
    assert all(s["updated"] + s["added"] + s["deleted"] > 0 for s in synced), synced  # each round wrote

    web_wrong = [r for r in web_rows if not r["ok"]]
    web_refused = [r for r in web_rows if r["kind"] == "refusal"]
    assert web_rows and not web_wrong, web_wrong[:5]
    assert slack_rows and "wrong" not in slack_rows and "missing" not in slack_rows, slack_rows

    # the index is whole: every chunk of the corpus, nothing stale, and it answers
    from jaxmem.core.settings import Settings
    from jaxmem.ingest.pipeline import corpus_documents
    from jaxmem.ingest.store import Store

    settings = Settings(data_dir=shared_env["JAXMEM_DATA_DIR"], corpus_dir=shared_env["JAXMEM_CORPUS_DIR"])
    assert Store(settings).info()["chunks"] == len(corpus_documents(settings.corpus_dir))
    ask = subprocess.run(jaxmem("ask", QUESTIONS[0][0], "--json"), env=shared_env, capture_output=True, text=True,
                         cwd=ROOT)
    assert ask.returncode == 0 and json.loads(ask.stdout)["citations"][0]["card"] in QUESTIONS[0][1]
    with capsys.disabled():
        print(f"\n[concurrency] {ROUNDS} ingest rounds (each wrote {min(s['added'] for s in synced)}+ chunks) "
              f"in {elapsed:.0f} s while two processes asked: web-app asker {len(web_rows)} answers "
              f"({len(web_rows) - len(web_refused)} right, {len(web_refused)} clear refusals, 0 wrong); "
              f"Slack bot {len(slack_rows)} mentions ({slack_rows.count('right')} right, "
              f"{slack_rows.count('refusal')} clear refusals, 0 wrong or missing); index whole afterwards")
