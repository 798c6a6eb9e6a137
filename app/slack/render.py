"""Slack messages (text + Block Kit + metadata) for answers, review findings and verifications.

Each function returns a list of messages, `{"text", "blocks", "metadata"}`, ready for
`Poster.deliver`: one message normally, more when an answer exceeds Slack's per-message limits.
The answer's metadata (question, languages, cited cards) is what lets a later follow-up in the
thread rebuild the conversation from Slack itself (see `history.py`).
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import yaml

from jaxmem.app.answer import Answer
from jaxmem.app.slack.format import BLOCKS_PER_MESSAGE, escape, link, pack, split_text, to_mrkdwn

ANSWER_EVENT = "jaxmem_answer"  # message metadata event_type marking the bot's answers
FEEDBACK_ACTIONS = ("jaxmem_feedback_up", "jaxmem_feedback_down")
MAX_FINDINGS = 25  # a compact list: beyond this, a count and a pointer to `jaxmem review`
MAX_KEPT_QUESTION = 1_500  # of the question kept in metadata and button values (Slack caps both)
FALLBACK_CHARS = 300  # the notification text shown where blocks are not (push, screen readers)

_STRINGS = Path(__file__).with_name("strings.yaml")


@lru_cache(maxsize=1)
def _strings() -> dict:
    return yaml.safe_load(_STRINGS.read_text(encoding="utf-8"))


def t(lang: str, key: str, **kw) -> str:
    table = _strings().get(lang) or {}
    text = table.get(key) or _strings()["en"][key]
    return text.format(**kw) if kw else text


def section(text: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def context(text: str) -> dict:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text[:3000]}]}


def status(text: str) -> dict:
    """A placeholder shown while work runs; replaced by the result."""
    return {"text": text, "blocks": [context(f":hourglass_flowing_sand: {escape(text)}")]}


def _messages(sections: list[str], tail: list[dict], head: list[dict] | None = None,
              metadata: dict | None = None) -> list[dict]:
    head = head or []
    room = BLOCKS_PER_MESSAGE - len(tail) - len(head)
    groups = pack(sections, per_message=room) or [[]]
    out = []
    for i, group in enumerate(groups):
        blocks = (head if i == 0 else []) + [section(s) for s in group] + (tail if i == len(groups) - 1 else [])
        fallback = " ".join(group)[:FALLBACK_CHARS] or "jaxmem"
        msg = {"text": fallback, "blocks": blocks}
        if metadata and i == 0:
            msg["metadata"] = metadata
        out.append(msg)
    return out


def answer_messages(ans: Answer, answer_id: str, asker: str | None = None) -> list[dict]:
    lang = ans.answer_language or ans.language
    head = []
    if asker:  # a slash command's answer is a new channel message: say whose question it answers
        quoted = escape(ans.question[:500]) + ("…" if len(ans.question) > 500 else "")
        head.append(context(f"<@{asker}> {t(lang, 'asked')}: {quoted}"))
    head += [context(f":information_source: {escape(n)}") for n in ans.notes]
    tail = []
    if ans.citations:
        from jaxmem.app.answer import label

        main = ans.citations[0]
        if ans.more and main.url.startswith(("http://", "https://")):
            # The whole card is a link: a thread is no place for a thousand words.
            tail.append(context(f":page_facing_up: {link(main.url, label(lang, 'whole_card'))}"))
        elif ans.more and main.summary:  # no public web app to link: the card's summary instead
            tail.append(context(f":page_facing_up: *{escape(main.title)}*: {escape(main.summary)}"))
        ev = ans.citations[0].evidence
        machines = (ev.get("all_machines") or [ev.get("summary") or ""]) if ev else []
        if any(machines):  # what the verifier measured for the main card, per machine kind
            tail.append(context(f":test_tube: *{label(lang, 'evidence')}*: "
                                + "\n".join(escape(m) for m in machines if m)))
        links = " · ".join(f"{link(c.url, c.title)} ({c.language})" for c in ans.citations)
        tail.append(context(f":books: *{label(lang, 'sources')}*: {links}"))
    tail.append(feedback_block(lang, answer_id, ans.question, [c.card for c in ans.citations] or ans.closest))
    meta = {"event_type": ANSWER_EVENT, "event_payload": {
        "answer_id": answer_id, "question": ans.question[:MAX_KEPT_QUESTION], "language": ans.language,
        "answer_language": lang, "cards": [c.card for c in ans.citations], "abstained": ans.abstained}}
    return _messages(split_text(to_mrkdwn(ans.answer)), tail, head, meta)


def feedback_block(lang: str, answer_id: str, question: str, cards: list[str]) -> dict:
    value = json.dumps({"a": answer_id, "l": lang, "c": list(cards)[:5], "q": question[:MAX_KEPT_QUESTION]},
                       ensure_ascii=False)
    return {"type": "actions", "block_id": f"jaxmem_feedback:{answer_id}", "elements": [
        {"type": "button", "action_id": FEEDBACK_ACTIONS[0], "value": value,
         "text": {"type": "plain_text", "text": f":+1: {t(lang, 'helpful')}", "emoji": True}},
        {"type": "button", "action_id": FEEDBACK_ACTIONS[1], "value": value,
         "text": {"type": "plain_text", "text": f":-1: {t(lang, 'not_helpful')}", "emoji": True}},
    ]}


def parse_feedback_value(value: str) -> dict:
    """The button's value back as {answer_id, lang, cards, question}; ValueError names a bad one."""
    try:
        data = json.loads(value)
        return {"answer_id": str(data["a"]), "lang": str(data.get("l") or "en"), "cards": list(data.get("c") or []),
                "question": str(data.get("q") or "")}
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"feedback button value {value[:80]!r} is not jaxmem's JSON ({exc})") from None


