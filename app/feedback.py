"""Durable answer feedback (thumbs up/down + optional comment), shared by the web chat and Slack.

In the one database (`ingest.db`: a SQLite file in the data directory by default, PostgreSQL when
replicas share it). One row per (answer, front end): a user who changes their mind updates their
row instead of adding a second vote. Each call is one transaction, so a write that returned is
durable (tests kill a writer right after it).

    record("a1b2", "down", "cites the wrong card", source="web", question="...", cards=["gpu-preallocation"])
    export()       -> [{"answer_id": ..., "rating": "down", ...}, ...]   newest first
    export_csv()   -> the same rows as CSV text
"""
from __future__ import annotations

import csv
import io
import time
from collections.abc import Iterable
from pathlib import Path

from sqlalchemy import select

from jaxmem.core import db
from jaxmem.core.errors import UsageError
from jaxmem.core.settings import Settings

RATINGS = ("up", "down")
SOURCES = ("web", "slack")
MAX_COMMENT_CHARS = 4_000
MAX_QUESTION_CHARS = 4_000  # enough to recognise the question; a 1 MB paste is not worth keeping
FIELDS = ("answer_id", "source", "rating", "comment", "question", "cards", "created", "updated")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class FeedbackStore:
    def __init__(self, where: Path | str, settings: Settings | None = None):
        """`where`: a database URL, or the path of a SQLite file."""
        self.url = where if isinstance(where, str) and "://" in where else f"sqlite:///{Path(where)}"
        self.settings = settings

    @classmethod
    def default(cls, settings: Settings | None = None) -> FeedbackStore:
        settings = settings or Settings()
        return cls(db.url_of(settings), settings)

    @property
    def path(self) -> Path | None:
        """The SQLite file, when the database is one."""
        return Path(self.url.removeprefix("sqlite:///")) if self.url.startswith("sqlite:///") else None

    @property
    def _engine(self):
        return db.engine(self.settings, self.url)

    def record(self, answer_id: str, rating: str, comment: str = "", *, source: str = "web",
               question: str = "", cards: Iterable[str] = ()) -> None:
        answer_id = str(answer_id or "").strip()
        if not answer_id:
            raise UsageError("feedback needs an answer id; got an empty one.",
                             "Pass the id of the answer being rated.")
        if rating not in RATINGS:
            raise UsageError(f"feedback rating {rating!r} is not valid.", f"Valid ratings: {', '.join(RATINGS)}.")
        if source not in SOURCES:
            raise UsageError(f"feedback source {source!r} is not valid.", f"Valid sources: {', '.join(SOURCES)}.")
        comment = (comment or "").strip()
        if len(comment) > MAX_COMMENT_CHARS:
            raise UsageError(f"the comment has {len(comment):,} characters; at most {MAX_COMMENT_CHARS:,} are kept.",
                             "Shorten it.")
        now, t = _now(), db.feedback
        with self._engine.begin() as con:
            key = (t.c.answer_id == answer_id) & (t.c.source == source)
            if con.execute(select(t.c.answer_id).where(key)).first():
                con.execute(t.update().where(key).values(rating=rating, comment=comment, updated=now))
            else:
                con.execute(t.insert().values(answer_id=answer_id, source=source, rating=rating, comment=comment,
                                              question=(question or "")[:MAX_QUESTION_CHARS], cards=list(cards),
                                              created=now, updated=now))

    def get(self, answer_id: str, source: str = "web") -> dict | None:
        t = db.feedback
        with self._engine.connect() as con:
            row = con.execute(select(t).where((t.c.answer_id == answer_id) & (t.c.source == source))).mappings().first()
        return dict(row) if row else None

    def export(self) -> list[dict]:
        """Every rating, newest change first; `cards` as a list."""
        if self.path is not None and not self.path.exists():
            return []  # nothing rated yet: reading creates no database
        t = db.feedback
        with self._engine.connect() as con:
            rows = con.execute(select(t).order_by(t.c.updated.desc(), t.c.created.desc())).mappings().all()
        return [{**r, "cards": list(r["cards"] or [])} for r in rows]

    def export_csv(self) -> str:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=FIELDS)
        writer.writeheader()
        for row in self.export():
            writer.writerow({**row, "cards": " ".join(row["cards"])})
        return out.getvalue()


# Module-level shortcuts on the default location, for front ends that hold no store object.
def record(answer_id: str, rating: str, comment: str = "", *, source: str = "web", question: str = "",
           cards: Iterable[str] = (), settings: Settings | None = None) -> None:
    FeedbackStore.default(settings).record(answer_id, rating, comment, source=source, question=question, cards=cards)


def export(settings: Settings | None = None) -> list[dict]:
    return FeedbackStore.default(settings).export()


def export_csv(settings: Settings | None = None) -> str:
    return FeedbackStore.default(settings).export_csv()
