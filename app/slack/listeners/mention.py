"""@jaxmem in a channel: answer (or review pasted code) in the message's thread."""
from __future__ import annotations

from jaxmem.app.slack import flows


def register(app, bot) -> None:
    def ack_mention(ack):
        ack()  # within 3 s; the answer follows from the lazy listener

    def answer_mention(event, client):
        flows.reply_in_thread(bot, client, channel=event["channel"], ts=event["ts"], text=event.get("text", ""),
                              thread_ts=event.get("thread_ts"))

    app.event("app_mention")(ack=ack_mention, lazy=[answer_mention])
