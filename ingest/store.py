"""The only module that talks to Chroma (and to the record manager that tracks what is indexed).

Embedded `PersistentClient` under the data directory by default; a Chroma server when
CHROMA_HOST is set: same code path through `HttpClient`. We always pass our own vectors: Chroma's
default embedding function would try to download a model.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ingest.config import Settings
from ingest.errors import BackendMismatch, IndexMissing, StoreCorrupt, StoreUnavailable

META_BACKEND = "embedding_backend"
META_DIM = "embedding_dim"


@dataclass
class Hit:
    id: str
    text: str
    metadata: dict
    score: float  # cosine similarity, higher is better


class Store:
    def __init__(self, settings: Settings | None = None):
        self.settings = settings or Settings()

    # ---- connection ---------------------------------------------------------------------------
    @property
    def location(self) -> str:
        s = self.settings
        return f"chroma server {s.chroma_host}:{s.chroma_port}" if s.chroma_host else str(self.path)

    @property
    def path(self) -> Path:
        return self.settings.data_dir / "chroma"

    @cached_property
    def client(self):
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
                raise IndexMissing(f"no index '{self.settings.collection}' in {self.location}.",
                                   "Build it with `jaxmem ingest`.") from None
            if self.settings.chroma_host:
                raise StoreUnavailable(f"the Chroma server at {self.location} failed: {name}: {str(exc)[:200]}",
                                       "Check that it is running.") from None
            raise StoreCorrupt(f"the index at {self.location} is unreadable ({name}: {str(exc)[:200]}).",
                               "Rebuild it with `jaxmem ingest --rebuild`.") from None

    # ---- collection ---------------------------------------------------------------------------
    def collection(self, create: bool = False, backend: str | None = None, dim: int | None = None):
        name = self.settings.collection
        if create:
            meta = {META_BACKEND: backend, META_DIM: dim}
            return self._wrap(self.client.get_or_create_collection, name, metadata=meta,
                              configuration={"hnsw": {"space": "cosine"}})
        return self._wrap(self.client.get_collection, name)

    def info(self) -> dict | None:
        """Index status for sidebars and `jaxmem status`; None when there is no index."""
        try:
            col = self.collection()
        except IndexMissing:
            return None
        meta = dict(col.metadata or {})
        got = self._wrap(col.get, include=["metadatas"])
        metas = [m for m in got["metadatas"] if m.get("kind") == "card"]
        return {
            "location": self.location,
            "collection": self.settings.collection,
            "chunks": len(got["ids"]),
            "cards": len({(m["card"], m["lang"]) for m in metas}),
            "topics": len({m["card"] for m in metas}),
            "languages": sorted({m["lang"] for m in metas}),
            "embedding_backend": meta.get(META_BACKEND),
            "embedding_dim": meta.get(META_DIM),
            "last_ingest": meta.get("last_ingest"),
        }

    def check_backend(self, backend: str, dim: int) -> None:
        meta = self.collection().metadata or {}
        if meta.get(META_BACKEND) != backend or int(meta.get(META_DIM) or 0) != dim:
            raise BackendMismatch(
                f"the index was built with embeddings '{meta.get(META_BACKEND)}' (dim {meta.get(META_DIM)}), "
                f"but this run uses '{backend}' (dim {dim}); vectors from different models cannot be compared.",
                "Re-ingest with this backend: `jaxmem ingest --rebuild`, or set JAXMEM_EMBEDDINGS back.",
            )

    def mark_ingested(self, stats: dict) -> None:
        col = self.collection()
        meta = dict(col.metadata or {})
        meta.update(last_ingest=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), chunks=stats.get("chunks", 0))
        meta.pop("hnsw:space", None)
        self._wrap(col.modify, metadata=meta)

    def reset(self) -> None:
        try:
            self.client.delete_collection(self.settings.collection)
        except Exception:
            pass  # nothing to delete
        rm = self.record_manager()
        keys = rm.list_keys()
        if keys:
            rm.delete_keys(keys)

    # ---- write side (LangChain indexing API) --------------------------------------------------
    def vector_store(self, embeddings):
        from langchain_chroma import Chroma

        return Chroma(collection_name=self.settings.collection, embedding_function=embeddings,
                      client=self.client, create_collection_if_not_exists=False)

    def record_manager(self):
        from langchain_classic.indexes import SQLRecordManager

        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        # The record manager must follow the vectors: one namespace per store location and collection.
        where = f"{self.settings.chroma_host}:{self.settings.chroma_port}" if self.settings.chroma_host else "local"
        rm = SQLRecordManager(f"chroma/{where}/{self.settings.collection}",
                              db_url=f"sqlite:///{self.settings.data_dir / 'records.sqlite'}")
        rm.create_schema()
        return rm

    # ---- read side ----------------------------------------------------------------------------
    def query(self, embedding: list[float], k: int, where: dict | None = None) -> list[Hit]:
        col = self.collection()
        res = self._wrap(col.query, query_embeddings=[embedding], n_results=k, where=where,
                         include=["documents", "metadatas", "distances"])
        return [Hit(i, d, m, 1.0 - dist) for i, d, m, dist in
                zip(res["ids"][0], res["documents"][0], res["metadatas"][0], res["distances"][0])]

    def all_chunks(self) -> list[Hit]:
        col = self.collection()
        got = self._wrap(col.get, include=["documents", "metadatas"])
        return [Hit(i, d, m, 0.0) for i, d, m in zip(got["ids"], got["documents"], got["metadatas"])]
