"""The types every fix shares: what a fix returns, its options, and reading a finding's message."""
from __future__ import annotations

import re
import string
from dataclasses import dataclass
from functools import lru_cache

from jaxmem.evaluators.review.finding import Finding

SAFE = "safe"      # keeps what the code computes and prints; `--fix` applies it
UNSAFE = "unsafe"  # may change behaviour (what is printed, a premise not proven); `--unsafe-fixes`
APPLICABILITIES = (SAFE, UNSAFE)
DEFAULT_INTERVAL = 100


@dataclass(frozen=True)
class Options:
    interval: int = DEFAULT_INTERVAL  # steps between logged reads (JM101-JM103 fixes)


@dataclass(frozen=True)
class Fix:
    """One finding's fix: the whole new source, how safe it is, and what it does in words."""

    code: str
    applicability: str
    title: str
    source: str


def make_fix(finding: Finding, applicability: str, title: str, source: str) -> Fix:
    # A finding whose premise the reviewer only guessed never gets a safe fix; one shown as
    # possible only because its rule's record on unseen code is weak (premises proven) keeps it.
    if not finding.proven:
        applicability = UNSAFE
    return Fix(finding.code, applicability, title, source)


@lru_cache(maxsize=64)
def _pattern(template: str) -> re.Pattern:
    parts = []
    for literal, field, _spec, _conv in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if field is not None:
            parts.append(f"(?P<{field}>.+?)" if field.isidentifier() and f"(?P<{field}>" not in "".join(parts)
                         else ".+?")
    return re.compile("".join(parts), re.S)


def message_fields(finding: Finding) -> dict[str, str]:
    """The values the rule put into its message (`{arg}`, `{func}`, ...), read back from the finding
    through the rule's own templates; {} when none matches."""
    from jaxmem.evaluators.review import registry

    rule = registry.by_code().get(finding.code)
    if rule is None:
        return {}
    templates = [getattr(type(rule), a) for a in dir(type(rule)) if a.endswith("message")]
    for tpl in templates:
        if isinstance(tpl, str):
            m = _pattern(tpl).fullmatch(finding.message)
            if m:
                return {k: v for k, v in m.groupdict().items() if v is not None}
    return {}


def message_is(finding: Finding, attr: str) -> bool:
    """The finding was reported with the rule's template `attr` (e.g. `compile_message`)."""
    from jaxmem.evaluators.review import registry

    rule = registry.by_code().get(finding.code)
    tpl = getattr(type(rule), attr, None) if rule is not None else None
    return isinstance(tpl, str) and _pattern(tpl).fullmatch(finding.message) is not None
