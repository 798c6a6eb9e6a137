"""Corpus cards: the schema, the loader, and the checks behind `jaxmem corpus check`.

A card is Markdown with YAML front matter (format: corpus/README.md). Loading is strict so that a
bad card fails at `corpus check` / ingest with file, field and problem, never as garbage in an answer.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from jaxmem.core.fences import MARKDOWN_FENCE
from jaxmem.core.layout import CorpusLayout
from jaxmem.ingest.schema import QUESTION_CHARS, SchemaError, load_audit, load_manifest, load_scope, safe_load

MIN_QUESTIONS = 5  # per card: fewer leaves a language version hard to find from a user's wording
LINK_RE = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
H2_RE = re.compile(r"^## +(.+?)[ \t]*$", re.M)


# One error type for every corpus file: file, field and what is wrong.
CorpusError = SchemaError


class VersionNote(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: str = Field(pattern=r"^\d+\.\d+(\.\d+)?$")
    note: str = Field(min_length=3)


class FrontMatter(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    lang: str
    title: str = Field(min_length=3, max_length=160)
    summary: str = Field(min_length=10, max_length=600)
    # How users ask for this card: symptoms, goals, pasted error text. Indexed one per chunk, because
    # a question is closer to another question than to the card's prose (see retrieval eval).
    # In the file a question is a string, or a mapping {q: "...", source: "https://..."} naming the
    # public thread it was condensed from; loading splits the two, so `questions` stays plain text.
    questions: list[str] = Field(default_factory=list)
    # The thread of each question (None: written for the card), in the order of `questions`; derived
    # from the question mappings, never written in the file. The overlap check compares these with
    # the evaluation sets' thread URLs (tests/ingest/test_question_sources.py).
    question_sources: list[str | None] = Field(default_factory=list)
    applies_to: list[Literal["cpu", "gpu", "tpu"]] = Field(min_length=1)
    jax_versions: list[VersionNote] = Field(default_factory=list)
    sources: list[str] = Field(min_length=1)
    related: list[str] = Field(default_factory=list)
    snippets: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _split_question_sources(cls, data):
        if not isinstance(data, dict):
            return data
        if "question_sources" in data:
            raise ValueError("question_sources is derived: write a question as {q: \"...\", source: \"https://...\"}")
        raw = data.get("questions")
        if not isinstance(raw, list):
            return data
        questions, sources = [], []
        for item in raw:
            if isinstance(item, dict) and "q" in item and not set(item) - {"q", "source"}:
                questions.append(item["q"])
                sources.append(item.get("source"))
            else:  # a string, or a malformed mapping that _question_items reports under `questions`
                questions.append(item)
                sources.append(None)
        return {**data, "questions": questions, "question_sources": sources}

    @field_validator("questions", mode="before")
    @classmethod
    def _question_items(cls, v):
        for item in v if isinstance(v, list) else []:
            if isinstance(item, dict):
                raise ValueError(f"a question is a string or a mapping {{q, source}} (nothing else): {item!r}")
        return v

    @field_validator("question_sources")
    @classmethod
    def _thread_urls(cls, v: list[str | None]) -> list[str | None]:
        for url in v:
            if url is not None and not re.match(r"^https://\S+$", url):
                raise ValueError(f"a question's source is the https URL of its thread: {url!r}")
        return v

    @field_validator("questions")
    @classmethod
    def _questions(cls, v: list[str]) -> list[str]:
        for q in v:
            if not isinstance(q, str) or not QUESTION_CHARS[0] <= len(q.strip()) <= QUESTION_CHARS[1] or "\n" in q.strip():
                raise ValueError(f"each question is one line of {QUESTION_CHARS[0]}-{QUESTION_CHARS[1]} characters: {q!r}")
        if len({q.strip().casefold() for q in v}) != len(v):
            raise ValueError("questions repeat")
        return [q.strip() for q in v]

    @field_validator("sources")
    @classmethod
    def _urls(cls, v: list[str]) -> list[str]:
        for url in v:
            if not re.match(r"^https://\S+$", url):
                raise ValueError(f"not an https URL: {url!r}")
        return v


@dataclass(frozen=True)
class Section:
    key: str  # what / why / how / caveats / check
    heading: str
    text: str


@dataclass
class Card:
    path: Path
    meta: FrontMatter
    body: str
    sections: list[Section] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.meta.id

    @property
    def lang(self) -> str:
        return self.meta.lang

    @cached_property
    def code_blocks(self) -> list[str]:
        return MARKDOWN_FENCE.findall(self.body)


def split_front_matter(text: str, path: Path) -> tuple[dict, str]:
    if not text.startswith("---\n"):
        raise CorpusError(path, "front matter", "file must start with a '---' line")
    end = text.find("\n---\n", 4)
    if end < 0:
        raise CorpusError(path, "front matter", "no closing '---' line")
    try:
        data = safe_load(text[4:end])
    except yaml.YAMLError as exc:
        raise CorpusError(path, "front matter", f"invalid YAML: {exc}".splitlines()[0]) from None
    if not isinstance(data, dict):
        raise CorpusError(path, "front matter", "must be a YAML mapping")
    return data, text[end + 5 :]


def parse_sections(body: str, headings: list[str], keys: list[str], path: Path) -> list[Section]:
    # Headings inside code fences are code, not structure.
    masked = MARKDOWN_FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), body)
    found = [(m.group(1).strip(), m.start(), m.end()) for m in H2_RE.finditer(masked)]
    names = [f[0] for f in found]
    if names != headings:
        raise CorpusError(path, "body", f"sections must be {headings} in this order, found {names}")
    sections = []
    for i, (name, _start, end) in enumerate(found):
        stop = found[i + 1][1] if i + 1 < len(found) else len(body)
        text = body[end:stop].strip()
        if not text:
            raise CorpusError(path, "body", f"section {name!r} is empty")
        sections.append(Section(keys[i], name, text))
    return sections


def load_card(path: Path, layout: CorpusLayout) -> Card:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CorpusError(path, "file", "not UTF-8") from None
    data, body = split_front_matter(text, path)
    try:
        meta = FrontMatter.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "front matter"
        raise CorpusError(path, where, err["msg"]) from None
    if meta.lang not in layout.languages:
        raise CorpusError(path, "lang", f"unknown language {meta.lang!r}; valid: {', '.join(layout.languages)}")
    if meta.id not in layout.topics:
        raise CorpusError(path, "id", f"unknown topic id {meta.id!r}; see corpus/topics.yaml")
    if path.parent.name != meta.id or path.stem != meta.lang:
        raise CorpusError(path, "id/lang", f"file must be cards/{meta.id}/{meta.lang}.md")
    sections = parse_sections(body, layout.headings(meta.lang), layout.section_keys, path)
    return Card(path=path, meta=meta, body=body, sections=sections)


def load_cards(root: Path) -> list[Card]:
    """All cards, strictly validated one by one (first error raises)."""
    layout = CorpusLayout(root)
    return [load_card(p, layout) for p in sorted((root / "cards").glob("*/*.md"))]


# ---- corpus check: every problem, not just the first -------------------------------------------

def check_corpus(root: Path) -> list[CorpusError]:
    layout = CorpusLayout(root)
    problems: list[CorpusError] = []
    cards: dict[tuple[str, str], Card] = {}
    for path in sorted((root / "cards").glob("*/*.md")):
        try:
            card = load_card(path, layout)
        except CorpusError as exc:
            problems.append(exc)
            continue
        cards[(card.id, card.lang)] = card

    snippet_ids = {p.name for p in (root / "snippets").glob("*") if p.is_dir()}
    for topic in layout.topics:
        for lang in layout.languages:
            if not layout.card_path(topic, lang).exists():
                problems.append(CorpusError(layout.card_path(topic, lang), "file", f"missing {lang} version of {topic}"))
    for folder in sorted((root / "cards").glob("*")):
        if folder.is_dir() and folder.name not in layout.topics:
            problems.append(CorpusError(folder, "id", f"unknown topic folder {folder.name!r}; see corpus/topics.yaml"))

    for (topic, lang), card in cards.items():
        if len(card.meta.questions) < MIN_QUESTIONS:
            problems.append(CorpusError(card.path, "questions",
                                        f"{len(card.meta.questions)} question(s); at least {MIN_QUESTIONS} needed"))
        for rel in card.meta.related:
            if rel not in layout.topics:
                problems.append(CorpusError(card.path, "related", f"unknown topic id {rel!r}"))
            elif rel == topic:
                problems.append(CorpusError(card.path, "related", "a card cannot be related to itself"))
        for sid in card.meta.snippets:
            if sid not in snippet_ids:
                problems.append(CorpusError(card.path, "snippets", f"no snippet pair corpus/snippets/{sid}/"))
        for target in LINK_RE.findall(MARKDOWN_FENCE.sub("", card.body)):
            if re.match(r"^[a-z]+://", target) or target.startswith("#"):
                continue
            resolved = (card.path.parent / target.split("#")[0]).resolve()
            if not resolved.exists():
                problems.append(CorpusError(card.path, "body", f"dead internal link {target!r}"))
        english = cards.get((topic, "en"))
        if english and lang != "en":
            if card.code_blocks != english.code_blocks:
                problems.append(CorpusError(card.path, "body", "code blocks differ from the English version"))
            if card.meta.sources != english.meta.sources:
                problems.append(CorpusError(card.path, "sources", "sources differ from the English version"))
            if card.meta.snippets != english.meta.snippets:
                problems.append(CorpusError(card.path, "snippets", "snippets differ from the English version"))
            # Each language carries the English card's thread questions, translated: the same threads.
            if thread_sources(card) != thread_sources(english):
                problems.append(CorpusError(card.path, "questions", "question sources differ from the English version"))

    problems.extend(check_snippets(root / "snippets", layout))
    problems.extend(check_seeds(root / "seeds", layout))
    problems.extend(check_scope(root / "scope" / "out_of_scope.yaml", layout))
    return problems


def thread_sources(card: Card) -> list[str]:
    """The threads a card's questions were condensed from, sorted (questions written for the card have none)."""
    return sorted(s for s in card.meta.question_sources if s)


