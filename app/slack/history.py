"""A thread's earlier turns, rebuilt from Slack itself (not from this process's memory).

Each answer the bot posts carries message metadata (`render.ANSWER_EVENT`) with the question,
its language and the cited cards, so a follow-up works after a restart and across replicas, and
messages between people in the thread do not steer the advisor.
"""
from __future__ import annotations

import logging

from slack_sdk.errors import SlackApiError

from jaxmem.app.answer import Turn
from jaxmem.app.slack.render import ANSWER_EVENT

log = logging.getLogger("jaxmem.slack")

MAX_REPLIES = 200  # conversations.replies page size; longer threads keep their latest turns
MAX_TURNS = 6  # the advisor only looks at the latest turns


def thread_turns(client, channel: str, thread_ts: str | None, before_ts: str | None = None) -> list[Turn]:
    if not thread_ts:
        return []
    try:
        replies = client.conversations_replies(channel=channel, ts=thread_ts, limit=MAX_REPLIES,
                                               include_all_metadata=True).get("messages") or []
    except SlackApiError as exc:
        # Missing history scope or a deleted thread: answer without context rather than not at all.
        log.warning("reading thread %s in %s failed: %s", thread_ts, channel, exc.response.get("error"))
        return []
    turns: list[Turn] = []
    for msg in replies:
        if before_ts and float(msg.get("ts", 0)) >= float(before_ts):
            break
        meta = msg.get("metadata") or {}
        if meta.get("event_type") != ANSWER_EVENT:
            continue
        p = meta.get("event_payload") or {}
        turns.append(Turn("user", str(p.get("question", "")), p.get("language")))
        turns.append(Turn("assistant", msg.get("text", ""), p.get("answer_language"), list(p.get("cards") or [])))
    return turns[-MAX_TURNS:]
