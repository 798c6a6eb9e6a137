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

__all__ = ["ingest", "ensure_index", "embed_corpus", "check_corpus", "check_vectors", "index_info"]

# The pipeline (LangChain, the record manager, the chunkers) is imported only by what needs it: a
# `jaxmem ask` whose index is complete only looks at the store's state file.


def ingest(settings: Settings | None = None, **kwargs) -> dict:
    from jaxmem.ingest.pipeline import ingest as run

    return run(settings, **kwargs)


def ensure_index(settings: Settings, show_progress: bool | None = None) -> dict | None:
    """Build the index on first use (None when it is there already)."""
    from jaxmem.ingest.store import Store

    if Store(settings).snapshot() is not None:
        return None  # a complete ingest's snapshot: nothing to build, Chroma need not even be opened
    from jaxmem.ingest.pipeline import ensure_index as ensure

    return ensure(settings, show_progress=show_progress)


def embed_corpus(settings: Settings | None = None, show_progress: bool | None = None) -> dict:
    from jaxmem.ingest.pipeline import embed_corpus as embed

    return embed(settings, show_progress=show_progress)


def check_vectors(settings: Settings | None = None, docs=None) -> list:
    from jaxmem.ingest.pipeline import check_vectors as check

    return check(settings, docs)


def index_info(settings: Settings) -> dict | None:
    from jaxmem.ingest.store import Store

    return Store(settings).info()
