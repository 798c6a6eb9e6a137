"""A local stand-in for Slack's Web API: a real HTTP server that records what the bot sends.

It answers the methods the bot uses the way Slack does (`{"ok": true, ...}`, form or JSON
bodies, `Authorization: Bearer` tokens), keeps the messages of each thread so
`conversations.replies` returns what the bot posted (with metadata), and accepts response_url
posts under /response/<id>. `fail["chat.postMessage"] = "not_in_channel"` makes a method fail.
"""
from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl

BOT_USER = "UJAXMEM01"
BOT_ID = "BJAXMEM01"
TEAM = "T0000TEST"


@dataclass
class Call:
    method: str
    params: dict
    token: str
    at: float = field(default_factory=time.monotonic)


class SlackStandIn:
    def __init__(self):
        self.calls: list[Call] = []
        self.fail: dict[str, str] = {}
        self.messages: dict[tuple[str, str], dict] = {}  # (channel, ts) -> message
        self._ts = itertools.count(1)
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/api/"

    def response_url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/response/{name}"

    def start(self) -> SlackStandIn:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ---- what tests read ------------------------------------------------------------------------
    def of(self, method: str, channel: str | None = None) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method and (channel is None or c.params.get("channel") == channel)]

    def in_channel(self, channel: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.params.get("channel") == channel]

    def wait_for(self, predicate, timeout: float = 120.0, what: str = "the bot's reply"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = predicate()
            if result:
                return result
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}; calls: {self.summary()}")

    def summary(self) -> list[str]:
        with self._lock:
            return [f"{c.method} {c.params.get('channel', '')} {str(c.params.get('text', ''))[:60]!r}" for c in self.calls]

    def thread_messages(self, channel: str, thread_ts: str) -> list[dict]:
        with self._lock:
            msgs = [m for (ch, _), m in self.messages.items()
                    if ch == channel and (m.get("thread_ts") or m["ts"]) == thread_ts]
        return sorted(msgs, key=lambda m: float(m["ts"]))

    def add_user_message(self, channel: str, text: str, user: str = "UHUMAN01", thread_ts: str | None = None) -> str:
        """A message a person wrote (Slack stores it; the test then sends the matching event)."""
        ts = self._next_ts()
        with self._lock:
            self.messages[(channel, ts)] = {"type": "message", "user": user, "text": text, "ts": ts,
                                            **({"thread_ts": thread_ts} if thread_ts else {})}
        return ts

    # ---- the API --------------------------------------------------------------------------------
    def _next_ts(self) -> str:
        return f"{1_700_000_000 + next(self._ts)}.000100"

    def _answer(self, method: str, p: dict) -> dict:
        if method in self.fail:
            return {"ok": False, "error": self.fail[method]}
        if method == "auth.test":
            return {"ok": True, "url": "https://test.slack.com/", "team": "test", "user": "jaxmem",
                    "team_id": TEAM, "user_id": BOT_USER, "bot_id": BOT_ID, "is_enterprise_install": False}
        if method == "chat.postMessage":
            ts = self._next_ts()
            msg = {"type": "message", "user": BOT_USER, "bot_id": BOT_ID, "ts": ts, "text": p.get("text", ""),
                   "blocks": p.get("blocks") or [], **({"thread_ts": p["thread_ts"]} if p.get("thread_ts") else {})}
            if p.get("metadata"):
                msg["metadata"] = p["metadata"]
            with self._lock:
                self.messages[(p["channel"], ts)] = msg
            return {"ok": True, "channel": p["channel"], "ts": ts, "message": msg}
        if method == "chat.update":
            with self._lock:
                msg = self.messages.get((p["channel"], p["ts"]))
                if msg is None:
                    return {"ok": False, "error": "message_not_found"}
                msg.update(text=p.get("text", ""), blocks=p.get("blocks") or [])
                if p.get("metadata"):
                    msg["metadata"] = p["metadata"]
            return {"ok": True, "channel": p["channel"], "ts": p["ts"], "text": p.get("text", "")}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": self._next_ts()}
        if method == "conversations.replies":
            return {"ok": True, "messages": self.thread_messages(p["channel"], p["ts"]), "has_more": False}
        if method == "reactions.add":
            return {"ok": True}
        return {"ok": False, "error": "unknown_method"}

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _params(self) -> dict:
                path, _, query = self.path.partition("?")
                params = dict(parse_qsl(query))
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                if raw:
                    if "json" in (self.headers.get("Content-Type") or ""):
                        params.update(json.loads(raw))
                    else:
                        params.update(dict(parse_qsl(raw)))
                for key in ("blocks", "metadata"):  # form-encoded calls send these as JSON text
                    if isinstance(params.get(key), str):
                        params[key] = json.loads(params[key])
                return params

            def do_GET(self):
                self._dispatch()

            def do_POST(self):
                self._dispatch()

            def _dispatch(self):
                path = self.path.partition("?")[0]
                params = self._params()
                token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                if path.startswith("/response/"):
                    method, body = "response_url", {"ok": True}
                    params["name"] = path.rsplit("/", 1)[-1]
                else:
                    method = path.removeprefix("/api/")
                    body = standin._answer(method, params)
                with standin._lock:
                    standin.calls.append(Call(method, params, token))
                data = (json.dumps(body) if method != "response_url" else "ok").encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json" if method != "response_url" else "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
