"""Markdown (what the advisor writes) -> Slack mrkdwn, and splitting text to fit Slack's limits.

Slack does not render Markdown: `**bold**` shows its asterisks, `[t](u)` shows brackets, `#`
headings show hashes. mrkdwn also needs `&`, `<` and `>` escaped, because `<...>` is its link and
mention syntax: an unescaped `<` in an answer would swallow the text after it.
"""
from __future__ import annotations

import re

from jaxmem.core.fences import is_fence_line

SECTION_LIMIT = 3_000  # characters in one section block's text
MESSAGE_TEXT_LIMIT = 40_000  # characters Slack keeps of a message's `text`
BLOCKS_PER_MESSAGE = 50

_INLINE_CODE = re.compile(r"(`[^`\n]+`)")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC_STAR = re.compile(r"(?<![\*\w])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\*\w])")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def link(url: str, label: str) -> str:
    """A Slack link; just the label where `url` is not absolute (a card page of a web app with no
    public URL): Slack cannot open it, and a link that leads nowhere is worse than none."""
    if not url.startswith(("http://", "https://")):
        return escape(label)
    # `|` and `>` end a Slack link's label early.
    return f"<{url}|{escape(label).replace('|', '¦')}>"


def _inline(text: str) -> str:
    """One line of prose: escape, then links, bold, italics; inline code is left verbatim."""
    out = []
    for part in _INLINE_CODE.split(text):
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(escape(part))
            continue
        links: list[str] = []

        def keep(m: re.Match, links: list[str] = links) -> str:
            links.append(link(m.group(2), m.group(1)))
            return f"\x00{len(links) - 1}\x00"

        # Links first, so their labels and URLs are not touched by the emphasis rules below.
        part = escape(_LINK.sub(keep, part))
        part = _ITALIC_STAR.sub(r"_\1_", part)
        part = _BOLD.sub(lambda m: f"*{m.group(1) or m.group(2)}*", part)
        part = re.sub(r"\x00(\d+)\x00", lambda m, links=links: links[int(m.group(1))], part)
        out.append(part)
    return "".join(out)


def to_mrkdwn(markdown: str) -> str:
    """Convert the Markdown subset the composer and the reviewer write."""
    lines, in_code = [], False
    for line in markdown.splitlines():
        if is_fence_line(line):
            # Slack ignores a language tag after the fence and would print it: drop it.
            in_code = not in_code
            lines.append("```")
            continue
        if in_code:
            lines.append(escape(line))
            continue
        if not line.strip():
            if lines and lines[-1]:  # Markdown folds runs of blank lines; Slack would show each one
                lines.append("")
            continue
        if _RULE.match(line):
            lines.append("──────────")
            continue
        heading = _HEADING.match(line)
        if heading:
            # mrkdwn has no nested bold: drop the heading's own emphasis markers first.
            lines.append(f"*{_inline(re.sub(r'[*_]{2}', '', heading.group(1)))}*")
            continue
        bullet = _BULLET.match(line)
        if bullet:
            line = f"{bullet.group(1)}• {line[bullet.end():]}"
        quote = re.match(r"^(\s*>\s?)+", line)
        if quote:
            # Keep the quote marker itself unescaped: it is mrkdwn's blockquote too.
            lines.append("> " + _inline(line[quote.end():]))
            continue
        lines.append(_inline(line))
    if in_code:
        lines.append("```")  # an unclosed fence would swallow every later message
    return "\n".join(lines).strip("\n")


def split_text(text: str, limit: int = SECTION_LIMIT) -> list[str]:
    """Pieces of at most `limit` characters, cut at paragraph, then line, then word boundaries.

    A cut inside a ``` block closes the fence in one piece and reopens it in the next, so each
    piece renders on its own.
    """
    if limit < 20:
        raise ValueError(f"split limit {limit} is too small; use at least 20 characters")
    text = text.strip("\n")
    if not text:
        return []
    pieces: list[str] = []
    while len(text) > limit:
        room = limit - 4  # room for a closing fence
        cut = _cut_point(text, room)
        piece, rest = text[:cut].rstrip(), text[cut:].lstrip("\n")
        if piece.count("```") % 2:
            piece += "\n```"
            rest = "```\n" + rest
        pieces.append(piece)
        text = rest
    if text.strip():
        pieces.append(text)
    return pieces


def _cut_point(text: str, room: int) -> int:
    window = text[:room]
    for sep in ("\n\n", "\n", " "):
        at = window.rfind(sep)
        if at > room // 3:  # do not cut so early that pieces become tiny
            return at + len(sep)
    return room


def pack(sections: list[str], *, per_message: int = BLOCKS_PER_MESSAGE,
         text_limit: int = MESSAGE_TEXT_LIMIT) -> list[list[str]]:
    """Group section texts into messages: at most `per_message` blocks and `text_limit` characters."""
    messages: list[list[str]] = [[]]
    size = 0
    for s in sections:
        if messages[-1] and (len(messages[-1]) >= per_message or size + len(s) > text_limit):
            messages.append([])
            size = 0
        messages[-1].append(s)
        size += len(s)
    return [m for m in messages if m]
