"""Code fences, found one way everywhere: in chat messages (web, Slack, `jaxmem ask`) and in the
corpus's Markdown cards.

Chat messages are loose: Slack's composer writes ```import jax ...``` on one line, people add a
language tag or none. Cards are strict Markdown: a fence opens and closes at the start of a line.
"""
from __future__ import annotations

import re

# ```...``` anywhere, one-line blocks included; group 1 is everything between the backticks.
CHAT_FENCE = re.compile(r"```(.*?)```", re.S)
# The language tag line at the start of a chat block ("python\n", "py\n", a bare newline): not code.
LANG_TAG = re.compile(r"[ \t]*(?:python3?|py|ipython|text|bash|sh)?[ \t]*\n", re.I)
# A fenced block of a Markdown document: from a line starting ``` to the next such line.
MARKDOWN_FENCE = re.compile(r"^```[^\n]*\n.*?^```", re.M | re.S)


def is_fence_line(line: str) -> bool:
    """A line that opens or closes a fenced block (what a message splitter must not cut inside)."""
    return line.strip().startswith("```")


def chat_code_blocks(text: str) -> list[str]:
    """The code of every fenced block in a chat message, without its language tag, non-empty only."""
    out = []
    for inner in CHAT_FENCE.findall(text):
        tag = LANG_TAG.match(inner)
        code = inner[tag.end():] if tag else inner
        if code.strip():
            out.append(code)
    return out


def strip_chat_code(text: str, repl: str = " ") -> str:
    """The message's prose: every fenced block replaced by `repl`."""
    return CHAT_FENCE.sub(repl, text)
