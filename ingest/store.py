"""The only module that talks to Chroma (and to the record manager that tracks what is indexed).

Embedded `PersistentClient` under the data directory by default; a Chroma server when
CHROMA_HOST is set: same code path through `HttpClient`. We always pass our own vectors: Chroma's
default embedding function would try to download a model.

One collection per kind of chunk (card text, card questions, community seeds, out-of-scope
anchors), so no search needs a metadata filter: a filter cost more than the vector search itself
(4-13 ms against 2 ms per search, measured). The collections are small (hundreds to a few thousand
chunks), so the HNSW search is made exhaustive: `ef_search` above the collection size visits every
node, and the top-k equals a brute-force ranking (checked in tests). An approximate search once
missed the nearest out-of-scope anchor, which abstention depends on.

Several processes may share one embedded store (the web app, the Slack bot, an ingest). An
embedded client keeps its search index in memory and does not see another process's writes: it
went on returning chunks that an ingest had deleted (with no metadata) and missed the new ones.
So an ingest counts a `generation` in the index's metadata (which every process reads fresh from
SQLite), and a reader whose generation is old reopens the client (`refresh`). All Store objects
of a process share one embedded client per path, so they are refreshed together.
"""
from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from jaxmem.core.errors import BackendMismatch, IndexMissing, StoreCorrupt, StoreUnavailable
from jaxmem.core.settings import Settings

META_BACKEND = "embedding_backend"
META_DIM = "embedding_dim"
META_FINGERPRINT = "corpus_fingerprint"
META_GENERATION = "generation"
KINDS = ("text", "questions", "seeds", "scope")
# Above every collection's size, so HNSW explores the whole graph: exact top-k (see module doc).
EF_SEARCH = 20_000


def kind_of(metadata: dict) -> str:
    """Which collection a chunk lives in."""
    if metadata.get("kind") == "seed":
        return "seeds"
    if metadata.get("section") == "question":  # cards' questions and the out-of-scope areas' alike
        return "questions"
    if metadata.get("kind") == "scope":
        return "scope"
    return "text"


@dataclass
class Hit:
    id: str
    text: str
    metadata: dict
    score: float  # cosine similarity, higher is better
    embedding: list[float] | None = None  # only when asked for (all_chunks(embeddings=True))


class _Embedded:
    """The process's one embedded client for a path, with the index generation it has loaded."""

    def __init__(self):
        self.client = None
        self.generation: int | None = None
        self.stale = False          # a search returned chunks deleted since the client loaded
        self.version = 0            # bumped when the client is replaced: Stores drop cached handles
        self.retired: list = []     # replaced clients, kept one round for searches still running
        self.lock = threading.Lock()


_EMBEDDED: dict[str, _Embedded] = {}
_EMBEDDED_LOCK = threading.Lock()


def _embedded(path: Path) -> _Embedded:
    with _EMBEDDED_LOCK:
        return _EMBEDDED.setdefault(str(path), _Embedded())


