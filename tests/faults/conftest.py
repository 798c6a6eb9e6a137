"""Processes that share one data directory, as a web app, a Slack bot and an ingest on one machine
do; a Slack Web API stand-in for the bot."""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import MINI
from tests.helpers import background, free_port, wait_http
from tests.slack.conftest import SECRET, mention, send_event
from tests.slack.slack_api import SlackStandIn

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def shared_env(tmp_path) -> dict[str, str]:
    """A copy of the fixture corpus and an empty data dir, as environment variables for processes."""
    corpus = tmp_path / "corpus"
    shutil.copytree(MINI, corpus)
    env = {**os.environ, "JAXMEM_CORPUS_DIR": str(corpus), "JAXMEM_DATA_DIR": str(tmp_path / "data")}
    for var in ("SLACK_APP_TOKEN", "CHROMA_HOST"):
        env.pop(var, None)
    return env


def jaxmem(*args: str) -> list[str]:
    return [sys.executable, "-m", "jaxmem.app.cli", *args]


def read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class AskerProcess:
    """tests/faults/asker.py in the background: the web app's way of asking, in a process of its own."""

    def __init__(self, env: dict, folder: Path, threads: int = 1, name: str = "asker"):
        self.out, self.stop_file = folder / f"{name}.jsonl", folder / f"{name}.stop"
        self.log = folder / f"{name}.log"
        self._ctx = background([sys.executable, "-m", "tests.faults.asker", str(self.out), str(self.stop_file),
                                str(threads)], env=env, log=self.log, cwd=ROOT)

    def __enter__(self):
        self.proc = self._ctx.__enter__()
        deadline = time.monotonic() + 180
        while not read_rows(self.out):
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the asker did not get ready"
            time.sleep(0.2)
        return self

    def stop(self) -> list[dict]:
        self.stop_file.touch()
        self.proc.wait(timeout=120)
        return [r for r in read_rows(self.out) if "ready" not in r]

    def __exit__(self, *exc):
        self.stop_file.touch()
        return self._ctx.__exit__(*exc)


class SlackProcess:
    """`jaxmem slack --http` against a Web API stand-in; `ask` sends a signed mention in a fresh
    channel and `answers` collects what the bot posted there."""

    def __init__(self, env: dict, folder: Path):
        self.standin = SlackStandIn().start()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/slack/events"
        env = {**env, "SLACK_BOT_TOKEN": "xoxb-faults", "SLACK_SIGNING_SECRET": SECRET, "SLACK_API_URL": self.standin.url}
        self.log = folder / "slack.log"
        self._ctx = background(jaxmem("slack", "--http", "--port", str(self.port)), env=env, log=self.log, cwd=ROOT)
        self.sent: dict[str, tuple[str, set, float]] = {}

    def __enter__(self):
        self.proc = self._ctx.__enter__()
        wait_http(f"http://127.0.0.1:{self.port}/healthz", self.proc, timeout=180, log=self.log)
        return self

    def ask(self, question: str, right: set) -> str:
        """Send a mention in a fresh channel; returns the channel (the answer appears there)."""
        channel = "C" + uuid.uuid4().hex[:10].upper()
        reply = send_event(self.url, mention(self.standin, channel, question))
        assert reply.status == 200 and reply.seconds < 3, reply  # Slack's 3-second acknowledgement
        self.sent[channel] = (question, right, time.monotonic())
        return channel

    def answered(self, channel: str) -> dict | None:
        """The bot's final message in `channel` (the placeholder replaced), or None."""
        with self.standin._lock:
            msgs = [m for (ch, _), m in self.standin.messages.items() if ch == channel and m.get("bot_id")]
        done = [m for m in msgs if ":hourglass_flowing_sand:" not in json.dumps(m.get("blocks"))]
        return done[0] if done else None

    def __exit__(self, *exc):
        try:
            return self._ctx.__exit__(*exc)
        finally:
            self.standin.stop()


def cited_cards(message: dict) -> list[str]:
    """The cards an answer cites, as its feedback buttons carry them (most relevant first)."""
    for block in message.get("blocks") or []:
        for element in block.get("elements") or []:
            if element.get("action_id", "").startswith("jaxmem_feedback"):
                return json.loads(element["value"]).get("c", [])
    return []


def verdict(message: dict, right: set) -> str:
    """'right' (the first cited card is a right one), 'refusal' (a plain error message), or 'wrong'."""
    if ":warning:" in json.dumps(message.get("blocks")):
        return "refusal"
    cited = cited_cards(message)
    return "right" if cited and cited[0] in right else "wrong"
