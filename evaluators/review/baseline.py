"""A baseline: findings a team has accepted as they are, so a review shows only new ones.

`jaxmem review src/ --write-baseline .jaxmem-baseline.json` records every finding shown now;
`jaxmem review src/ --baseline .jaxmem-baseline.json` then leaves those out. A finding is matched
by its SARIF fingerprint (code, file, the line's text without spacing, and its occurrence on that
text), so it stays matched when lines above it move and stops matching when its line changes.
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from jaxmem.evaluators.review.finding import Finding
from jaxmem.evaluators.review.formats import fingerprints

VERSION = 1


class BaselineError(ValueError):
    """The baseline file is missing or not one this command wrote: names the file and why."""


def _portable(findings: Sequence[Finding]) -> list[Finding]:
    """Paths relative to the working directory, with forward slashes: the same baseline matches
    on every machine that runs the review from the repository root."""
    out = []
    for f in findings:
        path = f.path
        if os.path.isabs(path):
            rel = os.path.relpath(path)
            path = path if rel.startswith("..") else rel
        path = path.replace("\\", "/").removeprefix("./")
        out.append(Finding(**{**f.to_dict(), "path": path}))
    return out


def write(findings: Sequence[Finding], path: Path) -> int:
    entries = {fp: {"code": f.code, "path": f.path, "line": f.line}
               for f, fp in zip(_portable(findings), fingerprints(_portable(findings)))}
    doc = {"version": VERSION, "tool": "jaxmem review", "findings": dict(sorted(entries.items()))}
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return len(entries)


def load(path: Path) -> frozenset[str]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise BaselineError(f"{path}: no such baseline file (write one with --write-baseline {path})") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BaselineError(f"{path}: not a jaxmem baseline: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("version") != VERSION or not isinstance(doc.get("findings"), dict):
        raise BaselineError(f"{path}: not a jaxmem baseline (expected a JSON object with version {VERSION} "
                            f"and 'findings', as --write-baseline writes)")
    return frozenset(doc["findings"])


def apply(findings: Sequence[Finding], accepted: frozenset[str]) -> tuple[list[Finding], int]:
    """The findings not in the baseline, and how many were left out."""
    keep = [f for f, fp in zip(findings, fingerprints(_portable(findings))) if fp not in accepted]
    return keep, len(findings) - len(keep)
