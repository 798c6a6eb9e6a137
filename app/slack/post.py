"""Posting to Slack within its rules: one new message per second per channel.

Every message the bot writes goes through `Poster`, so the rate limit cannot be bypassed by a
handler that forgets it. Slack allows short bursts, but sustained posting above one message per
second in a channel gets `ratelimited` errors and, at worst, the app's messages dropped.
"""
from __future__ import annotations

import logging
import threading
import time

from slack_sdk.errors import SlackApiError

log = logging.getLogger("jaxmem.slack")

# Errors that mean "the bot cannot write here" (not a bug): the caller falls back to response_url.
NOT_WRITABLE = {"not_in_channel", "channel_not_found", "is_archived", "restricted_action"}


class ChannelRateLimiter:
    """Hands out send slots at least `interval` seconds apart per channel, across threads."""

    def __init__(self, interval: float = 1.0, clock=time.monotonic, sleep=time.sleep):
        if interval < 0:
            raise ValueError(f"interval must be >= 0 seconds, got {interval}")
        self.interval = interval
        self._clock, self._sleep = clock, sleep
        self._next: dict[str, float] = {}
        self._lock = threading.Lock()

    def wait(self, channel: str) -> float:
        """Block until this channel may get another message; returns the seconds waited."""
        with self._lock:
            now = self._clock()
            slot = max(now, self._next.get(channel, now))
            self._next[channel] = slot + self.interval
            if len(self._next) > 10_000:  # forget channels idle for long, so the map stays small
                self._next = {c: t for c, t in self._next.items() if t > now}
        delay = slot - now
        if delay > 0:
            self._sleep(delay)
        return delay


class Poster:
    """chat.postMessage and chat.postEphemeral through one rate limiter; chat.update beside it."""

    def __init__(self, limiter: ChannelRateLimiter):
        self.limiter = limiter

    def post(self, client, channel: str, text: str, blocks: list | None = None, thread_ts: str | None = None,
             metadata: dict | None = None) -> dict:
        self.limiter.wait(channel)
        kwargs = {"channel": channel, "text": text, "blocks": blocks, "thread_ts": thread_ts,
                  "unfurl_links": False, "unfurl_media": False}
        if metadata:
            kwargs["metadata"] = metadata
        return client.chat_postMessage(**{k: v for k, v in kwargs.items() if v is not None}).data

    def update(self, client, channel: str, ts: str, text: str, blocks: list | None = None,
               metadata: dict | None = None) -> dict:
        # Not through the per-channel limiter: that limit is on new messages (chat.postMessage);
        # chat.update has the ordinary per-workspace tier, and its `ratelimited` replies are
        # retried by the client's handler. Waiting here would delay every answer by a second.
        kwargs = {"channel": channel, "ts": ts, "text": text, "blocks": blocks or [], "metadata": metadata}
        return client.chat_update(**{k: v for k, v in kwargs.items() if v is not None}).data

    def ephemeral(self, client, channel: str, user: str, text: str, thread_ts: str | None = None) -> None:
        self.limiter.wait(channel)
        kwargs = {"channel": channel, "user": user, "text": text, "thread_ts": thread_ts}
        client.chat_postEphemeral(**{k: v for k, v in kwargs.items() if v is not None})

    def deliver(self, client, channel: str, messages: list[dict], *, thread_ts: str | None = None,
                placeholder_ts: str | None = None) -> list[str]:
        """Send a reply made of one or more messages; the first replaces the placeholder if any.

        Returns the ts of each message sent, for the caller to log or thread under.
        """
        sent = []
        for i, msg in enumerate(messages):
            if i == 0 and placeholder_ts:
                try:
                    self.update(client, channel, placeholder_ts, **msg)
                    sent.append(placeholder_ts)
                    continue
                except SlackApiError as exc:  # e.g. message_not_found: deleted meanwhile; post instead
                    log.warning("updating the placeholder %s failed (%s); posting a new message",
                                placeholder_ts, exc.response.get("error"))
            sent.append(self.post(client, channel, thread_ts=thread_ts, **msg).get("ts", ""))
        return sent


def slack_error(exc: BaseException) -> str | None:
    if isinstance(exc, SlackApiError):
        return exc.response.get("error")
    return None
