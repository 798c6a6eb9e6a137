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

The embedded store's read side is a snapshot (`Snapshot`): a complete ingest writes every chunk's
id, metadata and vector into one file beside Chroma, and the index's metadata into a small state
file as it changes it. A reader whose state file names a complete ingest searches the snapshot in
memory (an exact cosine top-k is one matrix product, under a millisecond for 12,000 chunks) and
never imports or opens Chroma: that cost a cold `jaxmem ask` 1.2-1.8 s, and every answer two reads
of Chroma's SQLite file (the generation check) and four searches. While an ingest runs (the state
names no complete ingest), readers search Chroma as before. A Chroma server (CHROMA_HOST) is always
searched directly: other hosts' ingests write no file here.
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from jaxmem.core.errors import BackendMismatch, IndexMissing, StoreCorrupt, StoreUnavailable
from jaxmem.core.settings import Settings

META_BACKEND = "embedding_backend"
META_DIM = "embedding_dim"
META_FINGERPRINT = "corpus_fingerprint"
META_GENERATION = "generation"
KINDS = ("text", "questions", "seeds", "scope")
# Above every collection's size, so HNSW explores the whole graph: exact top-k (see module doc).
EF_SEARCH = 20_000
SNAPSHOT_FORMAT = 1
LIVE = "chroma"  # searches read Chroma itself (no complete snapshot)


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


class Snapshot:
    """Every chunk of one complete ingest, per kind: ids, metadata and vectors, searched in memory.

    Metadata are stored by column (each key's distinct values once, and a code per chunk), so
    loading 12,000 chunks parses a few thousand strings, not 12,000 dictionaries; a hit's
    dictionary is rebuilt when it is returned. Texts are read from the file only when asked for."""

    def __init__(self, stamp: str, parts: dict[str, dict], path: Path | None = None):
        """parts: kind -> {ids, columns: key -> (values, codes), unit: L2-normalised vectors, norms}."""
        self.stamp, self.parts, self.path = stamp, parts, path
        self._texts: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_hits(cls, stamp: str, by_kind: dict[str, list[Hit]]) -> Snapshot:
        parts, texts = {}, {}
        for kind, hits in by_kind.items():
            keys = sorted({k for h in hits for k in h.metadata})
            columns = {}
            for key in keys:
                table, codes = {}, np.full(len(hits), -1, dtype=np.int32)
                for i, h in enumerate(hits):
                    if key in h.metadata:
                        value = json.dumps(h.metadata[key], ensure_ascii=False, sort_keys=True)
                        codes[i] = table.setdefault(value, len(table))
                columns[key] = ([json.loads(v) for v in table], codes)
            dim = len(hits[0].embedding) if hits and hits[0].embedding is not None else 0
            vectors = np.array([h.embedding for h in hits], dtype=np.float32) if hits else np.zeros((0, dim), np.float32)
            norms = np.linalg.norm(vectors, axis=1).astype(np.float32)
            unit = vectors / np.where(norms == 0, 1.0, norms)[:, None]
            parts[kind] = {"ids": [h.id for h in hits], "columns": columns, "unit": unit.astype(np.float32), "norms": norms}
            texts[kind] = [h.text for h in hits]
        snap = cls(stamp, parts)
        snap._texts = texts
        return snap

    def save(self, path: Path) -> None:
        """Atomically: a reader loads the old file or the new one, never half of one."""
        meta, arrays = {"stamp": self.stamp, "format": SNAPSHOT_FORMAT, "parts": {}}, {}
        for kind, part in self.parts.items():
            meta["parts"][kind] = {"ids": part["ids"], "tables": {k: t for k, (t, _) in part["columns"].items()}}
            arrays[f"{kind}.unit"], arrays[f"{kind}.norms"] = part["unit"], part["norms"]
            for key, (_, codes) in part["columns"].items():
                arrays[f"{kind}.codes.{key}"] = codes
            arrays[f"{kind}.texts"] = np.frombuffer(json.dumps(self.texts(kind), ensure_ascii=False).encode(), np.uint8)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            np.savez(f, meta=np.frombuffer(json.dumps(meta, ensure_ascii=False).encode(), np.uint8), **arrays)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path, stamp: str) -> Snapshot | None:
        """The snapshot of ingest `stamp`, or None (missing, unreadable, or of another ingest)."""
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(z["meta"].tobytes())
                if meta.get("stamp") != stamp or meta.get("format") != SNAPSHOT_FORMAT:
                    return None
                parts = {kind: {"ids": m["ids"], "unit": z[f"{kind}.unit"], "norms": z[f"{kind}.norms"],
                                "columns": {k: (t, z[f"{kind}.codes.{k}"]) for k, t in m["tables"].items()}}
                         for kind, m in meta["parts"].items()}
        except (OSError, ValueError, KeyError):
            return None
        return cls(stamp, parts, path)

    def texts(self, kind: str) -> list[str]:
        with self._lock:
            if kind not in self._texts:
                try:
                    with np.load(self.path, allow_pickle=False) as z:
                        if json.loads(z["meta"].tobytes()).get("stamp") != self.stamp:
                            raise ValueError("replaced")
                        self._texts[kind] = json.loads(z[f"{kind}.texts"].tobytes())
                except (OSError, ValueError, KeyError, TypeError):
                    raise StoreCorrupt(f"the index snapshot {self.path} changed or is unreadable.",
                                       "Ask again; if it persists, run `jaxmem ingest --rebuild`.") from None
            return self._texts[kind]

    def metadata(self, kind: str, i: int) -> dict:
        return {key: table[codes[i]] for key, (table, codes) in self.parts[kind]["columns"].items() if codes[i] >= 0}

    def query(self, embedding, k: int, kind: str, documents: bool) -> list[Hit]:
        part = self.parts.get(kind)
        if part is None:
            raise IndexMissing(f"the index snapshot has no {kind!r} chunks.", "Rebuild it with `jaxmem ingest --rebuild`.")
        if not len(part["ids"]):
            return []
        q = np.asarray(embedding, dtype=np.float32)
        scores = part["unit"] @ (q / max(float(np.linalg.norm(q)), 1e-12))
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        texts = self.texts(kind) if documents else None
        return [Hit(part["ids"][i], texts[i] if texts else "", self.metadata(kind, i), float(scores[i])) for i in top]

    def all_chunks(self, kinds, embeddings: bool) -> list[Hit]:
        out = []
        for kind in kinds:
            part, texts = self.parts[kind], self.texts(kind)
            vectors = part["unit"] * part["norms"][:, None] if embeddings else None  # as stored in Chroma
            out += [Hit(cid, texts[i], self.metadata(kind, i), 0.0, vectors[i].tolist() if embeddings else None)
                    for i, cid in enumerate(part["ids"])]
        return out


