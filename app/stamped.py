"""Derived indexes saved next to the store, stamped with the corpus fingerprint they reflect.

A cold `jaxmem ask` would otherwise rebuild them from every chunk in Chroma (0.5 s for BM25). A
file whose stamp differs from the store's fingerprint is ignored and rebuilt, so an ingest never
has to know about them.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np


def save(path: Path, stamp: str, meta: dict, arrays: dict[str, np.ndarray]) -> None:
    """Write atomically (a reader sees the old file or the new one, never half of one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    blob = json.dumps({"stamp": stamp, **meta}, ensure_ascii=False).encode("utf-8")
    with open(tmp, "wb") as f:
        np.savez(f, meta=np.frombuffer(blob, dtype=np.uint8), **arrays)
    os.replace(tmp, path)


def load(path: Path, stamp: str) -> tuple[dict, dict[str, np.ndarray]] | None:
    """(meta, arrays), or None when the file is missing, unreadable or from another ingest."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(z["meta"].tobytes().decode("utf-8"))
            if meta.get("stamp") != stamp:
                return None
            return meta, {k: z[k] for k in z.files if k != "meta"}
    except (OSError, ValueError, KeyError):
        return None
