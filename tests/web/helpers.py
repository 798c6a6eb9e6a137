"""Shared by the web tests: where things are, and how a test asks and reads the page."""
from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
MINI = HERE.parent / "fixtures" / "mini_corpus"
ENTRY = HERE.parents[1] / "app" / "web.py"
SWEDISH_QUESTION = "Varför tar JAX 75 % av GPU-minnet?"


def ask(at, question: str):
    at.chat_input[0].set_value(question).run()
    assert not at.exception, at.exception
    return at


def texts(at) -> str:
    """Everything the page says, for 'the user can read X' assertions."""
    parts = [e.value for kind in ("title", "subheader", "markdown", "caption", "error", "warning", "info", "success")
             for e in getattr(at, kind)]
    return "\n".join(str(p) for p in parts)
