"""Hybrid retrieval: dense (Chroma) over card text and over the cards' user-style questions, plus
lexical (BM25), fused by reciprocal rank, collapsed to cards.

Lexical matching helps only when the corpus has text in the question's language (measured: it hurt
cross-lingual questions), so it is fused only for card languages; `jaxmem eval` reports each mode.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from jaxmem.app import stamped
from jaxmem.app.intent import Intent, column_sums, tokenize
from jaxmem.ingest.store import Hit, Store

Mode = Literal["dense", "lexical", "hybrid"]
RRF_K = 60
LEXICAL_WEIGHT = 0.5  # dense is the stronger signal (eval: `jaxmem eval` compares the modes)
QUESTION_WEIGHT = 2.0  # the cards' stored questions, a ranking of their own (see README: Measured)
INTENT_WEIGHT = 2.0  # the question classifier's ranking of cards (app/intent.py), fused per card
# Chunks per search: card text, card questions, community seeds, out-of-scope anchors. Each kind has
# its own collection (no metadata filter).
DEPTHS = {"text": 40, "questions": 40, "seeds": 5, "scope": 1}
CHUNKS_PER_CARD = 3  # a card's score sums its best chunks: agreement between sections (and
# language versions) is evidence (main set, 23 topics: best-3 0.945 R@3 vs best-1 0.883)

@dataclass
class CardHit:
    card: str
    score: float  # fused score used for ranking
    dense: float  # best cosine similarity of any of its text chunks (questions excluded)
    chunks: list[Hit] = field(default_factory=list)
    langs: set[str] = field(default_factory=set)


@dataclass
class SearchResult:
    cards: list[CardHit]
    seeds: list[Hit]  # community seed claims that matched
    scope: float  # best similarity to an out-of-scope anchor (0 when the index has none)
    scope_id: str = ""
    similarity: float = 0.0  # best similarity of the question to any card's text (for abstention)
    # Best similarity to a stored question of an out-of-scope area, and to one of a card: a question
    # like one users ask about installation or PRNG keys is declined with that area named.
    scope_question: float = 0.0
    scope_question_id: str = ""
    card_question: float = 0.0
    # The question classifier's best out-of-scope area score minus its best card score (-inf without one)
    intent_scope: float = float("-inf")
    intent_scope_id: str = ""
    # The classifier's score of the first card minus the second's: small when two cards fit the
    # question about equally (then the answer opens with both short answers; app/advisor.py).
    intent_gap: float = float("inf")


class Lexical:
    """Okapi BM25 over the card chunks (k1=1.5, b=0.75), a sparse matrix product per query.

    Written here rather than taken from bm25s: that package imports JAX and runs an op at import
    time, which would start an accelerator backend (and grab 75% of a GPU) inside the web and
    Slack servers. The matrix is kept as compressed-column arrays and read with NumPy alone."""

    K1, B = 1.5, 0.75

    def __init__(self, chunks: list[Hit], vocab: dict[str, int] | None = None, arrays: tuple | None = None):
        # Results carry ids and metadata only, like the dense searches.
        self.chunks = [Hit(c.id, "", c.metadata, 0.0) for c in chunks]
        if vocab is not None:  # loaded from the cache file (see `load`)
            self.vocab, (self.indptr, self.indices, self.data) = vocab, arrays
            return
        from scipy.sparse import csc_matrix

        docs = [tokenize(c.text) for c in chunks]
        self.vocab: dict[str, int] = {}
        rows, cols, tf = [], [], []
        for i, toks in enumerate(docs):
            counts: dict[int, int] = {}
            for t in toks:
                j = self.vocab.setdefault(t, len(self.vocab))
                counts[j] = counts.get(j, 0) + 1
            rows += [i] * len(counts)
            cols += list(counts)
            tf += list(counts.values())
        n = len(docs)
        lengths = np.array([len(d) for d in docs], dtype=np.float32)
        df = np.bincount(np.array(cols, dtype=np.int64), minlength=len(self.vocab)).astype(np.float32)
        idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
        tf = np.array(tf, dtype=np.float32)
        norm = self.K1 * (1 - self.B + self.B * lengths[np.array(rows, dtype=np.int64)] / max(lengths.mean(), 1.0))
        weights = tf * (self.K1 + 1) / (tf + norm) * idf[np.array(cols, dtype=np.int64)]
        # column-major: a query selects a few term columns
        m = csc_matrix((weights, (rows, cols)), shape=(n, len(self.vocab)))
        self.indptr, self.indices, self.data = m.indptr.astype(np.int64), m.indices.astype(np.int32), m.data.astype(np.float32)

    def search(self, query: str, k: int) -> list[Hit]:
        terms = np.array([self.vocab[t] for t in set(tokenize(query)) if t in self.vocab], dtype=np.int64)
        if not len(terms):
            return []
        scores = column_sums(self.indptr, self.indices, self.data, terms, np.ones(len(terms), np.float32), len(self.chunks))
        top = np.argsort(-scores, kind="stable")[:k]
        return [Hit(self.chunks[i].id, "", self.chunks[i].metadata, float(scores[i])) for i in top if scores[i] > 0]

    # A cold `jaxmem ask` spent 0.5 s fetching every chunk from Chroma and tokenising it.
    def save(self, path: Path, stamp: str) -> None:
        stamped.save(path, stamp, {"vocab": list(self.vocab), "chunks": [[c.id, c.metadata] for c in self.chunks]},
                     {"data": self.data, "indices": self.indices, "indptr": self.indptr})

    @classmethod
    def load(cls, path: Path, stamp: str) -> Lexical | None:
        got = stamped.load(path, stamp)
        if got is None or "indptr" not in got[1] or "shape" in got[1]:
            return None  # none, or one written before (SciPy's layout): rebuilt
        meta, z = got
        vocab = {t: i for i, t in enumerate(meta["vocab"])}
        return cls([Hit(i, "", m, 0.0) for i, m in meta["chunks"]], vocab=vocab, arrays=(z["indptr"], z["indices"], z["data"]))


class Retriever:
    def __init__(self, store: Store, embeddings, card_languages: set[str]):
        self.store, self.embeddings, self.card_languages = store, embeddings, card_languages
        self._lexical: tuple[str | None, Lexical] | None = None  # (the ingest it reflects, the index)
        self._intent: tuple[str | None, Intent] | None = None

    def _derived(self, attr: str, name: str, load, build):
        """An index derived from the store: kept while the store's last complete ingest is the one
        it reflects, else loaded from its stamped file, or built and saved. While an ingest runs
        (no complete one) the one in hand stays."""
        stamp = self.store.fingerprint()
        held = getattr(self, attr)
        if held is not None and (stamp is None or held[0] == stamp):
            return held[1]
        path = self.store.settings.data_dir / name
        index = load(path, stamp) if stamp else None
        if index is None:
            index = build()
            # An index without a fingerprint is mid-sync, and one whose fingerprint changed while we
            # read it was synced meanwhile: keep neither.
            if stamp and self.store.fingerprint() == stamp:
                try:
                    index.save(path, stamp)
                except OSError:
                    pass  # a read-only data dir only costs the next cold start the rebuild
        setattr(self, attr, (stamp, index))
        return index

    @property
    def lexical(self) -> Lexical:
        return self._derived("_lexical", "lexical.npz", Lexical.load,
                             lambda: Lexical(self.store.all_chunks(kinds=("text", "questions"))))

    @property
    def intent(self) -> Intent | None:
        """The question classifier (None when the index holds no stored questions)."""
        intent = self._derived("_intent", "intent.npz", Intent.load, self._fit_intent)
        return intent if intent.classes else None

    def _fit_intent(self) -> Intent:
        asked = self.store.all_chunks(kinds=("questions",), embeddings=True)
        # The questions of everyday areas (cooking, travel, ... and the unnamed technical ones) teach
        # the nearest-question rule what they look like, not the classifier: as 22 more classes they
        # moved its card ranking (main recall@1 0.979 -> 0.966, real key fact 0.852 -> 0.842) and
        # declined no more than the rule alone (main, real dev: the same; held-out set 36 -> 38 of 40
        # out-of-scope questions declined either way).
        asked = [h for h in asked if h.metadata.get("classify", True)]
        if not asked:
            return Intent([], np.zeros((0, 0), dtype=np.float32))
        return Intent.fit(np.array([h.embedding for h in asked], dtype=np.float32),
                          [h.metadata["card"] for h in asked], texts=[h.text for h in asked])

    def dense(self, vector: list[float], depth: int = 40) -> dict[str, list[Hit]]:
        # the question collection also holds the out-of-scope areas' questions: search it a little deeper
        return self.store.search(vector, {**DEPTHS, "text": depth, "questions": depth + 20})

    def search(self, query: str, lang: str, k: int = 5, mode: Mode | None = None, depth: int = 40) -> SearchResult:
        """Cards in relevance order, the community-seed chunks that matched, and how close the
        question is to an area the knowledge base declares out of scope."""
        if mode is None:
            mode = "hybrid" if lang in self.card_languages else "dense"
        self.store.refresh()  # another process (an ingest) changed the index: read it anew
        seeds, scope, scope_id = [], 0.0, ""
        scope_q, scope_q_id, card_q = 0.0, "", 0.0
        prose: list[Hit] = []
        asked: list[Hit] = []
        vector = None
        if mode != "lexical":
            vector = self.embeddings.embed_query(query)
            found = self.dense(vector, depth)
            prose, seeds = found["text"], found["seeds"]
            if found["scope"]:
                scope, scope_id = found["scope"][0].score, found["scope"][0].metadata.get("card", "")
            for h in found["questions"]:
                if h.metadata.get("kind") == "scope":
                    if h.score > scope_q:
                        scope_q, scope_q_id = h.score, h.metadata.get("card", "")
                else:
                    card_q = max(card_q, h.score)
            asked = [h for h in found["questions"] if h.metadata.get("kind") != "scope"]
        lexical = [h for h in self.lexical.search(query, depth) if h.metadata.get("kind") != "scope"] \
            if mode != "dense" else []

        fused: dict[str, float] = {}
        by_id: dict[str, Hit] = {}
        for ranked, weight in ((prose, 1.0), (asked, QUESTION_WEIGHT), (lexical, LEXICAL_WEIGHT)):
            for rank, hit in enumerate(ranked):
                fused[hit.id] = fused.get(hit.id, 0.0) + weight / (RRF_K + rank)
                by_id.setdefault(hit.id, hit)
        # Similarity for abstention comes from the card text only: stored questions are embedded as
        # queries, and any two questions look alike to E5, off-topic ones included.
        best_dense: dict[str, float] = {}
        for h in prose:
            best_dense[h.metadata["card"]] = max(best_dense.get(h.metadata["card"], -1.0), h.score)

        cards: dict[str, CardHit] = {}
        for cid, score in sorted(fused.items(), key=lambda kv: -kv[1]):
            hit = by_id[cid]
            topic = hit.metadata["card"]
            ch = cards.setdefault(topic, CardHit(topic, 0.0, best_dense.get(topic, 0.0)))
            if len(ch.chunks) < CHUNKS_PER_CARD:
                ch.score += score
            ch.chunks.append(hit)
            ch.langs.add(hit.metadata["lang"])
        ranked = sorted(cards.values(), key=lambda c: -c.score)
        intent_scope, intent_scope_id, intent_gap = float("-inf"), "", float("inf")
        intent = self.intent if vector is not None else None
        if intent is not None:
            # Second fusion, per card: the ranking above and the classifier's ranking of all cards.
            # A card only the classifier proposes enters without chunks (its summary answers).
            fused_cards = {c.card: 1.0 / (RRF_K + rank) for rank, c in enumerate(ranked)}
            # one reading for the ranking, the scope and the gap
            reading = intent.read(vector, query)
            for rank, topic in enumerate(reading.topics()):
                fused_cards[topic] = fused_cards.get(topic, 0.0) + INTENT_WEIGHT / (RRF_K + rank)
                cards.setdefault(topic, CardHit(topic, 0.0, best_dense.get(topic, 0.0)))
            for topic, score in fused_cards.items():
                cards[topic].score = score
            ranked = sorted(cards.values(), key=lambda c: -c.score)
            intent_scope, intent_scope_id = reading.scope_margin()
            if len(ranked) > 1:
                intent_gap = reading.gap(ranked[0].card, ranked[1].card)
        return SearchResult(ranked[:k], seeds, scope, scope_id, similarity=prose[0].score if prose else 0.0,
                            scope_question=scope_q, scope_question_id=scope_q_id, card_question=card_q,
                            intent_scope=intent_scope, intent_scope_id=intent_scope_id, intent_gap=intent_gap)
