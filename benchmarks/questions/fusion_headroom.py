"""How much a learned fusion of the retrieval signals could gain, on the sets that may guide changes.

    JAXMEM_DATA_DIR=/tmp/jm python benchmarks/questions/fusion_headroom.py   # after `jaxmem ingest`

Retrieval fuses four rankings of cards by reciprocal rank with hand-set weights (app/retrieval.py):
card text (dense), the cards' stored questions (dense), BM25 over card text, and the question
classifier (app/intent.py). Before replacing those weights with a learned ranker, this measures
what one could gain: per question it records each signal's scores for the candidate cards, fits a
conditional-logit ranker (9 features per card: each signal's score and reciprocal rank, relative to
the question's best) on the dev questions of the new real set and of the older real set, and
prints recall@1 in two-fold cross-validation next to the current ranking. The sealed part is never
read. Dev-set tool only: it prints aggregates for every set, and misses for none.
"""
from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[2]
SETS = {"new real dev": "benchmarks/questions/sealed-2026-12/dev.yaml", "older real": "benchmarks/questions/real.yaml",
        "main": "benchmarks/questions/questions.yaml", "heldout": "benchmarks/questions/heldout.yaml",
        "fresh": "benchmarks/questions/fresh.yaml"}


def signals() -> dict[str, list[dict]]:
    from jaxmem.app.advisor import Advisor
    from jaxmem.app.evaluation import Remembered, load_questions
    from jaxmem.app.language import detect
    from jaxmem.core.settings import Settings
    from jaxmem.ingest.embed import make_embeddings

    settings = Settings()
    r = Advisor(settings, embeddings=Remembered(make_embeddings(settings.embeddings))).retriever
    out = {}
    for name, path in SETS.items():
        rows = []
        for item in load_questions(ROOT / path):
            if not item["topics"]:
                continue
            lang, _ = detect(item["q"])
            vector = r.embeddings.embed_query(item["q"])
            found = r.dense(vector, 40)
            lexical = r.lexical.search(item["q"], 40) if lang in r.card_languages else []
            scores = r.intent.read(vector, item["q"]).scores
            rows.append({**item,
                         "prose": [(h.metadata["card"], h.score) for h in found["text"]],
                         "asked": [(h.metadata["card"], h.score) for h in found["questions"]
                                   if h.metadata.get("kind") != "scope"],
                         "lex": [(h.metadata["card"], h.score) for h in lexical if h.metadata.get("kind") != "scope"],
                         "intent": {c: float(s) for c, s in zip(r.intent.classes, scores) if not c.startswith("scope:")},
                         "current": [c.card for c in r.search(item["q"], lang, k=10).cards]})
        out[name] = rows
    return out


def features(x: dict) -> tuple[list[str], np.ndarray]:
    ranked = sorted(x["intent"], key=lambda c: -x["intent"][c])
    cards = list(dict.fromkeys(ranked[:10] + [c for lst in ("prose", "asked", "lex") for c, _ in x[lst][:10]]))
    rank_of = {c: i for i, c in enumerate(ranked)}

    def best(lst):
        score, rank = {}, {}
        for i, (c, s) in enumerate(lst):
            if c not in score:
                score[c], rank[c] = s, i
        return score, rank, (lst[0][1] if lst else 0.0)

    (ps, pr, pmax), (qs, qr, qmax), (ls, lr, lmax) = best(x["prose"]), best(x["asked"]), best(x["lex"])
    top3 = {}
    for c, s in x["prose"]:
        top3.setdefault(c, []).append(s)
    lexical = 1.0 if x["lex"] else 0.0
    rows = [[x["intent"][c] - x["intent"][ranked[0]], 1 / (1 + rank_of[c]),
             10 * (ps.get(c, pmax - 0.1) - pmax), 1 / (1 + pr.get(c, 60)),
             10 * (np.mean(sorted(top3.get(c, [pmax - 0.1]))[-3:]) - pmax),
             10 * (qs.get(c, qmax - 0.1) - qmax), 1 / (1 + qr.get(c, 60)),
             lexical * ls.get(c, 0.0) / (lmax or 1.0), lexical / (1 + lr.get(c, 60))] for c in cards]
    return cards, np.array(rows)


def fit(rows: list[dict], l2: float = 1e-2, steps: int = 400, lr: float = 0.5) -> np.ndarray:
    data = []
    for x in rows:
        cards, f = features(x)
        y = np.array([c in x["topics"] for c in cards], float)
        if y.sum():
            data.append((f, y / y.sum()))
    w = np.zeros(data[0][0].shape[1])
    for _ in range(steps):  # softmax over a question's candidate cards, gradient descent
        g = l2 * w
        for f, y in data:
            s = f @ w
            p = np.exp(s - s.max())
            g += f.T @ (p / p.sum() - y) / len(data)
        w -= lr * g
    return w


def first(x: dict, w: np.ndarray) -> str:
    cards, f = features(x)
    return cards[int(np.argmax(f @ w))]


def main() -> None:
    data = signals()
    dev = [x for x in data["new real dev"] if not x["translated"]] + \
          [x for x in data["older real"] if x["split"] == "dev" and not x["translated"]]
    random.seed(0)
    order = list(range(len(dev)))
    random.shuffle(order)
    a, b = [dev[i] for i in order[::2]], [dev[i] for i in order[1::2]]
    wa, wb = fit(a), fit(b)
    learned = np.mean([first(x, wb) in x["topics"] for x in a] + [first(x, wa) in x["topics"] for x in b])
    current = np.mean([x["current"][0] in x["topics"] for x in dev])
    print(f"dev questions (new real dev + older real dev, originals): {len(dev)}")
    print(f"recall@1, current fusion: {current:.3f}; learned fusion, two-fold cross-validated: {learned:.3f}")
    w = fit(dev)
    for name, rows in data.items():
        r1 = np.mean([first(x, w) in x["topics"] for x in rows])
        now = np.mean([x["current"][0] in x["topics"] for x in rows])
        print(f"  {name:14s} {len(rows):4d} questions: current {now:.3f}, learned on all dev {r1:.3f}")


if __name__ == "__main__":
    main()
