"""Direct messages, and follow-ups without a mention in threads the bot already answered in."""
from __future__ import annotations

from jaxmem.app.slack import flows


def register(app, bot) -> None:
    def wanted(event, context) -> bool:
        # Edits, joins and other bots' posts are not questions (and answering bots can loop).
        if event.get("subtype") or event.get("bot_id"):
            return False
        if event.get("channel_type") == "im":
            return True
        if f"<@{context.bot_user_id}>" in (event.get("text") or ""):
            return False  # app_mention answers it
        thread = event.get("thread_ts")
        return bool(thread) and f"thread:{event.get('channel')}:{thread}" in bot.threads

    def ack_message(ack):
        ack()

    def answer_message(event, client):
        flows.reply_in_thread(bot, client, channel=event["channel"], ts=event["ts"], text=event.get("text", ""),
                              thread_ts=event.get("thread_ts"))

    app.event("message", matchers=[wanted])(ack=ack_message, lazy=[answer_message])

    # Every other message event (the bot sees all of a channel's messages once subscribed) is
    # acknowledged quietly: an unhandled event gets a 404, which Slack would retry.
    @app.event("message")
    def ignore_message(ack):
        ack()
