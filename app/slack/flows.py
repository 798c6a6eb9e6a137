"""The work behind each listener, run after the 3-second ack: answer, review, verify.

Listeners only pick the flow and its arguments. Every flow ends with something posted: the
result, or a plain error (a JaxmemError's message and hint; otherwise a short apology, with the
traceback in the log), never silence and never a traceback in Slack.
"""
from __future__ import annotations

import logging
import re
import time
import uuid
from dataclasses import dataclass, field

from jaxmem.app.services import Services
from jaxmem.app.slack import render
from jaxmem.app.slack.dedupe import SeenCache
from jaxmem.app.slack.history import thread_turns
from jaxmem.app.slack.post import NOT_WRITABLE, ChannelRateLimiter, Poster, slack_error
from jaxmem.core.errors import JaxmemError, UsageError
from jaxmem.core.fences import CHAT_FENCE, LANG_TAG

log = logging.getLogger("jaxmem.slack")

REVIEW_ONLY_WORDS = 3  # code with at most this much prose around it ("review this:") is only reviewed
_MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")


@dataclass
class Bot:
    """What the listeners share: the services and the Slack-side bookkeeping."""

    services: Services
    poster: Poster = field(default_factory=lambda: Poster(ChannelRateLimiter(1.0)))
    seen: SeenCache = field(default_factory=SeenCache)  # events and messages already handled
    threads: SeenCache = field(default_factory=SeenCache)  # threads the bot answered in


def clean(text: str) -> str:
    """The user's text without bot mentions, Slack's entity escapes undone, and code fences on
    their own lines (Slack's composer writes ```import jax ...```, which the advisor and the
    reviewer, like Markdown, would not see as a code block)."""
    text = _MENTION.sub(" ", text or "")
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").strip()
    return CHAT_FENCE.sub(_own_lines, text)


def _own_lines(m: re.Match) -> str:
    inner = m.group(1)
    tag = LANG_TAG.match(inner)
    head = inner[:tag.end()] if tag else "\n"
    body = (inner[tag.end():] if tag else inner).strip("\n")
    return f"```{head}{body}\n```"


def is_review_only(text: str) -> bool:
    if "```" not in text:
        return False
    return len(CHAT_FENCE.sub(" ", text).split()) <= REVIEW_ONLY_WORDS


def new_answer_id() -> str:
    return uuid.uuid4().hex[:12]


def _failure(lang: str, exc: BaseException, doing: str) -> list[dict]:
    if isinstance(exc, JaxmemError):
        return render.error_message(lang, exc.message, exc.hint)
    log.exception("while trying to %s", doing)
    return render.error_message(lang, render.t(lang, "failed_internal"))


def language(bot: Bot, text: str) -> str:
    try:
        return bot.services.language(text)
    except Exception:  # the placeholder's language is cosmetic; never fail an answer on it
        log.exception("language detection failed")
        return "en"


def reply_in_thread(bot: Bot, client, *, channel: str, ts: str, text: str, thread_ts: str | None) -> bool:
    """Answer (or review) one user message in its thread. False when it was already handled."""
    if not bot.seen.claim(f"msg:{channel}:{ts}"):
        return False  # the same message came as app_mention and as message.*: answer once
    question = clean(text)
    root = thread_ts or ts
    bot.threads.claim(f"thread:{channel}:{root}")  # later replies here are follow-ups, even without a mention
    lang = language(bot, question)
    review_only = is_review_only(question)
    placeholder = bot.poster.post(client, channel, thread_ts=root,
                                  **render.status(render.t(lang, "reviewing" if review_only else "thinking")))
    try:
        if not question:
            raise UsageError("the message has no question in it.", "Ask something after the mention, "
                              "e.g. @jaxmem why does JAX take 75% of my GPU memory?")
        if review_only:
            messages = render.findings_messages(bot.services.review(question), lang)
        else:
            history = thread_turns(client, channel, thread_ts, before_ts=ts)
            ans = bot.services.ask(question, history)
            messages = render.answer_messages(ans, new_answer_id())
    except Exception as exc:
        messages = _failure(lang, exc, "answer a message")
    bot.poster.deliver(client, channel, messages, thread_ts=root, placeholder_ts=placeholder.get("ts"))
    return True


