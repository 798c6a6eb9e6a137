"""The index's door: what front ends and the services call to build, check and describe it.

    ingest(settings, rebuild=False)  -> stats of an incremental (or full) ingest
    ensure_index(settings)           -> build it on first use; None when it is already there
    embed_corpus(settings)           -> write the corpus's shipped vectors (a source checkout's corpus)
    check_corpus(root)               -> problems of cards, pairs, scope, seeds
    check_vectors(settings)          -> problems of the shipped vectors against the cards
    index_info(settings)             -> cards, languages, backend, last ingest; None without an index
"""
from __future__ import annotations

from jaxmem.core.settings import Settings
from jaxmem.ingest.cards import check_corpus
from jaxmem.ingest.pipeline import check_vectors, embed_corpus, ensure_index, ingest

__all__ = ["ingest", "ensure_index", "embed_corpus", "check_corpus", "check_vectors", "index_info"]


def index_info(settings: Settings) -> dict | None:
    from jaxmem.ingest.store import Store

    return Store(settings).info()
