"""Files the reviewer cannot parse: a JM001 finding for a syntax error, or a note for what is not
a broken program (syntax a newer Python parses, a pasted REPL session)."""
from __future__ import annotations

import re
import sys
from collections.abc import Callable

from jaxmem.evaluators.review import calibration
from jaxmem.evaluators.review.finding import Finding

PARSE_ERROR_CODE = "JM001"
# JM001's record on unseen code restarts here (see Rule.record_from): its only wrong findings, 6 on
# 12zb, were git symbolic links checked out as text files, now a note (inputs._symlink_text).
PARSE_ERROR_RECORD_FROM = "unseen-2026-12zd"
_PY = f"{sys.version_info.major}.{sys.version_info.minor}"
# Syntax a newer Python accepts and this one rejects: (regex on the failing line, version, what).
_NEWER_SYNTAX = (
    (re.compile(r"^\s*type\s+\w+\s*[\[=]"), (3, 12), "PEP 695 type aliases"),
    (re.compile(r"^\s*(async\s+)?def\s+\w+\s*\["), (3, 12), "PEP 695 generic functions"),
    (re.compile(r"^\s*class\s+\w+\s*\["), (3, 12), "PEP 695 generic classes"),
)


def newer_syntax(exc: Exception, lines: list[str]) -> str | None:
    """A note naming the Python version a file needs, when the error is newer syntax."""
    line = getattr(exc, "lineno", None) or 0
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    for pattern, version, what in _NEWER_SYNTAX:  # noqa: B007 (`what` is read after the break)
        if sys.version_info < version and pattern.search(text):
            break
    else:
        msg = getattr(exc, "msg", "") or ""
        if sys.version_info < (3, 12) and msg.startswith("f-string"):
            version, what = (3, 12), "PEP 701 f-strings"
        else:
            return None
    need = f"{version[0]}.{version[1]}"
    return (f"line {line}: {what} need Python {need} or newer to parse; this reviewer runs on Python {_PY}, "
            f"so the file was not reviewed (run jaxmem on Python {need}+ to review it)")


_PROMPT = re.compile(r"^\s*>>>( |$)")


def repl_transcript(exc: Exception, lines: list[str]) -> str | None:
    """A note when the source is an interactive session pasted as it was shown (`>>> f(x)` and
    its printed output: slides, docs): not a program with a syntax error, and nothing to review."""
    line = getattr(exc, "lineno", None) or 0
    # Where the parser stopped: a prompt outside any string (one in a docstring parses).
    if 0 < line <= len(lines) and _PROMPT.match(lines[line - 1]):
        return "a Python REPL transcript (`>>>` prompts and printed output), not a script: not reviewed"
    return None


NEWER_FIX = "Review the file with a newer Python, or exclude it."


def parse_error(path: str, exc: Exception, lines: list[str], card_url: Callable[[str], str],
                newer: str | None = None, fix: str = NEWER_FIX) -> Finding:
    """A JM001 finding: an error, or with `newer` (a note: newer syntax, a REPL transcript) an info."""
    line = getattr(exc, "lineno", None) or 1
    col = getattr(exc, "offset", None) or 1
    msg = getattr(exc, "msg", None) or str(exc)
    src = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    if newer is not None:
        return Finding(path=path, line=line, col=col, code=PARSE_ERROR_CODE, name="syntax-error",
                       message=newer, severity="info", topic="", fix=fix, url="", source_line=src)
    # A syntax error is certain; whether it is worth showing is what the calibration measured on
    # unseen code (mostly Python 2 scripts and snippets nobody runs), as for every rule.
    sure = PARSE_ERROR_CODE not in calibration.demoted()
    return Finding(path=path, line=line, col=col, code=PARSE_ERROR_CODE, name="syntax-error",
                   message=f"cannot parse with Python {_PY}: {msg}; the file was not reviewed", severity="error",
                   topic="", fix="Fix the syntax error (or exclude the file) and review again.",
                   url="", source_line=src, confidence="sure" if sure else "possible")