def reply_to_command(bot: Bot, client, respond, *, channel: str, user: str, kind: str, arg: str) -> None:
    """Run `/jaxmem ask|review|verify` and post the result in the channel, visible to everyone."""
    lang = language(bot, arg) if kind == "ask" else "en"
    try:
        if kind == "ask":
            messages = render.answer_messages(bot.services.ask(arg), new_answer_id(), asker=user)
        elif kind == "review":
            messages = render.findings_messages(bot.services.review(arg), lang, asker=user)
        else:
            return verify_in_channel(bot, client, respond, channel=channel, user=user, arg=arg)
    except Exception as exc:
        respond(response_type="ephemeral", **_failure(lang, exc, f"run /jaxmem {kind}")[0])
        return
    try:
        bot.poster.deliver(client, channel, messages)
    except Exception as exc:
        if slack_error(exc) not in NOT_WRITABLE:
            raise
        # The bot is not in this channel (or it is a DM between people): the command's
        # response_url can still answer there.
        for msg in messages:
            respond(response_type="in_channel", text=msg["text"], blocks=msg["blocks"])


PROGRESS_EVERY_S = 2.0  # chat.update of the placeholder at most this often (Slack's per-workspace tier)


def verify_in_channel(bot: Bot, client, respond, *, channel: str, user: str, arg: str) -> None:
    """`/jaxmem verify TOPIC` or `/jaxmem verify` + a ``` block: a placeholder in the channel shows
    the queue position and progress, then becomes the result. Mistakes and refusals (unknown
    topic, user code switched off, the user's allowance used up) go only to the user."""
    fenced = CHAT_FENCE.search(arg)
    code = fenced.group(1) if fenced else None
    if code is not None and (tag := LANG_TAG.match(code)):
        code = code[tag.end():]  # the user's own line numbers: the fence's tag line is not code
    what = "your script" if fenced else f"`{arg}`"
    try:
        if code is None and arg not in bot.services.verify_topics():
            bot.services.verify_card(arg)  # raises the UsageError that lists the valid topics
        if code is not None and not bot.services.user_code:
            bot.services.run_script(code)  # raises the UsageError that says it is switched off
        bot.services.allowance.check(user)
    except Exception as exc:
        respond(response_type="ephemeral", **_failure("en", exc, "run /jaxmem verify")[0])
        return
    try:
        placeholder = bot.poster.post(client, channel, **render.status(f":hourglass_flowing_sand: Verifying {what}…"))
    except Exception as exc:
        if slack_error(exc) not in NOT_WRITABLE:
            raise
        placeholder = {}  # not in this channel: no progress, the result comes through response_url
    ts, last = placeholder.get("ts"), {"at": 0.0, "stage": None, "position": None}

    def show(progress) -> None:
        now = time.monotonic()
        changed = progress.stage != last["stage"] or progress.position != last["position"]
        if not ts or (not changed and now - last["at"] < PROGRESS_EVERY_S) or progress.stage == "done":
            return
        last.update(at=now, stage=progress.stage, position=progress.position)
        try:
            bot.poster.update(client, channel, ts, **render.progress_message(what, progress))
        except Exception:  # progress is cosmetic; the result still comes
            log.warning("updating the verification placeholder failed", exc_info=True)

    try:
        if code is not None:
            messages = render.script_messages(bot.services.run_script(code, on_progress=show, who=user), asker=user)
        else:
            evidence = bot.services.verify_card(arg, on_progress=show, who=user)
            messages = render.verify_messages(evidence, bot.services.settings.public_card_url(arg) or "", asker=user)
    except Exception as exc:
        messages = _failure("en", exc, "run /jaxmem verify")
        if not ts:
            respond(response_type="ephemeral", **messages[0])
            return
    if ts:
        bot.poster.deliver(client, channel, messages, placeholder_ts=ts)
        return
    for msg in messages:
        respond(response_type="in_channel", text=msg["text"], blocks=msg["blocks"])


def record_feedback(bot: Bot, client, *, rating: str, value: str, channel: str, user: str,
                    thread_ts: str | None) -> None:
    lang = "en"
    try:
        data = render.parse_feedback_value(value)
        lang = data["lang"]
        bot.services.feedback(data["answer_id"], rating, source="slack", question=data["question"], cards=data["cards"])
        text = render.t(lang, "thanks")
    except Exception as exc:
        text = _failure(lang, exc, "save feedback")[0]["text"]
    bot.poster.ephemeral(client, channel, user, text, thread_ts=thread_ts)
