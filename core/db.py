"""The one database: feedback, verification evidence, and the ingest's record manager, chosen by
URL (JAXMEM_DATABASE_URL; default a SQLite file in the data directory, nothing to start).
PostgreSQL when several replicas share it (`postgresql+psycopg://user@host/db`).

Tables are defined here and created and changed only by Alembic migrations
(`core/migrations/`), run on first use of a URL in a process: a new version of jaxmem brings
its migration, and every replica runs it the same way. The record manager's own table belongs to
LangChain's `SQLRecordManager`, which creates it itself, in the same database.
"""
from __future__ import annotations

import hashlib
import re
import threading
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import JSON, Column, Index, MetaData, String, Table, Text, create_engine, event, text
from sqlalchemy.engine import Engine

from jaxmem.core.errors import StoreUnavailable
from jaxmem.core.settings import Settings

metadata = MetaData()

feedback = Table(
    "feedback", metadata,
    Column("answer_id", String(64), primary_key=True),
    Column("source", String(16), primary_key=True),     # web, slack: one row per answer and front end
    Column("rating", String(8), nullable=False),
    Column("comment", Text, nullable=False, default=""),
    Column("question", Text, nullable=False, default=""),
    Column("cards", JSON, nullable=False, default=list),
    Column("created", String(32), nullable=False),
    Column("updated", String(32), nullable=False),
)

evidence = Table(
    "evidence", metadata,
    Column("topic", String(128), primary_key=True),
    Column("key", String(64), primary_key=True),         # snippet hash, jax, jaxlib, backend, device kind
    Column("snippet_hash", String(64), nullable=False),
    Column("jax", String(32)),
    Column("backend", String(16)),
    Column("device_kind", String(128)),
    Column("node", String(128)),                         # where it ran: a host name or a Ray node id
    Column("date", String(32), nullable=False),
    Column("verdict", String(32)),
    Column("record", JSON, nullable=False),              # the whole verification record
    Index("evidence_topic_date", "topic", "date"),
)

_MIGRATIONS = Path(__file__).with_name("migrations")
_MIGRATION_LOCK = 0x6A61786D656D  # "jaxmem": the advisory lock id the migration holds
_engines: dict[str, Engine] = {}
_lock = threading.Lock()


def url_of(settings: Settings) -> str:
    return settings.database


def engine(settings: Settings | None = None, url: str | None = None) -> Engine:
    """The process's engine for a URL, migrated to the newest schema on first use."""
    settings = settings or Settings()
    url = url or url_of(settings)
    with _lock:
        if url not in _engines:
            _engines[url] = _migrated(_create(url, settings))
        return _engines[url]


def _create(url: str, settings: Settings) -> Engine:
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        eng = create_engine(url, connect_args={"timeout": 15})

        @event.listens_for(eng, "connect")
        def _pragmas(con, _record):  # readers and writers of several processes do not block each other
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
        return eng
    return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5)


def head_revision() -> str | None:
    """The newest migration's id, read from the migration files without importing Alembic (0.1 s
    of every cold command): the revision that no other names as its down_revision."""
    revisions, parents = set(), set()
    for path in (_MIGRATIONS / "versions").glob("*.py"):
        src = path.read_text(encoding="utf-8")
        rev = re.search(r'^revision\s*=\s*["\']([^"\']+)["\']', src, re.M)
        down = re.search(r'^down_revision\s*=\s*["\']([^"\']+)["\']', src, re.M)
        if rev:
            revisions.add(rev.group(1))
        if down:
            parents.add(down.group(1))
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None  # several heads: let Alembic decide (and complain)


def _at_head(eng: Engine) -> bool:
    head = head_revision()
    if head is None:
        return False
    try:
        with eng.connect() as con:
            return con.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == [head]
    except Exception:  # no table yet, or no server: the migration path below says which
        return False


def _migrated(eng: Engine) -> Engine:
    if _at_head(eng):  # the usual case: only the first process after an upgrade migrates
        return eng
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    try:
        with eng.begin() as con:
            if eng.dialect.name == "postgresql":
                # Replicas starting together: one migrates, the others wait for its commit and then
                # find the schema at head (PostgreSQL's DDL is transactional).
                con.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK})
            cfg.attributes["connection"] = con
            command.upgrade(cfg, "head")
    except Exception as exc:  # a server that is down, a URL that is wrong, a driver that is missing
        raise StoreUnavailable(
            f"cannot open the database {_safe(str(eng.url))} ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}).",
            "Check JAXMEM_DATABASE_URL (and that the server runs), or unset it for the SQLite file in the data "
            "directory.") from None
    return eng


@contextmanager
def exclusive(settings: Settings, name: str):
    """Hold the lock `name` against every process on every host that uses this PostgreSQL database
    (a session advisory lock: released when the block ends or the process dies with its
    connection). With SQLite it does nothing: that file is one machine's, and callers lock files."""
    if not url_of(settings).startswith("postgresql"):
        yield
        return
    key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
    with engine(settings).connect() as con:
        con.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
        con.commit()  # the lock is the session's: no transaction stays open while it is held
        try:
            yield
        finally:
            con.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
            con.commit()


def _safe(url: str) -> str:
    """The URL without its password, for messages."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "(unparsable URL)"
