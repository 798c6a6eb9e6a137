"""Hybrid retrieval: dense (Chroma) + lexical (BM25), fused by reciprocal rank, collapsed to cards.

Lexical matching helps only when the corpus has text in the question's language (measured: it hurt
cross-lingual questions), so it is fused only for card languages; `jaxmem eval` reports each mode.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ingest.store import Hit, Store

Mode = Literal["dense", "lexical", "hybrid"]
RRF_K = 60
LEXICAL_WEIGHT = 0.5  # dense is the stronger signal (eval: `jaxmem eval` compares the modes)
SECOND_CHUNK = 0.25  # a card's score: its best chunk plus this share of its second best
_TOKEN = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]|[^\W_]+|[A-Za-z_][A-Za-z0-9_]*", re.U)
_CJK = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]")


def tokenize(text: str) -> list[str]:
    """Words for Latin/Cyrillic scripts, characters + bigrams for CJK (no spaces between words there)."""
    toks = [t.lower() for t in _TOKEN.findall(text)]
    cjk = [t for t in toks if _CJK.fullmatch(t)]
    return toks + [a + b for a, b in zip(cjk, cjk[1:])]


@dataclass
class CardHit:
    card: str
    score: float  # fused score used for ranking
    dense: float  # best cosine similarity of any of its chunks (used for abstention)
    chunks: list[Hit] = field(default_factory=list)
    langs: set[str] = field(default_factory=set)


class Lexical:
    def __init__(self, chunks: list[Hit]):
        import bm25s

        self.chunks = chunks
        self.bm25 = bm25s.BM25()
        self.bm25.index([tokenize(c.text) or ["_"] for c in chunks], show_progress=False)

    def search(self, query: str, k: int) -> list[Hit]:
        scores = self.bm25.get_scores(tokenize(query))
        top = np.argsort(-scores)[:k]
        return [Hit(self.chunks[i].id, self.chunks[i].text, self.chunks[i].metadata, float(scores[i]))
                for i in top if scores[i] > 0]


class Retriever:
    def __init__(self, store: Store, embeddings, card_languages: set[str]):
        self.store, self.embeddings, self.card_languages = store, embeddings, card_languages
        self._lexical: Lexical | None = None

    @property
    def lexical(self) -> Lexical:
        if self._lexical is None:
            self._lexical = Lexical([c for c in self.store.all_chunks() if c.metadata.get("kind") == "card"])
        return self._lexical

    def search(self, query: str, lang: str, k: int = 5, mode: Mode | None = None, depth: int = 40) -> tuple[list[CardHit], list[Hit]]:
        """Cards in relevance order, plus the community-seed chunks that matched."""
        if mode is None:
            mode = "hybrid" if lang in self.card_languages else "dense"
        dense = self.store.query(self.embeddings.embed_query(query), k=depth) if mode != "lexical" else []
        seeds = [h for h in dense if h.metadata.get("kind") == "seed"]
        dense = [h for h in dense if h.metadata.get("kind") == "card"]
        lexical = self.lexical.search(query, depth) if mode != "dense" else []

        fused: dict[str, float] = {}
        by_id: dict[str, Hit] = {}
        for ranked, weight in ((dense, 1.0), (lexical, LEXICAL_WEIGHT)):
            for rank, hit in enumerate(ranked):
                fused[hit.id] = fused.get(hit.id, 0.0) + weight / (RRF_K + rank)
                by_id.setdefault(hit.id, hit)
        best_dense: dict[str, float] = {}
        for h in dense:
            best_dense[h.metadata["card"]] = max(best_dense.get(h.metadata["card"], -1.0), h.score)

        cards: dict[str, CardHit] = {}
        for cid, score in sorted(fused.items(), key=lambda kv: -kv[1]):
            hit = by_id[cid]
            topic = hit.metadata["card"]
            ch = cards.setdefault(topic, CardHit(topic, 0.0, best_dense.get(topic, 0.0)))
            # Best chunk plus a share of the second: two matching sections are evidence, but a card
            # must not win by volume (ten language versions, many sections) alone.
            if len(ch.chunks) < 2:
                ch.score += score if not ch.chunks else SECOND_CHUNK * score
            ch.chunks.append(hit)
            ch.langs.add(hit.metadata["lang"])
        ranked = sorted(cards.values(), key=lambda c: -c.score)
        return ranked[:k], seeds
