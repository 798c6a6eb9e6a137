"""Which part of a card answers this question: the opening of an answer (pure functions).

A whole card is often more than 1,000 words; a chat user wants the fix for their case first. The
card is cut into units (a bullet, a paragraph) and each unit is scored by what it shares with the
question: the cosine of their words and the words' character 4-grams (the classifier's word view,
app/intent.py), each weighted by how rare it is among the card's units. A word every unit has
("allocator" in the allocator card) says nothing about which unit answers; an identifier such as
`donate_argnums` or `XLA_PYTHON_CLIENT_PREALLOCATE` is in one or two units and says the most, in
every language. The card's stored questions that retrieval found nearest to the question count as
part of it: they say, in the card's own language and words, what the user asked.

The opening is the card's summary (its short answer, which names the card's main fix), then the
best unit that names an identifier (the variable, API or flag that resolves the asked case), then
the next best units in the card's order, then the first lines of the card's first code block. The
card is cut so that every part of it lands in exactly one of the opening and the rest (`rest`):
nothing is repeated. Putting the matched unit before the summary named the key fact of real
questions less often (docs/measurements.md, 2026-12-04).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache

from jaxmem.app.intent import features
from jaxmem.core.fences import MARKDOWN_FENCE
from jaxmem.ingest.cards import Card

LEAD_CHARS = 650       # what the opening units may take (the answer's first 800 characters are what is read first)
MAX_UNITS = 3
CODE_LINES = 18        # of the first code block shown in the opening; the rest of it follows in the folded part
# A variable, a dotted API name, an identifier with an underscore, or a code span: what a fix names.
_IDENT = re.compile(r"`[^`\n]+`|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+|[A-Za-z]+_[A-Za-z0-9_]+|[A-Z][A-Z0-9_]{3,}")
_UNIT_SPLIT = re.compile(r"(\n\s*\n|\n(?=\s*[-*] |\s*\d+\. ))")
_LIST_MARK = re.compile(r"^\s*(?:[-*]|\d+\.)\s+")


@dataclass(frozen=True)
class Unit:
    section: str   # summary, what, why, caveats, check
    order: int     # position in the card
    text: str


@dataclass
class Cut:
    """A card cut into units, and each section's text as consecutive pieces (the order of the unit a
    piece belongs to, or None: code blocks, lead-ins of code, short lines), which join back into the
    section's text exactly."""
    units: list[Unit]
    pieces: dict[str, list[tuple[int | None, str]]] = field(default_factory=dict)


def _section_pieces(key: str, text: str, units: list[Unit]) -> list[tuple[int | None, str]]:
    pieces: list[tuple[int | None, str]] = []
    pos = 0
    for m in [*MARKDOWN_FENCE.finditer(text), None]:
        prose = text[pos:m.start() if m else len(text)]
        pending: list[int] = []  # pieces of a lead-in ("Set it like this:") waiting for what it leads into
        for part in _UNIT_SPLIT.split(prose):
            if _UNIT_SPLIT.fullmatch(part) or not part.strip():
                pieces.append((None, part))
                continue
            stripped = part.strip()
            if stripped.endswith(":") and not stripped.startswith(("-", "*")):
                pending.append(len(pieces))
                pieces.append((None, part))
                continue
            if len(stripped) <= 20:
                pieces.append((None, part))
                continue
            order = len(units)
            lead_in = [pieces[i][1].strip() for i in pending]
            for i in pending:
                pieces[i] = (order, pieces[i][1])
            pending = []
            units.append(Unit(key, order, "\n\n".join([*lead_in, stripped])))
            pieces.append((order, part))
        if m is not None:  # a code block, with the lead-in that introduces it, stays whole in the rest
            for i in pending:
                pieces[i] = (None, pieces[i][1])
            pieces.append((None, m.group(0)))
            pos = m.end()
    return pieces


@lru_cache(maxsize=1024)
def _cut(summary: str, sections: tuple[tuple[str, str], ...]) -> Cut:
    units = [Unit("summary", 0, summary.strip())]
    cut = Cut(units)
    for key, text in sections:
        if key == "how":  # code and its commentary: the opening shows its code block instead
            cut.pieces[key] = [(None, text)]
        else:
            cut.pieces[key] = _section_pieces(key, text, units)
    return cut


def cut(card: Card) -> Cut:
    return _cut(card.meta.summary, tuple((s.key, s.text) for s in card.sections))


def units(card: Card) -> list[Unit]:
    return cut(card).units


