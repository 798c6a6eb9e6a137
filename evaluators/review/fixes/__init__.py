"""Fixes for findings, the ruff way: each one a pure function over source text, computed on a
concrete syntax tree (LibCST) that keeps comments and formatting, registered by rule code.

    fix_for(source, finding, options)   -> Fix | None      (one finding, on the source it came from)
    apply.fix_source(source, path, ...) -> Outcome          (every fix of a file, re-reviewed each time)
    apply.fix_notebook(text, path, ...) -> Outcome          (code cells only; outputs and metadata kept)

A fix is *safe* when it keeps what the code computes and prints (`--fix` applies it) and *unsafe*
when it may not (`--unsafe-fixes`): a per-step read moved to a logging interval prints less; a
jitted lambda whose loop variable becomes an argument may no longer trace; a finding whose premise
the reviewer only guessed ("possible") never gets a safe fix. One module per fix; the rules keep
the detection, and a fix re-derives from the syntax tree what it needs beyond the finding.
"""
from __future__ import annotations

from collections.abc import Callable

from jaxmem.evaluators.review.finding import Finding
from jaxmem.evaluators.review.fixes import (
    block_until_ready,
    donation,
    env_before_import,
    hoist_jit,
    log_interval,
    removed_device_put,
)
from jaxmem.evaluators.review.fixes.base import APPLICABILITIES, SAFE, UNSAFE, Fix, Options  # noqa: F401

FixFn = Callable[[str, Finding, Options], "Fix | None"]

REGISTRY: dict[str, FixFn] = {
    "JM101": log_interval.fix,
    "JM102": log_interval.fix,
    "JM103": log_interval.fix,
    "JM204": removed_device_put.fix,
    "JM301": hoist_jit.fix,
    "JM401": donation.fix,
    "JM601": env_before_import.fix,
    "JM701": block_until_ready.fix,
}


def fixable(code: str) -> bool:
    return code in REGISTRY


def fix_for(source: str, finding: Finding, options: Options = Options(), *, strict: bool = False) -> Fix | None:
    """The fix of one finding on the source it was found in, or None (no fix known for this shape
    of code). A fix that fails is no fix (the finding stays as it is), unless `strict` (tests)."""
    fn = REGISTRY.get(finding.code)
    if fn is None:
        return None
    try:
        return fn(source, finding, options)
    except Exception:
        if strict:
            raise
        return None
