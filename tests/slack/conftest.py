"""The real Bolt app in HTTP mode on a local port, talking to a local stand-in for Slack's Web API.

One bot per test module (building the advisor and warming the language detector takes seconds);
each test uses its own channel, so records and the per-channel rate limit do not cross tests.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import shutil
import time
import urllib.error
import urllib.request
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlencode

import pytest

from tests.conftest import MINI
from tests.slack.slack_api import BOT_USER, TEAM, SlackStandIn

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


@pytest.fixture(scope="module")
def standin():
    api = SlackStandIn().start()
    yield api
    api.stop()


@pytest.fixture(scope="module")
def slack_settings(tmp_path_factory, nano):
    from jaxmem.core.settings import Settings
    from jaxmem.ingest.pipeline import ingest

    root = tmp_path_factory.mktemp("slack")
    shutil.copytree(MINI, root / "corpus")
    settings = Settings(data_dir=root / "data", corpus_dir=root / "corpus")
    ingest(settings, embeddings=nano, show_progress=False)
    return settings


@dataclass
class BotServer:
    url: str
    bot: object
    app: object


@contextmanager
def running_bot(standin, settings, nano):
    """The real Bolt app in HTTP mode on a free port, with `settings`, against the stand-in."""
    from jaxmem.app.advisor import Advisor
    from jaxmem.app.services import Services
    from jaxmem.app.slack.app import build_app
    from jaxmem.app.slack.config import SlackConfig
    from jaxmem.app.slack.flows import Bot
    from jaxmem.app.slack.server import make_server, serve_in_thread

    bot = Bot(Services(settings, advisor=Advisor(settings, embeddings=nano)))
    bot.services.warm()
    app = build_app(SlackConfig(bot_token="xoxb-test-token", signing_secret=SECRET, api_url=standin.url), bot)
    server = make_server(app, "127.0.0.1", 0)
    serve_in_thread(server)
    try:
        yield BotServer(f"http://127.0.0.1:{server.server_address[1]}/slack/events", bot, app)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def bot_server(standin, slack_settings, nano):
    with running_bot(standin, slack_settings, nano) as server:
        yield server


@pytest.fixture
def channel() -> str:
    return "C" + uuid.uuid4().hex[:10].upper()


# ---- requests as Slack sends them -------------------------------------------------------------
def sign(body: str, timestamp: int, secret: str = SECRET) -> str:
    base = f"v0:{timestamp}:{body}".encode()
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


@dataclass
class Reply:
    status: int
    body: str
    seconds: float


def post(url: str, body: str, content_type: str, *, timestamp: int | None = None, secret: str = SECRET,
         headers: dict | None = None) -> Reply:
    timestamp = int(time.time()) if timestamp is None else timestamp
    req = urllib.request.Request(url, data=body.encode(), method="POST", headers={
        "Content-Type": content_type, "X-Slack-Request-Timestamp": str(timestamp),
        "X-Slack-Signature": sign(body, timestamp, secret), **(headers or {})})
    started = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return Reply(resp.status, resp.read().decode(), time.monotonic() - started)
    except urllib.error.HTTPError as err:
        return Reply(err.code, err.read().decode(), time.monotonic() - started)


def event_body(event: dict, event_id: str | None = None) -> str:
    return json.dumps({"token": "legacy", "team_id": TEAM, "api_app_id": "AJAXMEM", "type": "event_callback",
                       "event_id": event_id or "Ev" + uuid.uuid4().hex[:10].upper(), "event_time": int(time.time()),
                       "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}],
                       "event": event})


def send_event(url: str, event: dict, event_id: str | None = None, **kw) -> Reply:
    return post(url, event_body(event, event_id), "application/json", **kw)


def mention(standin: SlackStandIn, channel: str, text: str, thread_ts: str | None = None) -> dict:
    """A message with an @mention, stored in the stand-in like Slack stores it, as its event."""
    full = f"<@{BOT_USER}> {text}"
    ts = standin.add_user_message(channel, full, thread_ts=thread_ts)
    return {"type": "app_mention", "user": "UHUMAN01", "text": full, "ts": ts, "channel": channel,
            "event_ts": ts, **({"thread_ts": thread_ts} if thread_ts else {})}


def message(standin: SlackStandIn, channel: str, text: str, *, channel_type: str = "channel",
            thread_ts: str | None = None) -> dict:
    ts = standin.add_user_message(channel, text, thread_ts=thread_ts)
    return {"type": "message", "user": "UHUMAN01", "text": text, "ts": ts, "channel": channel,
            "channel_type": channel_type, "event_ts": ts, **({"thread_ts": thread_ts} if thread_ts else {})}


def send_command(url: str, text: str, channel: str, response_url: str, user: str = "UHUMAN01", **kw) -> Reply:
    body = urlencode({"token": "legacy", "team_id": TEAM, "team_domain": "test", "channel_id": channel,
                      "channel_name": "jax", "user_id": user, "user_name": "ada", "command": "/jaxmem",
                      "text": text, "api_app_id": "AJAXMEM", "response_url": response_url,
                      "trigger_id": "1337.42." + uuid.uuid4().hex[:8]})
    return post(url, body, "application/x-www-form-urlencoded", **kw)


def send_action(url: str, action_id: str, value: str, channel: str, message_ts: str, thread_ts: str | None) -> Reply:
    payload = {"type": "block_actions", "team": {"id": TEAM, "domain": "test"}, "api_app_id": "AJAXMEM",
               "user": {"id": "UHUMAN01", "username": "ada", "team_id": TEAM}, "token": "legacy",
               "trigger_id": "1337.42.abc", "container": {"type": "message", "message_ts": message_ts,
                                                          "channel_id": channel, "is_ephemeral": False},
               "channel": {"id": channel, "name": "jax"},
               "message": {"type": "message", "ts": message_ts, **({"thread_ts": thread_ts} if thread_ts else {})},
               "response_url": "http://127.0.0.1:9/unused",
               "actions": [{"type": "button", "action_id": action_id, "block_id": "b", "value": value,
                            "action_ts": str(time.time())}]}
    return post(url, urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded")