@lru_cache(maxsize=8192)
def _features(text: str) -> dict[str, int]:
    # A card's units are a fixed set (~15 per card version): worked out once per process.
    return features(text)


def names_a_fix(text: str) -> bool:
    return _IDENT.search(text) is not None


def scores(found: list[Unit], question: str, asked: tuple[str, ...] = ()) -> dict[int, float]:
    """Each unit's cosine with the question (and the stored questions nearest to it), over features
    weighted by their inverse document frequency among `found`."""
    n = len(found)
    df: dict[str, int] = {}
    for u in found:
        for f in _features(u.text):
            df[f] = df.get(f, 0) + 1
    idf = {f: math.log(1 + n / c) for f, c in df.items()}
    q: dict[str, float] = {}
    for text in (question, *asked):
        for f, c in _features(text).items():
            if f in idf:
                q[f] = q.get(f, 0.0) + c * idf[f]
    q_norm = math.sqrt(sum(v * v for v in q.values()))
    out = {}
    for u in found:
        vec = {f: c * idf[f] for f, c in _features(u.text).items()}
        norm = math.sqrt(sum(v * v for v in vec.values()))
        dot = sum(v * vec[f] for f, v in q.items() if f in vec)
        out[u.order] = dot / (norm * q_norm) if norm and q_norm else 0.0
    return out


@dataclass(frozen=True)
class Opening:
    lead: Unit | None        # the unit that names the fix for this question (None: none does)
    units: list[Unit]        # the summary, then the other chosen units in the card's order
    code: str | None         # the first code block, or its first lines
    code_rest: str | None    # the lines of that block the opening leaves out (for the rest)

    @property
    def shown(self) -> set[int]:
        return {u.order for u in self.units} | ({self.lead.order} if self.lead else set())


def opening(card: Card, question: str, asked: tuple[str, ...] = ()) -> Opening:
    """What opens the answer to `question` from `card`. `asked`: the card's stored questions that
    retrieval found nearest to it."""
    found = cut(card).units
    summary, found = found[0], found[1:]
    scored = scores(found, question, asked)
    ranked = sorted(found, key=lambda u: (-scored[u.order], u.order))
    lead = next((u for u in ranked if scored[u.order] > 0 and names_a_fix(u.text)), None)
    chosen, used = ([lead], len(lead.text)) if lead else ([], 0)
    for u in ranked:
        if len(chosen) >= MAX_UNITS or scored[u.order] <= 0:
            break
        if u is lead or used + len(u.text) > LEAD_CHARS:
            continue
        chosen.append(u)
        used += len(u.text)
    if not chosen:
        # nothing in the card speaks to the question more than the rest: its first advice
        chosen = [u for u in found if u.section == "what"][:1]
    others = sorted((u for u in chosen if u is not lead), key=lambda u: u.order)
    how = next((s for s in card.sections if s.key == "how"), None)
    block = MARKDOWN_FENCE.search(how.text) if how else None
    code, code_rest = _split_code(block.group(0)) if block else (None, None)
    return Opening(lead, [summary, *others], code, code_rest)


def _split_code(block: str) -> tuple[str, str | None]:
    """(what the opening shows, the rest of the block as a block of its own, or None)."""
    lines = block.split("\n")
    if len(lines) <= CODE_LINES + 2:
        return block, None
    fence = lines[0]
    return ("\n".join(lines[: CODE_LINES + 1] + ["# ... (continued in the rest of the card)", "```"]),
            "\n".join([fence, "# ... (continued)", *lines[CODE_LINES + 1:]]))


def plain(unit_text: str) -> str:
    """A unit as the opening's first paragraph: without its list marker."""
    return _LIST_MARK.sub("", unit_text, count=1)


def rest(card: Card, shown: set[int], code: str | None, code_rest: str | None) -> list[tuple[str, str]]:
    """(section heading, text) of every section, without the units and the code the opening shows."""
    out = []
    pieces = cut(card).pieces
    for sec in card.sections:
        if sec.key == "how":
            block = MARKDOWN_FENCE.search(sec.text)
            text = sec.text
            if block is not None and code is not None:
                text = text[:block.start()] + (code_rest or "") + text[block.end():]
        else:
            text = "".join(t for order, t in pieces[sec.key] if order is None or order not in shown)
        text = re.sub(r"\n[ \t]*\n(?:[ \t]*\n)+", "\n\n", text).strip()
        if text:
            out.append((sec.heading, text))
    return out
