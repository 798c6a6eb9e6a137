"""`/jaxmem verify TOPIC`: the verifier runs the topic's snippet pair here and the verdict is posted."""
from __future__ import annotations

import shutil

import pytest

from tests.conftest import MINI, ROOT
from tests.slack.conftest import send_command
from tests.slack.test_bot_http import block_text, finished


@pytest.fixture(scope="module")
def slack_settings(tmp_path_factory, nano):
    """The mini corpus plus the real buffer-donation snippet pair, so there is something to verify."""
    from ingest.config import Settings
    from ingest.pipeline import ingest

    root = tmp_path_factory.mktemp("slack-verify")
    shutil.copytree(MINI, root / "corpus")
    shutil.copytree(ROOT / "corpus" / "snippets" / "buffer-donation", root / "corpus" / "snippets" / "buffer-donation")
    settings = Settings(data_dir=root / "data", corpus_dir=root / "corpus")
    ingest(settings, embeddings=nano, show_progress=False)
    return settings


@pytest.mark.slow
def test_verify_runs_the_pair_and_posts_the_verdict(bot_server, standin, channel, monkeypatch):
    monkeypatch.setenv("JAXMEM_VERIFY_REPEATS", "1")
    reply = send_command(bot_server.url, "verify buffer-donation", channel, standin.response_url(channel))
    assert reply.status == 200 and reply.seconds < 3
    assert "Verifying `buffer-donation`" in reply.body  # the indication while it runs
    (msg,) = finished(standin, channel)
    text = block_text(msg)
    assert ":white_check_mark: *buffer-donation*: confirmed" in text
    assert "on cpu" in text and "jax 0.10" in text
    assert "<https://github.com/jaxmem/jaxmem/blob/main/corpus/cards/buffer-donation/en.md|buffer-donation>" in text


@pytest.mark.slow
def test_a_bad_verifier_setting_is_told_to_the_user_only(bot_server, standin, channel, monkeypatch):
    monkeypatch.setenv("JAXMEM_VERIFY_REPEATS", "many")
    send_command(bot_server.url, "verify buffer-donation", channel, standin.response_url(channel))
    (call,) = standin.wait_for(lambda: [c for c in standin.of("response_url") if c.params["name"] == channel])
    assert call.params["response_type"] == "ephemeral"
    assert "JAXMEM_VERIFY_REPEATS='many' is not valid" in str(call.params["blocks"])
    assert standin.in_channel(channel) == []