_SNAPSHOTS: dict[str, Snapshot] = {}
_STATES: dict[str, tuple[tuple, dict]] = {}
_FILES_LOCK = threading.Lock()


class _Embedded:
    """The process's one embedded client for a path, with the index generation it has loaded."""

    def __init__(self):
        self.client = None
        self.generation: int | None = None
        self.stale = False          # a search returned chunks deleted since the client loaded
        self.seen: str | None = None  # what the last search read: a snapshot's stamp, or LIVE (Chroma)
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

    # ---- the embedded store's snapshot and state file (module doc) -------------------------------
    @property
    def state_path(self) -> Path:
        return self.settings.data_dir / f"{self.settings.collection}.state.json"

    @property
    def snapshot_path(self) -> Path:
        return self.settings.data_dir / f"{self.settings.collection}.snapshot.npz"

    def _state(self) -> dict | None:
        """The index's metadata as the last writer of this embedded store left it (None: a Chroma
        server, or an index written before state files). Re-read only when the file changed."""
        if self.settings.chroma_host:
            return None
        path = self.state_path
        try:
            st = os.stat(path)
        except OSError:
            return None
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        cached = _STATES.get(str(path))
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        _STATES[str(path)] = (key, state)
        return state

    def _write_state(self, meta: dict) -> None:
        if self.settings.chroma_host:
            return
        path = self.state_path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)

    def snapshot(self) -> Snapshot | None:
        """The snapshot of the last complete ingest, when the state file names one (loaded once per
        process and ingest); None while an ingest runs, for a Chroma server, or an older index."""
        state = self._state()
        stamp = (state or {}).get(META_FINGERPRINT)
        if not stamp:
            return None
        key = str(self.snapshot_path)
        snap = _SNAPSHOTS.get(key)
        if snap is not None and snap.stamp == stamp:
            return snap
        with _FILES_LOCK:
            snap = _SNAPSHOTS.get(key)
            if snap is None or snap.stamp != stamp:
                snap = Snapshot.load(self.snapshot_path, stamp)
                if snap is None:
                    return None
                _SNAPSHOTS[key] = snap
        return snap

    def adopt(self) -> None:
        """An embedded index written before state files: give it one, and its snapshot when its
        last ingest completed (call under the ingest lock)."""
        if self.settings.chroma_host or self._state() is not None:
            return
        meta = self._chroma_metadata()
        if meta.get(META_FINGERPRINT):
            self.write_snapshot(meta[META_FINGERPRINT])
        self._write_state(meta)

    def write_snapshot(self, stamp: str) -> None:
        """Write the snapshot of what Chroma holds now (an ingest that completes calls this)."""
        if self.settings.chroma_host:
            return
        by_kind = {kind: self._chroma_chunks((kind,), embeddings=True) for kind in KINDS}
        Snapshot.from_hits(stamp, by_kind).save(self.snapshot_path)

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
        snap = self.snapshot()
        if snap is not None:  # a stat() of the state file: no Chroma
            changed = shared.seen not in (None, snap.stamp)
            shared.seen = snap.stamp
            return changed
        if shared.seen not in (None, LIVE):  # an ingest began since the snapshot: Chroma, reloaded
            shared.stale = True
        shared.seen = LIVE
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
        meta = self._chroma_metadata()
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
            self._write_state(meta)  # after Chroma: a state file never runs ahead of the index

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
        """The index's own metadata (backend, last ingest, corpus fingerprint, generation): from the
        state file where this embedded store has one, else read fresh from Chroma."""
        state = self._state()
        if state is not None:
            return dict(state)
        return self._chroma_metadata()

    def _chroma_metadata(self) -> dict:
        """The metadata on the text collection, read fresh: a cached handle's metadata is a snapshot."""
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
        state = self._state()
        if state is not None:
            # the state file mirrors Chroma's metadata; a complete ingest also left its snapshot
            # and Chroma's own file (a deleted data folder is no index)
            done = state.get(META_FINGERPRINT)
            return done if done and (self.path / "chroma.sqlite3").exists() else None
        try:
            meta = self.metadata()
            for kind in KINDS[1:]:
                self.collection(kind)  # all four must exist for the index to be complete
        except IndexMissing:
            return None
        return meta.get(META_FINGERPRINT)

    def mark_ingested(self, stats: dict, fingerprint: str | None = None) -> None:
        if fingerprint:
            self.write_snapshot(fingerprint)  # before the state names it: readers never miss it
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
        if not self.settings.chroma_host:  # readers stop using the old snapshot before it goes
            for path in (self.state_path, self.snapshot_path):
                path.unlink(missing_ok=True)
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
        snap = self.snapshot()
        if snap is not None:
            return snap.query(embedding, k, kind, documents)
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

    def search(self, embedding: list[float], depths: dict[str, int]) -> dict[str, list[Hit]]:
        """One search per kind (ids and metadata only): in the snapshot one after another (about a
        millisecond each), in Chroma at once on a thread pool (its searches release the GIL or wait
        on the network: four at once take about the time of two)."""
        snap = self.snapshot()
        if snap is not None:
            return {kind: snap.query(embedding, k, kind, False) for kind, k in depths.items()}
        futures = {kind: self._pool.submit(self.query, embedding, k, kind, False) for kind, k in depths.items()}
        return {kind: f.result() for kind, f in futures.items()}

    @cached_property
    def _pool(self):
        from concurrent.futures import ThreadPoolExecutor

        return ThreadPoolExecutor(max_workers=len(KINDS), thread_name_prefix="jaxmem-search")

    def all_chunks(self, kinds: tuple[str, ...] = KINDS, embeddings: bool = False) -> list[Hit]:
        snap = self.snapshot()
        if snap is not None:
            return snap.all_chunks(kinds, embeddings)
        return self._chroma_chunks(kinds, embeddings)

    def _chroma_chunks(self, kinds: tuple[str, ...], embeddings: bool) -> list[Hit]:
        hits = []
        include = ["documents", "metadatas"] + (["embeddings"] if embeddings else [])
        for kind in kinds:
            got = self._wrap(self.collection(kind).get, include=include)
            vectors = got["embeddings"] if embeddings else [None] * len(got["ids"])
            hits += [Hit(i, d, m, 0.0, None if v is None else list(v))
                     for i, d, m, v in zip(got["ids"], got["documents"], got["metadatas"], vectors)]
        return hits
