"""A deployment on loopback, every part real: one Chroma server, one PostgreSQL database, a Ray head
plus a worker whose custom resource stands in for the GPU kind, two `jaxmem web` replicas and the
Slack bot (`jaxmem slack --http`, against the Web API stand-in). A verification requested in a
browser on replica A runs on the Ray worker; replica B's answer and the bot's show that run, with
the worker's node id."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.cluster.conftest import ACCEL
from tests.conftest import MINI, ROOT
from tests.helpers import background, free_port, launch_chromium, open_page, require_chromium, wait_http

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.timeout(900)]

QUESTION = "How do I reuse the input buffer with donate_argnums so the parameters are not held twice?"
TITLE = "Donate buffers so a jitted update"  # the fixture corpus's buffer-donation card
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


@pytest.fixture
def deployment_env(ray_cluster, postgres, chroma_server, tmp_path):
    """What every replica is started with (each gets its own data directory on top)."""
    corpus = tmp_path / "corpus"
    shutil.copytree(MINI, corpus)
    shutil.copytree(ROOT / "corpus/snippets/buffer-donation", corpus / "snippets/buffer-donation")
    host, port = chroma_server
    env = {**os.environ, **{k: v for k, v in ray_cluster.env.items() if k.startswith("RAY_")},
           "JAXMEM_CORPUS_DIR": str(corpus), "CHROMA_HOST": host, "CHROMA_PORT": str(port),
           "JAXMEM_DATABASE_URL": postgres.database("replicas"), "JAXMEM_RAY_ADDRESS": ray_cluster.address,
           "JAXMEM_RAY_ACCELERATOR": ACCEL, "JAXMEM_VERIFY_REPEATS": "1", "HF_HUB_OFFLINE": "1",
           "JAXMEM_DATA_DIR": str(tmp_path / "ingest-data")}
    t = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "jaxmem.app.cli", "ingest"], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    print(f"\n[replicas] corpus ingested into the Chroma server in {time.monotonic() - t:.1f} s")
    return env


def page_of(browser, url: str):
    page = open_page(browser)
    page.goto(url)
    page.get_by_text("cards on 2 topics").wait_for(timeout=180_000)  # the sidebar: advisor built
    return page


def ask(page, question: str):
    box = page.get_by_test_id("stChatInputTextArea")
    box.fill(question)
    box.press("Enter")
    answer = page.get_by_test_id("stChatMessage").nth(1)
    answer.get_by_test_id("stFeedback").wait_for(timeout=120_000)
    # the cited card's expander, by its title (another folds the rest of the answer)
    card = answer.get_by_test_id("stExpander").filter(has=page.locator("summary", has_text=TITLE))
    card.locator("summary", has_text=TITLE).click()
    return card


def test_a_run_requested_on_one_replica_is_seen_by_the_others(deployment_env, ray_cluster, tmp_path):
    from playwright.sync_api import sync_playwright

    from tests.slack.conftest import mention, send_event
    from tests.slack.slack_api import SlackStandIn

    require_chromium()
    standin = SlackStandIn().start()
    ports = {name: free_port() for name in ("a", "b", "slack")}
    env = {name: {**deployment_env, "JAXMEM_DATA_DIR": str(tmp_path / f"data-{name}")} for name in ports}
    env["slack"].update(SLACK_BOT_TOKEN="xoxb-test-token", SLACK_SIGNING_SECRET=SECRET, SLACK_API_URL=standin.url)
    logs = {name: tmp_path / f"{name}.log" for name in ports}
    cmd = {name: [sys.executable, "-m", "jaxmem.app.cli", "web", "--port", str(ports[name])] for name in ("a", "b")}
    cmd["slack"] = [sys.executable, "-m", "jaxmem.app.cli", "slack", "--http", "--port", str(ports["slack"])]
    try:
        with background(cmd["a"], env=env["a"], log=logs["a"], cwd=ROOT) as web_a, \
                background(cmd["b"], env=env["b"], log=logs["b"], cwd=ROOT) as web_b, \
                background(cmd["slack"], env=env["slack"], log=logs["slack"], cwd=ROOT) as bot:
            url_a, url_b = (f"http://127.0.0.1:{ports[n]}" for n in ("a", "b"))
            wait_http(f"{url_a}/_stcore/health", web_a, timeout=90, expect=b"ok", log=logs["a"])
            wait_http(f"{url_b}/_stcore/health", web_b, timeout=90, expect=b"ok", log=logs["b"])
            with sync_playwright() as pw:
                browser = launch_chromium(pw)
                card = ask(page_of(browser, url_a), QUESTION)
                assert "No stored evidence for this card yet: verify it on the cluster" in card.inner_text()
                t = time.monotonic()
                card.get_by_role("button", name="Verify on the cluster").click()
                card.page.get_by_text("Verified buffer-donation: confirmed").wait_for(timeout=300_000)
                through_ray = time.monotonic() - t
                # The status label is sent before the evidence below it is drawn: wait for the
                # record itself rather than reading the card the moment the label changes.
                card.get_by_text(f"ran on {ray_cluster.worker_node}").wait_for(timeout=30_000)

                other = ask(page_of(browser, url_b), QUESTION)  # replica B, which ran nothing
                text = other.inner_text()
                assert "Evidence: confirmed" in text and "measured run" in text, text
                assert f"ran on {ray_cluster.worker_node}" in text
                browser.close()

            url = f"http://127.0.0.1:{ports['slack']}/slack/events"
            deadline = time.monotonic() + 120
            while True:  # the bot warms its advisor before it listens
                try:
                    reply = send_event(url, mention(standin, "CREPLICA", QUESTION))
                    break
                except OSError:
                    assert bot.poll() is None and time.monotonic() < deadline, logs["slack"].read_text()[-3000:]
                    time.sleep(0.5)
            assert reply.status == 200

            def answered():
                with standin._lock:
                    msgs = [m for (ch, _), m in standin.messages.items() if ch == "CREPLICA" and m.get("bot_id")]
                done = [m for m in msgs if "hourglass" not in str(m.get("blocks"))]
                return done or None
            (answer,) = standin.wait_for(answered)
            assert f"ran on {ray_cluster.worker_node}" in str(answer["blocks"]), answer["blocks"]
    finally:
        standin.stop()
    for name, log in logs.items():
        assert "Traceback" not in log.read_text(), f"{name}: {log.read_text()[-3000:]}"
    print(f"\n[replicas] verification from replica A through Ray: {through_ray:.1f} s on node "
          f"{ray_cluster.worker_node[:12]}; seen by replica B and by the Slack bot")