def findings_messages(findings: list[dict], lang: str = "en", asker: str | None = None) -> list[dict]:
    """The compact list: `CODE` line N: message → card link, one line per finding."""
    from jaxmem.app.answer import label

    head = [context(f"<@{asker}> /jaxmem review")] if asker else []
    if not findings:
        return _messages([escape(label(lang, "review_clean"))], [], head)
    lines = [f"*{escape(label(lang, 'review', n=len(findings)))}*"]
    for f in findings[:MAX_FINDINGS]:
        where = f"line {f.get('line')}" + (f", cell {f['cell']}" if f.get("cell") else "")
        card = f" → {link(f.get('url') or '', f.get('topic') or 'card')}" if f.get("topic") or f.get("url") else ""
        maybe = "_(possible)_ " if f.get("confidence") == "possible" else ""
        lines.append(f"• `{f.get('code')}` {where}: {maybe}{escape(str(f.get('message', '')))}{card}")
    if len(findings) > MAX_FINDINGS:
        lines.append(f"• … +{len(findings) - MAX_FINDINGS} (`jaxmem review` lists all)")
    return _messages(split_text("\n".join(lines)), [], head)


def verify_messages(evidence, card_url: str, asker: str | None = None) -> list[dict]:
    """A card's verification (an `Evidence`): verdict, summary, one line per metric."""
    verdict = evidence.verdict or "?"
    icon = {"confirmed": ":white_check_mark:", "not confirmed": ":x:"}.get(verdict, ":grey_question:")
    lines = [f"{icon} *{escape(evidence.topic)}*: {escape(verdict)}", escape(evidence.summary)]
    from jaxmem.evaluators.verify.api import metric_rows

    lines += [f"• {escape(_metric_line(row))}" for row in metric_rows(evidence)[:12]]
    about = [link(card_url, evidence.topic), evidence.origin]
    if evidence.node:
        about.append(f"ran on {evidence.node}")
    if asker:
        about.append(f"for <@{asker}>")
    return _messages(split_text("\n".join(lines)), [context(" · ".join(escape(a) if i else a for i, a in enumerate(about)))])


def script_messages(run, asker: str | None = None) -> list[dict]:
    """A user's script run in the sandbox (a `ScriptRun`): counts, and the lines that sync."""
    icon = ":white_check_mark:" if run.ok else ":x:"
    lines = [f"{icon} {escape(run.summary)}"]
    lines += [f"• line {s['line']}: `{escape(str(s.get('source') or ''))}` synced {s['count']}x"
              for s in run.host_sync_lines[:10] if s.get("line")]
    about = [f"isolation: {run.isolation}"] + ([f"ran on {run.node}"] if run.node else []) + (
        [f"for <@{asker}>"] if asker else [])
    return _messages(split_text("\n".join(lines)), [context(" · ".join(about))])


def progress_message(what: str, progress) -> dict:
    """The placeholder of a running verification: queued with its place, or how far it got."""
    if progress.stage == "queued":
        text = f":hourglass_flowing_sand: Verifying {what}: waiting in the queue, {progress.position} ahead"
    else:
        done = f" ({progress.done}/{progress.total} runs)" if progress.total else ""
        text = f":hourglass_flowing_sand: Verifying {what}: {progress.message}{done}"
    return status(escape(text))


def _metric_line(row) -> str:
    if row.state == "measured":
        return f"{row.label}: {row.before_text} → {row.after_text} ({row.verdict})"
    return row.text


def error_message(lang: str, message: str, hint: str = "") -> list[dict]:
    text = f":warning: {t(lang, 'failed')}: {escape(message)}" + (f"\n{escape(hint)}" if hint else "")
    return [{"text": text[:FALLBACK_CHARS], "blocks": [section(s) for s in split_text(text)]}]
