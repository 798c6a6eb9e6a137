"""Which part of a card answers this question: the opening of an answer (pure functions).

A whole card is often more than 1,000 words; a chat user wants the fix for their case first. The
card is cut into units (a bullet, a paragraph) and each unit is scored by what it shares with the
question: the cosine of their words and the words' character 4-grams (the classifier's word view,
app/intent.py), each weighted by how rare it is among the card's units. A word every unit has
("allocator" in the allocator card) says nothing about which unit answers; an identifier such as
`donate_argnums` or `XLA_PYTHON_CLIENT_PREALLOCATE` is in one or two units and says the most, in
every language. The card's stored questions that retrieval found nearest to the question count as
part of it: they say, in the card's own language and words, what the user asked.

The opening is one line of names (`names`: the card's variables, APIs and flags that most likely fix
the asked case), the card's summary (its short answer, which names the card's main fix in words),
then the best unit that names an identifier (the variable, API or flag that resolves the asked
case), then the next best units in the card's order, then the first lines of the card's first code
block. The card is cut so that every part of it lands in exactly one of the opening and the rest
(`rest`): nothing is repeated (the line of names is an index of names the card uses, not a part of
it). Putting the matched unit before the summary named the key fact of real questions less often
(docs/measurements.md, 2026-12-04).

Why a line of names: a unit is 100-800 characters and the title and summary take about half of the
first 800, so one unit, often cut, is all a reader sees first; and a user's question describes a
symptom ("much more memory than PyTorch") while the part that fixes it names a setting, so the words
they share often point at a diagnostic part that quotes the same error text. A name is scored by
what its own words (`XLA_PYTHON_CLIENT_PREALLOCATE` -> xla python client preallocate, as character
4-grams) share with the question and with the card's title and summary, each weighted by rarity
among the card's units: a summary says in words which fix the card is about ("turn preallocation
off"); the name that spells it out is the one to show, in every language the question is asked in.
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
NAMES = 5              # in the opening's line of names
# What a name that fixes something looks like: a dotted API (`jax.device_put(x)`), a snake_case
# argument or flag (`donate_argnums`, `batch_size=4`), a command-line flag, a call, or an
# environment variable (`XLA_PYTHON_CLIENT_PREALLOCATE=false`). Not a path or a source file.
_SPAN = re.compile(r"`([^`\n]+)`")
_BARE = re.compile(r"(?<![\w.`])(?:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[A-Za-z]+_\w+|[A-Z][A-Z0-9_]{3,})(?![\w`])")
_FIX_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\(.*\))?|[A-Za-z]\w*_\w+(?:=\S+|\(.*\))?|-{1,2}[a-z][\w-]+(?:=\S+)?"
                       r"|\w+\(.*\)|[A-Z][A-Z0-9]*_[A-Z0-9_]+(?:=\S+)?")
_FILE = re.compile(r"\.(?:cc|cpp|h|py|md|txt|ya?ml|json)$")


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


@lru_cache(maxsize=8192)
def names_in(text: str) -> tuple[str, ...]:
    """The names a text uses that look like a fix (`_FIX_NAME`), in order: code spans without spaces
    first, then identifiers in its prose (link targets left out)."""
    spans = [m.group(1).strip() for m in _SPAN.finditer(text)]
    prose = re.sub(r"\]\([^)]*\)", "]", _SPAN.sub(" ", text))
    found = [s for s in spans if 2 < len(s) <= 48 and not re.search(r"\s", s)] + _BARE.findall(prose)
    return tuple(dict.fromkeys(n for n in found if "/" not in n and not _FILE.search(n) and _FIX_NAME.fullmatch(n)))


def _base(name: str) -> str:
    """`jax.lax.map(batch_size=4)` -> map: variants of one name (other values, other receivers) count once."""
    return re.split(r"[=(\[]", name, maxsplit=1)[0].rsplit(".", 1)[-1].strip("-").lower()


def _head(name: str) -> str:
    """`jax.lax.map(batch_size=4)` -> jax.lax.map: the name without a value or arguments."""
    return re.split(r"[=(\[]", name, maxsplit=1)[0].lower()


def _norm(v: dict[str, float]) -> float:
    return math.sqrt(sum(x * x for x in v.values()))


@dataclass(frozen=True)
class _NameIndex:
    """A card version's fix names with their word vectors, and what scores a question against them."""
    idf: dict[str, float]
    card: dict[str, float]                               # the title and summary, weighted
    names: tuple[tuple[str, dict[str, float], float], ...]  # (name, its words weighted, their norm)

    def vec(self, text: str) -> dict[str, float]:
        return {f: c * self.idf.get(f, 1.0) for f, c in _features(text).items()}


@lru_cache(maxsize=1024)
def _name_index(title: str, summary: str, units: tuple[str, ...]) -> _NameIndex:
    df: dict[str, int] = {}
    for text in units:
        for f in _features(text):
            df[f] = df.get(f, 0) + 1
    index = _NameIndex({f: math.log(1 + len(units) / c) for f, c in df.items()}, {}, ())
    shown = f"{title}\n{summary}".lower()
    found = dict.fromkeys(name for text in units for name in names_in(text)
                          if _base(name) and not re.search(rf"(?<![\w.]){re.escape(_head(name))}(?!\w)", shown))
    named = []
    for name in found:
        words = index.vec(re.sub(r"[^\w]+|_", " ", name))
        named.append((name, words, _norm(words)))
    return _NameIndex(index.idf, index.vec(f"{title}\n{summary}"), tuple(named))


def names(card: Card, question: str, asked: tuple[str, ...] = (), n: int = NAMES) -> list[str]:
    """The card's names (variables, APIs, flags) most likely to fix the asked case, best first: each
    scored by the cosine of its words with the question (and the stored questions nearest it) plus
    that with the card's title and summary, over character n-grams weighted by their rarity among the
    card's units; one variant per name; none the title or summary already shows (module doc)."""
    found = cut(card).units
    index = _name_index(card.meta.title, found[0].text, tuple(u.text for u in found[1:]))
    asked_v = index.vec("\n".join((question, *asked)))
    a_norm, c_norm = _norm(asked_v), _norm(index.card)
    score = {}
    for name, words, norm in index.names:
        if not norm:
            score[name] = 0.0
            continue
        dot_a = sum(v * asked_v[f] for f, v in words.items() if f in asked_v)
        dot_c = sum(v * index.card[f] for f, v in words.items() if f in index.card)
        score[name] = (dot_a / (norm * a_norm) if a_norm else 0.0) + (dot_c / (norm * c_norm) if c_norm else 0.0)
    out, bases = [], set()
    for name in sorted(score, key=lambda x: -score[x]):  # stable: ties keep the card's order
        if _base(name) in bases:
            continue
        out.append(name)
        bases.add(_base(name))
        if len(out) >= n:
            break
    return out


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
