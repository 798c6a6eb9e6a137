"""Where verification records live: the shared database, and the evidence committed with the corpus.

Runs: one row per (topic, key) in the `evidence` table of the one database (`ingest.db`; a SQLite
file in the data directory by default, PostgreSQL shared by replicas and Ray workers). The key
covers the snippet hash (pair files + probe version), jax and jaxlib versions, backend and device
kind, so a record is reused until one of those changes, and a run on a GPU worker is seen by every
replica. Evidence: `corpus/evidence/<name>.json`, written by `jaxmem verify --all --record`, e.g.
`cpu.json`, or `gpu-<device>.json` from a GPU machine.
"""
from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path

from jaxmem.core.layout import writable_corpus
from jaxmem.core.settings import Settings

RUN = "measured run"  # origin of a record read from the database (shown as "[measured run, <date>]")


def cache_key(snippet_hash: str, jax: str, jaxlib: str, backend: str, device_kind: str) -> str:
    text = "|".join((snippet_hash, jax, jaxlib, backend, device_kind))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def evidence_dir(settings: Settings | None = None) -> Path:
    return (settings or Settings()).corpus_dir / "evidence"


def load_cached(topic: str, key: str, settings: Settings | None = None) -> dict | None:
    from sqlalchemy import select

    from jaxmem.core import db

    t = db.evidence
    with db.engine(settings).connect() as con:
        row = con.execute(select(t.c.record).where((t.c.topic == topic) & (t.c.key == key))).first()
    return dict(row[0]) if row else None


def save_cached(record: dict, settings: Settings | None = None) -> None:
    """Store a run (replacing an older one with the same key)."""
    from sqlalchemy import select

    from jaxmem.core import db

    t = db.evidence
    record = {k: v for k, v in record.items() if k != "origin"}
    values = dict(topic=record["topic"], key=record["key"], snippet_hash=record.get("snippet_hash", ""),
                  jax=record.get("jax"), backend=record.get("backend"), device_kind=record.get("device_kind"),
                  node=record.get("node"), date=record.get("date", ""), verdict=record.get("verdict"), record=record)
    with db.engine(settings).begin() as con:
        key = (t.c.topic == values["topic"]) & (t.c.key == values["key"])
        if con.execute(select(t.c.key).where(key)).first():
            con.execute(t.update().where(key).values(**values))
        else:
            con.execute(t.insert().values(**values))


def evidence_name(backend: str, device_kind: str) -> str:
    """`cpu.json` for CPU; `gpu-nvidia-h100-80gb-hbm3.json` and the like for accelerators."""
    if backend == "cpu":
        return "cpu.json"
    slug = re.sub(r"[^a-z0-9]+", "-", device_kind.lower()).strip("-") or "unknown"
    return f"{backend}-{slug}.json"


def write_evidence(records: list[dict], settings: Settings | None = None) -> Path:
    if not records:
        raise ValueError("no records to write as evidence")
    first = records[0]
    writable_corpus((settings or Settings()).corpus_dir, "`jaxmem verify --all --record`")
    path = evidence_dir(settings) / evidence_name(first["backend"], first["device_kind"])
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"backend": first["backend"], "device_kind": first["device_kind"],
            # `origin` says where a caller found a record (cache, evidence): not part of it.
            "records": {r["topic"]: {k: v for k, v in r.items() if k != "origin"}
                        for r in sorted(records, key=lambda r: r["topic"])}}
    path.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")
    return path


_parsed: dict[Path, tuple[tuple[int, int], object]] = {}


def _read_json(path: Path):
    """A JSON file, parsed once per version (mtime, size): every answer reads the evidence of
    three cards, and parsing the files each time cost more than a Chroma search."""
    st = path.stat()
    stamp = (st.st_mtime_ns, st.st_size)
    hit = _parsed.get(path)
    if hit is None or hit[0] != stamp:
        hit = _parsed[path] = (stamp, json.loads(path.read_text()))
    return hit[1]


def records_for(topic: str, settings: Settings | None = None) -> list[dict]:
    """Every stored record of `topic`, newest first; each says where it came from."""
    found: list[dict] = [{**r, "origin": RUN} for r in _stored_runs(topic, settings or Settings())]
    for path in sorted(evidence_dir(settings).glob("*.json")):
        try:
            record = _read_json(path).get("records", {}).get(topic)
        except (OSError, ValueError, AttributeError):
            continue
        if record:
            found.append({**record, "origin": f"recorded evidence ({path.name})"})
    return sorted(found, key=lambda r: r.get("date", ""), reverse=True)


_runs: dict[tuple[Path, str], tuple[tuple, list[dict]]] = {}


def _file_stamp(path: Path) -> tuple | None:
    """(mtime, size) of a SQLite file and of its write-ahead log: every write changes one of them."""
    try:
        st = path.stat()
    except OSError:
        return None
    wal = path.with_name(path.name + "-wal")
    wst = wal.stat() if wal.exists() else None
    return st.st_mtime_ns, st.st_size, wst and wst.st_mtime_ns, wst and wst.st_size


def _sqlite_runs(path: Path, topic: str) -> list[dict]:
    con = sqlite3.connect(path, timeout=15)
    try:
        rows = con.execute("SELECT record FROM evidence WHERE topic = ?", (topic,)).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
    finally:
        con.close()
    return [json.loads(r[0]) if isinstance(r[0], (str, bytes)) else dict(r[0]) for r in rows]


def _stored_runs(topic: str, settings: Settings) -> list[dict]:
    """The runs of `topic` in the database. The default database, a SQLite file, is read with the
    standard library: every answer reads the evidence of its cards, and SQLAlchemy's import cost a
    cold `jaxmem ask` 0.15 s. A file not yet there, or not yet migrated, holds no runs."""
    url = settings.database
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        stamp = _file_stamp(path)
        if stamp is None:
            return []
        hit = _runs.get((path, topic))
        if hit is None or hit[0] != stamp:  # read again only when the database (or its log) changed
            hit = _runs[(path, topic)] = (stamp, _sqlite_runs(path, topic))
        return [dict(r) for r in hit[1]]
    from sqlalchemy import select

    from jaxmem.core import db

    t = db.evidence
    with db.engine(settings).connect() as con:
        return [dict(r[0]) for r in con.execute(select(t.c.record).where(t.c.topic == topic)).all()]
