"""One module per Slack entry point; `register` wires them all onto a Bolt app."""
from __future__ import annotations

from jaxmem.app.slack.listeners import command, feedback, mention, message


def register(app, bot) -> None:
    mention.register(app, bot)
    command.register(app, bot)
    feedback.register(app, bot)
    message.register(app, bot)  # last: its catch-all acks the message events nobody wants
