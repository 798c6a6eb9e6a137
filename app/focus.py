"""Which part of a card answers this question: the opening of an answer (pure functions).

A whole card is often more than 1,000 words; a chat user wants the part about their problem
first. The card is cut into units (a bullet, a paragraph); each unit is scored by what it shares
with the question (identifiers such as `donate_argnums` or `XLA_PYTHON_CLIENT_PREALLOCATE`
count most: they are the same in every language, and they are what solves the problem) and by
whether retrieval found its section the closest to the question. The card's summary, its short
answer, comes first; then the best units, in the card's order; then the card's first code block;
the whole card follows, folded.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

from jaxmem.core.fences import MARKDOWN_FENCE
from jaxmem.ingest.cards import Card

LEAD_CHARS = 650       # what the opening units may take (the answer's first 800 characters are what is read first)
MAX_UNITS = 3
WHAT_BONUS = 1.5  # real set, dev half: key fact in the opening 0.78 -> see README: Measured
LENGTH_EXPONENT = 0.5  # how strongly a unit's score is divided by its length
CODE_LINES = 18        # of the first code block shown in the opening; the rest is in the folded card
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+|[A-Za-z_]+_[A-Za-z0-9_]+|[A-Z][A-Z0-9_]{3,}")
_WORD = re.compile(r"[^\W\d_]{4,}", re.U)
_CJK = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]{2}")
_UNIT_SPLIT = re.compile(r"\n\s*\n|\n(?=\s*[-*] |\s*\d+\. )")
# Words too common in this corpus to say what a question is about.
_COMMON = {"jax", "memory", "array", "arrays", "when", "what", "that", "this", "with", "from", "does", "have",
           "device", "devices", "using", "into", "your", "about", "which", "there", "than", "then", "them"}


@dataclass(frozen=True)
class Unit:
    section: str   # summary, what, why, caveats, check
    order: int     # position in the card
    text: str


def units(card: Card) -> list[Unit]:
    out = [Unit("summary", 0, card.meta.summary.strip())]
    for sec in card.sections:
        if sec.key == "how":  # code and its commentary: the opening shows its code block instead
            continue
        prose = MARKDOWN_FENCE.sub("", sec.text)
        pending = ""
        for piece in _UNIT_SPLIT.split(prose):
            piece = piece.strip()
            if piece.endswith(":") and not piece.startswith(("-", "*")):
                pending = f"{pending}\n\n{piece}".strip()  # a lead-in says nothing alone: keep it with what follows
                continue
            if pending:
                piece, pending = f"{pending}\n\n{piece}", ""
            if len(piece) > 20:
                out.append(Unit(sec.key, len(out), piece))
    return out


def terms(text: str) -> tuple[set[str], set[str]]:
    """(identifiers, words) of a text, lower-cased; identifiers keep their dots and underscores."""
    idents = {m.lower().rstrip(".") for m in _IDENT.findall(text)}
    words = {w.lower() for w in _WORD.findall(text)} | set(_CJK.findall(text))
    return idents, words - _COMMON


@lru_cache(maxsize=8192)
def _unit_terms(text: str) -> tuple[set[str], set[str]]:
    # A card's units are a fixed set (~15 per card version): their terms are read by both the word
    # weights and the score on every answer, so they are worked out once per process.
    return terms(text)


def score(unit: Unit, q_idents: set[str], q_words: set[str], section_rank: dict[str, float],
          weight: dict[str, float] | None = None) -> float:
    """What `unit` shares with the question. `weight`: how much each word says within this card
    (see `word_weights`); words not in it count 1."""
    idents, words = _unit_terms(unit.text)
    # an identifier also matches its last part: `jax.live_arrays` in the card, `live_arrays` asked
    ident_hits = sum(1 for i in q_idents if i in idents or any(x.endswith("." + i) or i.endswith("." + x) for x in idents))
    weight = weight or {}
    shared = 3.0 * ident_hits + sum(weight.get(w, 1.0) for w in q_words & words)
    # A long unit shares more words with any question by its length alone; without this, a
    # 800-character caveat on misspelt allocator names outranked the two-line caveat that answers
    # "do these variables work on CPU?". Real set, dev half and its translations: key fact in the
    # opening 138 -> 140 of 154 with the word weights below, none lost (exponent 0.3-0.7 alike).
    shared /= (max(len(unit.text), 100) / 300) ** LENGTH_EXPONENT
    # Where retrieval found the card closest ranks units that speak to the question; alone it is no
    # reason to open with a unit. Without this, "Why does JAX take 75% of my GPU memory?" opened with
    # three caveats (their section held the closest chunk) instead of the card's advice. On the real
    # set the key fact in the opening is unchanged (dev 39/46, held-out 45/54 with the right card).
    return shared + section_rank.get(unit.section, 0.0) if shared > 0 else 0.0


def word_weights(found: list[Unit]) -> dict[str, float]:
    """Inverse document frequency of each word over a card's units, scaled to (0, 1]: in the
    allocator card "allocator" is in every unit and says nothing about which one answers; a word
    in one unit ("divisible", "numpy") says the most."""
    df: dict[str, int] = {}
    for u in found:
        for w in _unit_terms(u.text)[1]:
            df[w] = df.get(w, 0) + 1
    n = len(found)
    return {w: math.log(1 + n / c) / math.log(1 + n) for w, c in df.items()} if n > 1 else {}


def opening(card: Card, question: str, section_rank: dict[str, float]) -> tuple[list[Unit], str | None]:
    """The card's summary, the units that answer `question` best (in the card's order) and the
    code block to show.

    `section_rank`: a bonus per section, from where retrieval found the card closest to the
    question (e.g. {"caveats": 1.0}); sections not in it get none."""
    q_idents, q_words = terms(question)
    # A card's "What to do" holds its fixes: it leads unless another part speaks to the question more.
    section_rank = {**section_rank, "what": section_rank.get("what", 0.0) + WHAT_BONUS}
    found = units(card)
    summary = found[0]
    # The summary is the card's short answer and names its main fix: it always opens. Chosen only
    # when it scored best before, it missed key facts it holds (real set, key fact in the first
    # 800 characters, all parts: 0.743 -> 0.785; held-out half 0.731 -> 0.761).
    found = found[1:]
    weight = word_weights(found)
    scored = {u.order: score(u, q_idents, q_words, section_rank, weight) for u in found}
    ranked = sorted(found, key=lambda u: (-scored[u.order], u.order))
    chosen, used = [], 0
    for u in ranked:
        if len(chosen) >= MAX_UNITS or (chosen and used + len(u.text) > LEAD_CHARS):
            continue
        if scored[u.order] <= 0 and chosen:
            break
        chosen.append(u)
        used += len(u.text)
    if not chosen or scored[chosen[0].order] <= 0:
        # nothing in the card speaks to the question more than the rest: its first advice
        chosen = [u for u in found if u.section == "what"][:1]
        used = sum(len(u.text) for u in chosen)
    first_fix = next((u for u in found if u.section == "what"), None)
    if first_fix is not None and first_fix not in chosen and used + len(first_fix.text) <= LEAD_CHARS + 250:
        chosen.append(first_fix)  # the card's first fix, when the best parts were about something else
    chosen = [summary, *sorted(chosen, key=lambda u: u.order)]
    how = next((s for s in card.sections if s.key == "how"), None)
    block = MARKDOWN_FENCE.search(how.text) if how else None
    return chosen, _shorten(block.group(0)) if block else None


def _shorten(block: str) -> str:
    lines = block.split("\n")
    if len(lines) <= CODE_LINES + 2:
        return block
    return "\n".join(lines[: CODE_LINES + 1] + ["# ... (the whole example is in the card below)", "```"])
