"""Retried deliveries never produce a second answer.

Slack redelivers an event (same `event_id`, header `X-Slack-Retry-Num: 1..3`) when it did not
get a 200 within 3 seconds, and delivers one message twice when it both mentions the bot and is
a message the bot subscribes to (`app_mention` + `message.*`). Dropping every request that
carries X-Slack-Retry-Num would lose a question whose first delivery never reached us (a
restart, a network blip), so retries are dropped only when their event was already seen.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict

from slack_bolt.response import BoltResponse

log = logging.getLogger("jaxmem.slack")

TTL_S = 3_600.0  # Slack retries within minutes; an hour of memory is ample
MAX_KEYS = 50_000


class SeenCache:
    """Thread-safe set of keys that expire; `claim` is an atomic test-and-set."""

    def __init__(self, ttl_s: float = TTL_S, max_keys: int = MAX_KEYS, clock=time.monotonic):
        self.ttl_s, self.max_keys, self._clock = ttl_s, max_keys, clock
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def claim(self, key: str) -> bool:
        """True the first time `key` is seen within the TTL, False for every repeat."""
        now = self._clock()
        with self._lock:
            while self._seen and (next(iter(self._seen.values())) < now or len(self._seen) > self.max_keys):
                self._seen.popitem(last=False)
            if key in self._seen:
                return False
            self._seen[key] = now + self.ttl_s
            return True

    def __contains__(self, key: str) -> bool:
        with self._lock:
            expires = self._seen.get(key)
        return expires is not None and expires >= self._clock()


def retry_middleware(seen: SeenCache):
    """Global Bolt middleware: ack a repeated event_id at once and run no listener for it."""

    def drop_repeated_events(body: dict, request, next):
        event_id = body.get("event_id") if isinstance(body, dict) else None
        if event_id and not seen.claim(f"event:{event_id}"):
            retry = request.headers.get("x-slack-retry-num", ["?"])[0]
            log.info("dropped repeated delivery of %s (X-Slack-Retry-Num %s)", event_id, retry)
            # 200 tells Slack to stop retrying; a non-2xx would make it try again.
            return BoltResponse(status=200, body="", headers={"x-slack-no-retry": "1"})
        return next()

    return drop_repeated_events
