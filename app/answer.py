"""The advisor's result types and the interface words of every language: what every front end
renders and `jaxmem ask --json` prints.

`jaxmem ask --json` contract, version 2 (the `version` field): `answer` is the opening (a line of the
card's names most likely to fix this case, the card's summary, the part of the card that names the
fix for this question, the parts that answer the question, the first lines of its code) and `more` everything else (the rest of the card, evidence,
community claims, related cards, sources); no text is in both. Version 1 had no `version` field, a
`lead` field with the opening, and an `answer` that repeated the opening before the whole card."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

_STRINGS = Path(__file__).with_name("strings.yaml")
VERSION = 2  # of the `ask --json` contract (module doc)


@lru_cache(maxsize=1)
def strings() -> dict:
    return yaml.safe_load(_STRINGS.read_text(encoding="utf-8"))


def label(lang: str, key: str, **kw) -> str:
    """An interface word in `lang` (English where the language has none)."""
    table = strings().get(lang) or strings()["en"]
    text = table.get(key, strings()["en"][key])
    return text.format(**kw) if kw and isinstance(text, str) else text


@dataclass
class Citation:
    card: str  # topic id
    title: str
    language: str  # language of the card version cited
    score: float
    sources: list[str]
    summary: str = ""
    url: str = ""
    evidence: dict | None = None  # latest verifier result for this card, if any


@dataclass
class SeedClaim:
    seed: str
    claim: str
    verdict: str
    card: str
    quote: str
    explanation: str


@dataclass
class Turn:
    role: str  # "user" or "assistant"
    content: str
    language: str | None = None
    cards: list[str] = field(default_factory=list)


@dataclass
class Answer:
    question: str
    language: str  # ISO 639-1 code detected for the question
    answer: str  # Markdown: what answers this question first (the opening); read it, then `more`
    citations: list[Citation]
    abstained: bool
    answer_language: str = "en"  # language the answer is written in
    fallback: bool = False  # True when no card version exists in the question's language
    closest: list[str] = field(default_factory=list)  # topic ids offered when abstaining
    findings: list[dict] = field(default_factory=list)  # code review findings, if code was pasted
    seed_claims: list[SeedClaim] = field(default_factory=list)
    composer: str = "offline"
    notes: list[str] = field(default_factory=list)  # e.g. "question truncated to 4000 characters"
    timings_ms: dict = field(default_factory=dict)
    outside: str | None = None  # when declined: the out-of-scope area the question belongs to, if known
    more: str = ""  # the rest of the card, evidence, sources (nothing of `answer`): folded in the web app, a link in Slack

    def to_dict(self) -> dict:
        return {"version": VERSION, **asdict(self)}
