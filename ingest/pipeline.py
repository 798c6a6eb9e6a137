"""`jaxmem ingest`: corpus -> validated cards -> chunks -> embeddings -> Chroma, incrementally.

LangChain's `index()` with a SQL record manager does the incremental sync (content hashes per
chunk): unchanged chunks are skipped, changed ones re-embedded, chunks of deleted cards removed at
the end (`cleanup="full"`). New vectors are written before stale ones are deleted, so an ingest that
dies half-way leaves an index that still answers; the next run finishes the sync.
"""
from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Callable

import yaml
from langchain_core.documents import Document

from ingest.cards import CorpusError, CorpusLayout, check_corpus, load_card, seed_id
from ingest.chunk import card_documents, scope_documents, seed_documents
from ingest.config import Settings
from ingest.embed import Progress, QuestionsAsQueries, make_embeddings
from ingest.errors import BackendMismatch, IndexMissing, JaxmemError
from ingest.store import Store


def corpus_documents(root: Path) -> list[Document]:
    problems = check_corpus(root)
    if problems:
        shown = "\n".join(f"  {p}" for p in problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise JaxmemError(f"the corpus has {len(problems)} problem(s); nothing was indexed:\n{shown}{more}",
                          "Fix them (`jaxmem corpus check`) and ingest again; the previous index is unchanged.")
    layout = CorpusLayout(root)
    docs: list[Document] = []
    for path in sorted((root / "cards").glob("*/*.md")):
        docs.extend(card_documents(load_card(path, layout), layout, source=str(path.relative_to(root))))
    seeds = root / "seeds"
    audit = yaml.safe_load((seeds / "audit.yaml").read_text(encoding="utf-8")) or []
    if isinstance(audit, dict):
        audit = audit.get("claims", [])
    provenance = yaml.safe_load((seeds / "provenance.yaml").read_text(encoding="utf-8")) if (seeds / "provenance.yaml").exists() else []
    langs = {seed_id(Path(p["file"])): p.get("language", "en") for p in provenance or [] if "file" in p}
    for seed in sorted(seeds.glob("*.txt")):
        sid = seed_id(seed)
        docs.extend(seed_documents(sid, langs.get(sid, "en"), seed.read_text(encoding="utf-8"),
                                   audit, source=str(seed.relative_to(root))))
    scope = root / "scope" / "out_of_scope.yaml"
    if scope.exists():
        docs.extend(scope_documents(yaml.safe_load(scope.read_text(encoding="utf-8")) or [],
                                    source=str(scope.relative_to(root))))
    return docs


def cached_embeddings(inner, settings: Settings, on_texts: Callable[[int], None], questions: set[str] = frozenset()):
    """Embeddings cached by text hash on disk: a rebuild or a second store re-embeds nothing.

    Question chunks get their own key prefix: the same text embedded as a query has
    another vector than as a passage."""
    from langchain_classic.embeddings import CacheBackedEmbeddings
    from langchain_classic.storage import LocalFileStore

    counting = Progress(inner, on_texts)
    cache_dir = Path(os.environ.get("JAXMEM_EMBED_CACHE") or settings.data_dir / "embed-cache")
    store = LocalFileStore(str(cache_dir))
    namespace, questions = inner.name.replace("/", "_"), set(questions)

    def key(text: str) -> str:  # LangChain's sha256 key for passages, so older caches stay valid
        side = "query_" if text in questions else ""
        return f"{namespace}{side}{hashlib.sha256(text.encode('utf-8')).hexdigest()}"

    return counting, CacheBackedEmbeddings.from_bytes_store(QuestionsAsQueries(counting, questions), store, key_encoder=key)


def ingest(settings: Settings | None = None, *, rebuild: bool = False, show_progress: bool | None = None,
           embeddings=None) -> dict:
    from langchain_core.indexing import index
    from tqdm import tqdm

    settings = settings or Settings()
    started = time.perf_counter()
    docs = corpus_documents(settings.corpus_dir)
    inner = embeddings or make_embeddings(settings.embeddings)
    store = Store(settings)
    if rebuild:
        store.reset()
    else:
        try:
            store.check_backend(inner.name, inner.dim)
        except IndexMissing:
            pass
        except BackendMismatch as exc:
            raise BackendMismatch(exc.message, "Rebuild with `jaxmem ingest --rebuild` to switch backends.") from None
    store.collection(create=True, backend=inner.name, dim=inner.dim)

    bar = tqdm(total=len(docs), unit="chunk", desc="embedding", disable=None if show_progress is None else not show_progress)
    questions = {d.page_content for d in docs if d.metadata.get("embed") == "query"}
    counting, cached = cached_embeddings(inner, settings, bar.update, questions)
    try:
        result = index(docs, store.record_manager(), store.vector_store(cached), cleanup="full",
                       source_id_key="source", batch_size=64, key_encoder="sha256")
    finally:
        bar.close()
    stats = {
        "added": result["num_added"],
        "updated": result["num_updated"],
        "deleted": result["num_deleted"],
        "unchanged": result["num_skipped"],
        "chunks": len(docs),
        "embedded": counting.embedded,
        "cards": len({(d.metadata["card"], d.metadata["lang"]) for d in docs if d.metadata["kind"] == "card"}),
        "backend": inner.name,
        "store": store.location,
        "seconds": round(time.perf_counter() - started, 2),
    }
    store.mark_ingested(stats)
    return stats


def ensure_index(settings: Settings, show_progress: bool | None = None) -> dict | None:
    """Build the index on first use so `jaxmem ask` works right after install."""
    if Store(settings).info() is None:
        return ingest(settings, show_progress=show_progress)
    return None


__all__ = ["ingest", "ensure_index", "corpus_documents", "CorpusError"]
