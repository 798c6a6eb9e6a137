"""Helpful / not helpful buttons under each answer, stored with the web chat's feedback."""
from __future__ import annotations

import re

from jaxmem.app.slack import flows

RATING = {"jaxmem_feedback_up": "up", "jaxmem_feedback_down": "down"}


def register(app, bot) -> None:
    def ack_feedback(ack):
        ack()

    def save_feedback(body, client):
        action = body["actions"][0]
        message = body.get("message") or {}
        flows.record_feedback(bot, client, rating=RATING[action["action_id"]], value=action.get("value", ""),
                              channel=body["channel"]["id"], user=body["user"]["id"],
                              thread_ts=message.get("thread_ts"))

    app.action(re.compile("^jaxmem_feedback_(up|down)$"))(ack=ack_feedback, lazy=[save_feedback])
