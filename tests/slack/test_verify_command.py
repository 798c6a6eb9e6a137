"""`/jaxmem verify TOPIC` and `/jaxmem verify` + code: the verifier runs here, a placeholder in
the channel shows the queue and the progress and becomes the result; refusals go to the user only."""
from __future__ import annotations

import shutil
import threading
import time

import pytest

from tests.conftest import MINI, ROOT
from tests.slack.conftest import running_bot, send_command
from tests.slack.test_bot_http import block_text, bot_messages, finished

pytestmark = pytest.mark.slow

SCRIPT = """```
import jax.numpy as jnp
x = jnp.ones(4)
for _ in range(3):
    print(float(x.sum()))
```"""


@pytest.fixture(scope="module")
def slack_settings(tmp_path_factory, nano):
    """The mini corpus plus the real buffer-donation snippet pair, so there is something to verify."""
    from jaxmem.core.settings import Settings
    from jaxmem.ingest.pipeline import ingest

    root = tmp_path_factory.mktemp("slack-verify")
    shutil.copytree(MINI, root / "corpus")
    shutil.copytree(ROOT / "corpus" / "snippets" / "buffer-donation", root / "corpus" / "snippets" / "buffer-donation")
    settings = Settings(data_dir=root / "data", corpus_dir=root / "corpus", verify_repeats=1)
    ingest(settings, embeddings=nano, show_progress=False)
    return settings


@pytest.fixture(scope="module")
def open_bot(standin, slack_settings, nano):
    """A bot that lets users run their own code, one verification per user per hour."""
    settings = slack_settings.model_copy(update={"user_code": True, "slack_user_runs": 1})
    with running_bot(standin, settings, nano) as server:
        yield server


def ephemeral(standin, channel: str):
    (call,) = standin.wait_for(lambda: [c for c in standin.of("response_url") if c.params["name"] == channel])
    assert call.params["response_type"] == "ephemeral"
    return str(call.params.get("blocks") or call.params.get("text"))


def test_verify_runs_the_pair_and_posts_the_verdict(bot_server, standin, channel):
    reply = send_command(bot_server.url, "verify buffer-donation", channel, standin.response_url(channel))
    assert reply.status == 200 and reply.seconds < 3
    assert "Verifying" in reply.body  # the acknowledgement while it runs
    # the placeholder in the channel says what runs, then becomes the result
    standin.wait_for(lambda: [m for m in bot_messages(standin, channel) if "Verifying `buffer-donation`" in block_text(m)]
                     or finished(standin, channel))
    (msg,) = finished(standin, channel)
    text = block_text(msg)
    assert ":white_check_mark: *buffer-donation*: confirmed" in text
    assert "on cpu" in text and "jax 0.10" in text and "ran on " in text
    # No public web app configured: the card is named, never linked to a page nobody serves.
    assert "buffer-donation" in text and "card?topic=" not in text and "github.com" not in text


def test_an_unknown_topic_is_told_to_the_user_only(bot_server, standin, channel):
    send_command(bot_server.url, "verify no-such-topic", channel, standin.response_url(channel))
    text = ephemeral(standin, channel)
    assert "no-such-topic" in text and "buffer-donation" in text  # the valid topics
    assert standin.in_channel(channel) == []


def test_user_code_is_off_by_default(bot_server, standin, channel):
    send_command(bot_server.url, "verify\n" + SCRIPT, channel, standin.response_url(channel))
    text = ephemeral(standin, channel)
    assert "switched off" in text and "JAXMEM_USER_CODE" in text
    assert standin.in_channel(channel) == []


def test_user_code_runs_in_the_sandbox_when_enabled(open_bot, standin, channel):
    send_command(open_bot.url, "verify\n" + SCRIPT, channel, standin.response_url(channel), user="U0SCRIPT")
    (msg,) = finished(standin, channel)
    text = block_text(msg)
    assert "isolation: bwrap" in text and "3 host sync points" in text
    assert "line 4: `print(float(x.sum()))` synced 3x" in text


def test_a_user_over_the_allowance_is_told_so(open_bot, standin, channel):
    send_command(open_bot.url, "verify buffer-donation", channel, standin.response_url(channel), user="U0LIMIT")
    finished(standin, channel)
    other = channel + "X"
    send_command(open_bot.url, "verify buffer-donation", other, standin.response_url(other), user="U0LIMIT")
    text = ephemeral(standin, other)
    assert "limit is 1" in text and "JAXMEM_SLACK_USER_RUNS" in text


def test_a_queued_verification_shows_its_place(bot_server, standin, channel, slack_settings):
    """The machine's one slot is taken (as by a run of the web app): the placeholder says so."""
    from jaxmem.evaluators.verify.queue import RunQueue

    queue = RunQueue(slack_settings.data_dir / "verify-queue", 1)
    held, release = threading.Event(), threading.Event()

    def hold():
        with queue.slot():
            held.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        held.wait(10)
        send_command(bot_server.url, "verify buffer-donation", channel, standin.response_url(channel))
        standin.wait_for(lambda: [m for m in bot_messages(standin, channel)
                                  if "waiting in the queue, 1 ahead" in block_text(m)], what="the queue position")
    finally:
        release.set()
        holder.join()
    start = time.monotonic()
    (msg,) = finished(standin, channel)
    assert ":white_check_mark: *buffer-donation*" in block_text(msg) and time.monotonic() - start < 90