class Store:
    def __init__(self, settings: Settings | None = None):
        self.settings = settings or Settings()
        self._collections: dict[str, object] = {}
        self._version = 0

    # ---- connection ---------------------------------------------------------------------------
    @property
    def location(self) -> str:
        s = self.settings
        return f"chroma server {s.chroma_host}:{s.chroma_port}" if s.chroma_host else str(self.path)

    @property
    def path(self) -> Path:
        return self.settings.data_dir / "chroma"

    @property
    def client(self):
        if self.settings.chroma_host:
            return self._http_client
        shared = _embedded(self.path)
        with shared.lock:
            if shared.client is None:
                shared.client = self._open()
                shared.version += 1
            if shared.version != self._version:
                self._collections.clear()
                self._version = shared.version
            return shared.client

    @cached_property
    def _http_client(self):
        return self._open()

    def _open(self):
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        chroma_settings = ChromaSettings(anonymized_telemetry=False)
        s = self.settings
        try:
            if s.chroma_host:
                client = chromadb.HttpClient(host=s.chroma_host, port=s.chroma_port, settings=chroma_settings)
                client.heartbeat()
                return client
            self.path.mkdir(parents=True, exist_ok=True)
            return chromadb.PersistentClient(path=str(self.path), settings=chroma_settings)
        except Exception as exc:  # chromadb raises a variety of transport/sqlite errors
            if s.chroma_host:
                raise StoreUnavailable(
                    f"cannot reach the Chroma server at {s.chroma_host}:{s.chroma_port} ({type(exc).__name__}).",
                    "Start it (`chroma run --path DIR --host 127.0.0.1 --port PORT`) or unset CHROMA_HOST "
                    "to use the embedded store.",
                ) from None
            raise StoreCorrupt(
                f"the index at {self.path} cannot be opened ({type(exc).__name__}: {str(exc)[:200]}).",
                "Rebuild it with `jaxmem ingest --rebuild`.",
            ) from None

    def _wrap(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (IndexMissing, BackendMismatch):
            raise
        except Exception as exc:
            name = type(exc).__name__
            if "NotFound" in name or "does not exist" in str(exc):
                self._collections.clear()  # a rebuild elsewhere replaced them: look them up again
                raise IndexMissing(f"no index '{self.settings.collection}' in {self.location}.",
                                   "Build it with `jaxmem ingest`.") from None
            if self.settings.chroma_host:
                self._collections.clear()
                raise StoreUnavailable(f"the Chroma server at {self.location} failed: {name}: {str(exc)[:200]}",
                                       "Check that it is running.") from None
            raise StoreCorrupt(f"the index at {self.location} is unreadable ({name}: {str(exc)[:200]}).",
                               "Rebuild it with `jaxmem ingest --rebuild`.") from None

    # ---- other processes' writes ---------------------------------------------------------------
    def generation(self) -> int | None:
        """The index's generation as stored now (read fresh, not from a cached handle)."""
        try:
            meta = self._wrap(self.client.get_collection, self.name("text")).metadata or {}
        except IndexMissing:
            return None
        return int(meta.get(META_GENERATION) or 0)

    def refresh(self) -> bool:
        """Reopen the embedded client if another process changed the index since it was loaded
        (or a search met chunks deleted meanwhile). True when it did; a Chroma server needs none."""
        if self.settings.chroma_host:
            return False
        shared = _embedded(self.path)
        current = self.generation()
        if shared.generation is None and not shared.stale:
            shared.generation = current
            return False
        if current == shared.generation and not shared.stale:
            return False
        from chromadb.api.client import SharedSystemClient

        with shared.lock:
            # A new client of the same path would reuse the cached (stale) system: forget it, so
            # the next client loads the index from disk. The old one keeps serving searches already
            # running; it is stopped at the next refresh.
            for old in shared.retired:
                try:
                    old._system.stop()
                except Exception:
                    pass
            shared.retired = [shared.client] if shared.client is not None else []
            SharedSystemClient._identifier_to_system.pop(str(self.path), None)
            SharedSystemClient._identifier_to_refcount.pop(str(self.path), None)
            shared.client, shared.generation, shared.stale = None, current, False
            self._collections.clear()
        return True

    def bump_generation(self, **changes) -> None:
        """Tell other processes the index changed (an ingest calls this as it writes), with other
        metadata changes (`None` removes a key)."""
        meta = self.metadata()
        meta[META_GENERATION] = int(meta.get(META_GENERATION) or 0) + 1
        for key, value in changes.items():
            if value is None:
                meta.pop(key, None)
            else:
                meta[key] = value
        meta.pop("hnsw:space", None)
        self._wrap(self.collection("text").modify, metadata=meta)
        if not self.settings.chroma_host:
            _embedded(self.path).generation = meta[META_GENERATION]  # our own client sees our writes

    # ---- collections --------------------------------------------------------------------------
    def name(self, kind: str) -> str:
        return f"{self.settings.collection}-{kind}"

    def collection(self, kind: str = "text", create: bool = False, backend: str | None = None, dim: int | None = None):
        if create:
            meta = {META_BACKEND: backend, META_DIM: dim}
            col = self._wrap(self.client.get_or_create_collection, self.name(kind), metadata=meta,
                             configuration={"hnsw": {"space": "cosine", "ef_search": EF_SEARCH}})
            self._collections[kind] = col
            return col
        col = self._collections.get(kind)
        if col is None:  # handles are cached: a lookup costs about 1 ms per search
            col = self._collections[kind] = self._wrap(self.client.get_collection, self.name(kind))
        return col

    def create_all(self, backend: str, dim: int) -> None:
        for kind in KINDS:
            self.collection(kind, create=True, backend=backend, dim=dim)

    def metadata(self) -> dict:
        """The index's own metadata (backend, last ingest, corpus fingerprint, generation), on the
        text collection, read fresh: a cached handle's metadata is a snapshot."""
        self.collection("text")  # IndexMissing when there is none
        return dict(self._wrap(self.client.get_collection, self.name("text")).metadata or {})

    def info(self) -> dict | None:
        """Index status for sidebars and `jaxmem status`; None when there is no index."""
        try:
            meta = self.metadata()
            counts = {kind: self._wrap(self.collection(kind).count) for kind in KINDS}
            got = self._wrap(self.collection("text").get, include=["metadatas"])
        except IndexMissing:
            return None
        metas = got["metadatas"]
        return {
            "location": self.location,
            "collection": self.settings.collection,
            "chunks": sum(counts.values()),
            "chunks_by_kind": counts,
            "cards": len({(m["card"], m["lang"]) for m in metas}),
            "topics": len({m["card"] for m in metas}),
            "languages": sorted({m["lang"] for m in metas}),
            "embedding_backend": meta.get(META_BACKEND),
            "embedding_dim": meta.get(META_DIM),
            "last_ingest": meta.get("last_ingest"),
        }

    def check_backend(self, backend: str, dim: int) -> None:
        meta = self.metadata()
        if meta.get(META_BACKEND) != backend or int(meta.get(META_DIM) or 0) != dim:
            raise BackendMismatch(
                f"the index was built with embeddings '{meta.get(META_BACKEND)}' (dim {meta.get(META_DIM)}), "
                f"but this run uses '{backend}' (dim {dim}); vectors from different models cannot be compared.",
                "Re-ingest with this backend: `jaxmem ingest --rebuild`, or set JAXMEM_EMBEDDINGS back.",
            )

    def fingerprint(self) -> str | None:
        """The corpus fingerprint of the last complete ingest; None if there is none (or no index)."""
        try:
            meta = self.metadata()
            for kind in KINDS[1:]:
                self.collection(kind)  # all four must exist for the index to be complete
        except IndexMissing:
            return None
        return meta.get(META_FINGERPRINT)

    def mark_ingested(self, stats: dict, fingerprint: str | None = None) -> None:
        self.bump_generation(last_ingest=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                             chunks=stats.get("chunks") or 0, cards=stats.get("cards") or 0,
                             **{META_FINGERPRINT: fingerprint})

    def begin_sync(self) -> None:
        """Called before a sync writes anything: a run that dies half-way must not look complete,
        and readers in other processes must reload as the writes land."""
        try:
            self.bump_generation(**{META_FINGERPRINT: None})
        except IndexMissing:
            pass

    def reset(self) -> None:
        names = [self.settings.collection] + [self.name(kind) for kind in KINDS]  # the first: pre-0.2 single collection
        for name in names:
            try:
                self.client.delete_collection(name)
            except Exception:
                pass  # nothing to delete
        self._collections.clear()
        for kind in KINDS:
            rm = self.record_manager(kind)
            keys = rm.list_keys()
            if keys:
                rm.delete_keys(keys)

    # ---- write side (LangChain indexing API) --------------------------------------------------
    def vector_store(self, kind: str, embeddings):
        from langchain_chroma import Chroma

        return Chroma(collection_name=self.name(kind), embedding_function=embeddings,
                      client=self.client, create_collection_if_not_exists=False)

    def record_manager(self, kind: str):
        """LangChain's record manager, in the one database (`ingest.db`), so replicas that share a
        Chroma server share what was indexed too."""
        from langchain_classic.indexes import SQLRecordManager

        from jaxmem.core import db

        # The record manager must follow the vectors: one namespace per store location and collection
        # (an embedded store is this host's folder: replicas sharing one database keep theirs apart).
        where = f"{self.settings.chroma_host}:{self.settings.chroma_port}" if self.settings.chroma_host \
            else f"local:{socket.gethostname()}:{self.path.resolve()}"
        rm = SQLRecordManager(f"chroma/{where}/{self.name(kind)}", engine=db.engine(self.settings))
        rm.create_schema()
        return rm

    def reconcile(self, kind: str) -> dict:
        """Make the record manager and the collection agree before a sync (what a killed run left).

        LangChain's `index` writes a batch's vectors first and records their keys after: a run killed
        in between leaves chunks in Chroma that no record names, and `cleanup="full"` only deletes
        what is recorded, so once the text changed they stayed for good (a kill-test CI run ended
        with 61 chunks for a corpus of 45). Those are deleted here; a recorded key whose chunk is not
        in the collection is forgotten, so the sync adds it again."""
        rm = self.record_manager(kind)
        col = self.collection(kind)
        stored = set(self._wrap(col.get, include=[])["ids"])
        recorded = set(rm.list_keys())
        orphans, lost = sorted(stored - recorded), sorted(recorded - stored)
        if orphans:
            self._wrap(col.delete, ids=orphans)
        if lost:
            rm.delete_keys(lost)
        return {"orphans": len(orphans), "lost": len(lost)}

    # ---- read side ----------------------------------------------------------------------------
    def query(self, embedding: list[float], k: int, kind: str = "text", documents: bool = True) -> list[Hit]:
        col = self.collection(kind)
        include = ["documents", "metadatas", "distances"] if documents else ["metadatas", "distances"]
        res = self._wrap(col.query, query_embeddings=[embedding], n_results=k, include=include)
        docs = res["documents"][0] if documents else [""] * len(res["ids"][0])
        hits = [Hit(i, d, m, 1.0 - dist) for i, d, m, dist in
                zip(res["ids"][0], docs, res["metadatas"][0], res["distances"][0])]
        live = [h for h in hits if h.metadata is not None]
        if len(live) < len(hits) and not self.settings.chroma_host:
            _embedded(self.path).stale = True  # deleted by another process: reload before the next search
        return live

    def all_chunks(self, kinds: tuple[str, ...] = KINDS, embeddings: bool = False) -> list[Hit]:
        hits = []
        include = ["documents", "metadatas"] + (["embeddings"] if embeddings else [])
        for kind in kinds:
            got = self._wrap(self.collection(kind).get, include=include)
            vectors = got["embeddings"] if embeddings else [None] * len(got["ids"])
            hits += [Hit(i, d, m, 0.0, None if v is None else list(v))
                     for i, d, m, v in zip(got["ids"], got["documents"], got["metadatas"], vectors)]
        return hits
