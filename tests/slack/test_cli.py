"""`jaxmem slack`: clear errors before anything loads, Socket Mode wiring, and the real process in
HTTP mode answering a signed mention."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from click.testing import CliRunner

from app.cli import main
from tests.conftest import free_port
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
def test_jaxmem_slack_http_process_answers_a_signed_mention(mini_env, standin, channel):
    from ingest.pipeline import ensure_index

    ensure_index(mini_env, show_progress=False)  # a prepared index; the process only loads it
    port = free_port()
    env = {**os.environ, "SLACK_BOT_TOKEN": "xoxb-process", "SLACK_SIGNING_SECRET": "8f742231b10e8888abcd99yyyzzz85a5",
           "SLACK_API_URL": standin.url}
    env.pop("SLACK_APP_TOKEN", None)
    exe = os.path.join(os.path.dirname(sys.executable), "jaxmem")
    proc = subprocess.Popen([exe, "slack", "--http", "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"jaxmem slack did not start: {proc.stdout.read()}")
                time.sleep(0.3)
        url = f"http://127.0.0.1:{port}/slack/events"
        reply = send_event(url, mention(standin, channel, "How do I stop JAX from preallocating GPU memory?"))
        assert reply.status == 200 and reply.seconds < 3
        update = standin.wait_for(lambda: standin.of("chat.update", channel))[0]
        assert "XLA_PYTHON_CLIENT_PREALLOCATE" in str(update.params["blocks"]) and update.token == "xoxb-process"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)  # interpreter shutdown frees the models; slow on a loaded 2-core machine
        except subprocess.TimeoutExpired:
            proc.kill()
    assert proc.returncode == 0, proc.stdout.read()
    assert standin.of("auth.test")[-1].token == "xoxb-process"  # the token was checked at start
