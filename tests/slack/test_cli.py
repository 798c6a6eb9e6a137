"""`jaxmem slack`: clear errors before anything loads, Socket Mode wiring, and the real process in
HTTP mode answering a signed mention."""
from __future__ import annotations

import os
import signal
import sys
import time

import pytest
from click.testing import CliRunner

from jaxmem.app.cli import main
from tests.helpers import background, free_port, port_open, wait_http
from tests.slack.conftest import mention, send_event

SLACK_VARS = ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_API_URL")


@pytest.fixture
def no_slack_env(monkeypatch):
    for var in SLACK_VARS:
        monkeypatch.delenv(var, raising=False)


def test_socket_mode_without_the_app_token_says_which_variable(no_slack_env, monkeypatch):
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    result = CliRunner().invoke(main, ["slack"])
    assert result.exit_code == 2
    assert "error: SLACK_APP_TOKEN is not set (needed for Socket Mode)" in result.output
    assert "Traceback" not in result.output


def test_http_mode_on_a_busy_port_names_the_port(no_slack_env, monkeypatch):
    import socket

    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "s")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(main, ["slack", "--http", "--port", str(port)])
    assert result.exit_code == 2 and f"cannot listen on 127.0.0.1:{port}" in result.output


def test_a_token_slack_rejects_is_reported_at_start(no_slack_env, monkeypatch, mini_env, standin):
    standin.fail["auth.test"] = "invalid_auth"
    try:
        monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-revoked")
        monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1")
        monkeypatch.setenv("SLACK_API_URL", standin.url)
        result = CliRunner().invoke(main, ["slack", "--no-warm"])
    finally:
        del standin.fail["auth.test"]
    assert result.exit_code == 2 and "Slack rejected SLACK_BOT_TOKEN" in result.output and "invalid_auth" in result.output


def test_socket_mode_is_wired_to_the_bolt_app_and_the_app_token(no_slack_env, monkeypatch, mini_env, standin):
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    started = []
    # Connecting needs Slack itself; what can be checked here is what would connect, and how.
    monkeypatch.setattr(SocketModeHandler, "start", lambda self: started.append(self))
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1-A-123-abc")
    monkeypatch.setenv("SLACK_API_URL", standin.url)
    result = CliRunner().invoke(main, ["slack", "--no-warm"])
    assert result.exit_code == 0, result.output
    (handler,) = started
    assert handler.app_token == "xapp-1-A-123-abc"
    # apps.connections.open goes through the app's Web API client, so SLACK_API_URL reaches it too.
    assert handler.client.web_client.base_url == standin.url
    assert handler.app.name == "jaxmem" and len(handler.app._listeners) >= 5
    assert standin.of("auth.test")[-1].token == "xoxb-1"


@pytest.mark.slow
def test_jaxmem_slack_http_process_answers_a_signed_mention_and_stops_on_sigterm(mini_env, standin, channel,
                                                                                   tmp_path, capsys):
    from jaxmem.ingest.pipeline import ensure_index

    ensure_index(mini_env, show_progress=False)  # a prepared index; the process only loads it
    port = free_port()
    env = {**os.environ, "SLACK_BOT_TOKEN": "xoxb-process", "SLACK_SIGNING_SECRET": "8f742231b10e8888abcd99yyyzzz85a5",
           "SLACK_API_URL": standin.url}
    env.pop("SLACK_APP_TOKEN", None)
    exe = os.path.join(os.path.dirname(sys.executable), "jaxmem")
    log = tmp_path / "slack.log"
    with background([exe, "slack", "--http", "--port", str(port)], env=env, log=log) as proc:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc, timeout=180, log=log)
        url = f"http://127.0.0.1:{port}/slack/events"
        reply = send_event(url, mention(standin, channel, "How do I stop JAX from preallocating GPU memory?"))
        assert reply.status == 200 and reply.seconds < 3
        update = standin.wait_for(lambda: standin.of("chat.update", channel))[0]
        assert "XLA_PYTHON_CLIENT_PREALLOCATE" in str(update.params["blocks"]) and update.token == "xoxb-process"
        start = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)  # as a service manager stops it
        proc.wait(60)
        stopped = time.monotonic() - start
    assert proc.returncode in (0, 143), log.read_text()[-2000:]
    assert not port_open(port) and stopped < 10, stopped
    assert standin.of("auth.test")[-1].token == "xoxb-process"  # the token was checked at start
    with capsys.disabled():
        print(f"\n[shutdown] jaxmem slack --http: stopped {stopped:.1f} s after SIGTERM; port {port} closed")
