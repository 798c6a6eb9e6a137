"""The advisor's result types: what every front end renders and `jaxmem ask --json` prints."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


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
    answer: str  # Markdown: `lead`, then the whole card (`more`)
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
    lead: str = ""  # the part that answers this question, and the card's code: what front ends show first
    outside: str | None = None  # when declined: the out-of-scope area the question belongs to, if known
    more: str = ""  # the rest (the whole card, evidence, sources): folded in the web app, a link in Slack

    def to_dict(self) -> dict:
        return asdict(self)