def check_scope(path: Path, layout: CorpusLayout) -> list[CorpusError]:
    """Out-of-scope entries (optional file), through the one schema (`ingest.schema.ScopeEntry`)."""
    if not path.exists():
        return []
    problems: list[CorpusError] = []
    try:
        load_scope(path, list(layout.languages), set(layout.topics), problems)
    except CorpusError as exc:
        problems.append(exc)
    return problems


def check_snippets(folder: Path, layout: CorpusLayout) -> list[CorpusError]:
    """Every pair: both sides parse, the manifest follows the schema the verifier reads."""
    problems = []
    for pair in sorted(p for p in folder.glob("*") if p.is_dir() and not p.name.startswith((".", "_"))):
        for name in ("before.py", "after.py"):
            f = pair / name
            if not f.exists():
                continue  # load_manifest names it
            try:
                ast.parse(f.read_text(encoding="utf-8"), filename=str(f))
            except SyntaxError as exc:
                problems.append(CorpusError(f, f"line {exc.lineno}", f"does not parse: {exc.msg}"))
        try:
            load_manifest(pair, set(layout.topics))
        except CorpusError as exc:
            problems.append(exc)
    return problems


def seed_id(path: Path) -> str:
    """Seeds are named `<number>_<hash>.txt`; the audit refers to them by number."""
    return path.stem.split("_")[0]


def check_seeds(folder: Path, layout: CorpusLayout) -> list[CorpusError]:
    audit_path = folder / "audit.yaml"
    if not audit_path.exists():
        return [CorpusError(audit_path, "file", "missing claim audit")]
    problems: list[CorpusError] = []
    try:
        load_audit(audit_path, {seed_id(p) for p in folder.glob("*.txt")}, set(layout.topics), problems)
    except CorpusError as exc:
        problems.append(exc)
    return problems
