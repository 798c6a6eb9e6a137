"""HTTP mode: the Bolt app behind a threaded HTTP server (Events API + interactivity + commands).

Bolt's own `app.start()` serves one request at a time on 0.0.0.0; this one answers concurrent
requests (Slack sends retries and button clicks while an answer runs), binds where it is told,
caps the body size, and has a health check for load balancers and tests.
"""
from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from slack_bolt import App
from slack_bolt.request import BoltRequest

log = logging.getLogger("jaxmem.slack")

EVENTS_PATH = "/slack/events"
HEALTH_PATH = "/healthz"
MAX_BODY = 1 << 20  # Slack's payloads are far smaller; a bigger body is not from Slack


def make_server(app: App, host: str, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            log.debug("%s - %s", self.address_string(), fmt % args)

        def do_GET(self):
            if self.path.partition("?")[0] == HEALTH_PATH:
                self._send(200, {}, "ok")
            else:
                self._send(404, {}, "not found")

        def do_POST(self):
            path, _, query = self.path.partition("?")
            length = int(self.headers.get("Content-Length") or 0)
            if path != EVENTS_PATH:
                self._send(404, {}, f"POST to {EVENTS_PATH}")
                return
            if length > MAX_BODY:
                self._send(413, {}, "body too large")
                return
            body = self.rfile.read(length).decode("utf-8", errors="replace")
            headers = {k.lower(): self.headers.get_all(k) for k in set(self.headers.keys())}
            resp = app.dispatch(BoltRequest(body=body, query=query, headers=headers))
            self._send(resp.status, resp.headers, resp.body)

        def _send(self, status: int, headers: dict, body) -> None:
            data = (body if isinstance(body, str) else str(body)).encode("utf-8")
            self.send_response(status)
            for key, values in headers.items():
                if key.lower() == "content-length":
                    continue
                for value in values if isinstance(values, (list, tuple)) else [values]:
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    class Server(ThreadingHTTPServer):
        # The standard library's listen backlog is 5: under a burst of events (a busy workspace,
        # Slack's retries) the kernel drops the rest of the SYNs and clients wait seconds to
        # reconnect, past Slack's 3-second ack. A production server keeps a deeper queue.
        request_queue_size = 128
        daemon_threads = True

    return Server((host, port), Handler)


def serve_in_thread(server: ThreadingHTTPServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True,
                              name="jaxmem-slack-http")
    thread.start()
    return thread
