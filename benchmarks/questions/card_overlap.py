#!/usr/bin/env python3
"""Do any card question and any evaluation question come from the same public thread?

Card questions may name the thread they were condensed from (`{q: ..., source: URL}` in a card's
front matter, corpus/README.md). An evaluation question comes from a thread too (its `url`). A card
question that shares a thread with an evaluation question leaks the answer into the corpus, so
there must be none. Two checks:

1. thread: a card question's source equals the `url` of an item in any file under
   benchmarks/questions/ (normalised: no anchor or query, no trailing slash, google/jax ==
   jax-ml/jax, owner/repo case-insensitive, /issues/N == /pull/N since GitHub numbers both alike);
2. wording: a card question shares a run of 10 consecutive prose words (code spans and code-like
   tokens removed, as sealed-2026-12/check_overlap.py does, but any script's letters) with an
   evaluation question, in any language.

Sealed sets (files named `sealed*`) are read for their `url` fields only: their questions are never
compared or printed here (sealed-2026-12/check_overlap.py compares their wording with the whole
repository). Output names card ids, languages, question numbers and the evaluation file, never an
evaluation question. Run: .venv/bin/python benchmarks/questions/card_overlap.py (exit 1 on overlap).
"""
from __future__ import annotations

import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
N_WORDS = 10
CODE_TOKEN = re.compile(r"[_(){}\[\]=<>/\\]|\.\w")
FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n", re.S)


def thread_key(url: str) -> str:
    """One key per thread, whatever form the URL was written in."""
    u = re.split(r"[#?]", url.strip(), maxsplit=1)[0].rstrip("/")
    u = re.sub(r"^https?://(www\.)?", "https://", u, flags=re.I)
    m = re.match(r"^https://github\.com/([^/]+)/([^/]+)/(?:issues|pull|discussions)/(\d+)", u, re.I)
    if m:
        repo = f"{m.group(1)}/{m.group(2)}".lower()
        repo = "jax-ml/jax" if repo == "google/jax" else repo
        kind = "discussions" if "/discussions/" in u.lower() else "issues"
        return f"https://github.com/{repo}/{kind}/{m.group(3)}"
    return u.lower()


def words(text: str) -> list[str]:
    text = re.sub(r"`[^`]*`", " ", text)
    out = []
    for tok in text.casefold().split():
        tok = tok.strip(".,;:!?\"'()[]«»“”„‚‘’")
        if not tok or CODE_TOKEN.search(tok):
            continue
        out.extend(re.findall(r"[^\W_]+(?:'[^\W_]+)*", tok))
    return out


def runs(text: str) -> set[str]:
    ws = words(text)
    return {" ".join(ws[i:i + N_WORDS]) for i in range(len(ws) - N_WORDS + 1)}


@dataclass(frozen=True)
class CardQuestion:
    card: str
    lang: str
    number: int          # position in the card's questions (0-based)
    text: str
    source: str | None


@dataclass(frozen=True)
class Overlap:
    kind: str            # "thread" or "wording"
    card: str
    lang: str
    number: int
    eval_file: str       # relative to benchmarks/questions/
    eval_id: str | None  # None for a sealed set


def card_questions(corpus: Path) -> list[CardQuestion]:
    """Every card question with its source, read straight from the front matter (no jaxmem import)."""
    out = []
    for path in sorted((corpus / "cards").glob("*/*.md")):
        m = FRONT_MATTER.match(path.read_text(encoding="utf-8"))
        meta = yaml.safe_load(m.group(1)) if m else None
        for i, item in enumerate((meta or {}).get("questions") or []):
            text, source = (item.get("q", ""), item.get("source")) if isinstance(item, dict) else (str(item), None)
            out.append(CardQuestion(path.parent.name, path.stem, i, text, source))
    return out


def evaluation_items(folder: Path):
    """(file, id, url, question or None) for every item of every question file; a sealed file
    yields its urls only."""
    for path in sorted(folder.rglob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            continue
        rel = str(path.relative_to(folder))
        sealed = path.name.startswith("sealed")
        for item in data:
            if not isinstance(item, dict):
                continue
            if sealed:
                yield rel, None, item.get("url"), None
            else:
                yield rel, item.get("id"), item.get("url"), item.get("q")
        del data


def find_overlaps(root: Path = ROOT) -> tuple[list[Overlap], dict]:
    questions = card_questions(root / "corpus")
    threads: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
    wording: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
    n_items = 0
    for rel, iid, url, q in evaluation_items(root / "benchmarks" / "questions"):
        n_items += 1
        if url:
            threads[thread_key(url)].append((rel, iid))
        if q:
            for r in runs(q):
                wording[r].append((rel, iid))
    found: set[Overlap] = set()
    for cq in questions:
        if cq.source:
            for rel, iid in threads.get(thread_key(cq.source), ()):
                found.add(Overlap("thread", cq.card, cq.lang, cq.number, rel, iid))
        for r in runs(cq.text):
            for rel, iid in wording.get(r, ()):
                found.add(Overlap("wording", cq.card, cq.lang, cq.number, rel, iid))
    stats = {"card questions": len(questions), "with a source": sum(1 for q in questions if q.source),
             "evaluation items": n_items, "evaluation threads": len(threads)}
    return sorted(found, key=lambda o: (o.kind, o.card, o.lang, o.number, o.eval_file)), stats


def main() -> int:
    overlaps, stats = find_overlaps()
    print("; ".join(f"{k}: {v}" for k, v in stats.items()))
    for o in overlaps:
        print(f"{o.kind.upper()}-OVERLAP {o.card}/{o.lang} question {o.number} ~ {o.eval_file}"
              + (f" {o.eval_id}" if o.eval_id else ""))
    for kind in ("thread", "wording"):
        hits = [o for o in overlaps if o.kind == kind]
        print(f"{kind} overlaps: {len(hits)} (cards: {', '.join(sorted({o.card for o in hits})) or 'none'})")
    return 1 if overlaps else 0


if __name__ == "__main__":
    sys.exit(main())
