"""Durable answer feedback (thumbs up/down + optional comment), shared by the web chat and Slack.

One SQLite file, `Settings().data_dir / "feedback.sqlite"`. One row per (answer, front end): a
user who changes their mind updates their row instead of adding a second vote. Every call opens
its own connection, because Streamlit runs each session in its own thread and the Slack bot
writes from another process; WAL mode lets those readers and writers not block each other.

    record("a1b2", "down", "cites the wrong card", source="web", question="...", cards=["gpu-preallocation"])
    export()       -> [{"answer_id": ..., "rating": "down", ...}, ...]   newest first
    export_csv()   -> the same rows as CSV text
"""
from __future__ import annotations

import csv
import io
import json
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path

from ingest.config import Settings
from ingest.errors import UsageError

RATINGS = ("up", "down")
SOURCES = ("web", "slack")
MAX_COMMENT_CHARS = 4_000
MAX_QUESTION_CHARS = 4_000  # enough to recognise the question; a 1 MB paste is not worth keeping
FIELDS = ("answer_id", "source", "rating", "comment", "question", "cards", "created", "updated")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS feedback (
    answer_id TEXT NOT NULL,
    source    TEXT NOT NULL,
    rating    TEXT NOT NULL,
    comment   TEXT NOT NULL DEFAULT '',
    question  TEXT NOT NULL DEFAULT '',
    cards     TEXT NOT NULL DEFAULT '[]',
    created   TEXT NOT NULL,
    updated   TEXT NOT NULL,
    PRIMARY KEY (answer_id, source)
)
"""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class FeedbackStore:
    def __init__(self, path: Path):
        self.path = Path(path)

    @classmethod
    def default(cls, settings: Settings | None = None) -> FeedbackStore:
        return cls((settings or Settings()).data_dir / "feedback.sqlite")

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(self.path, timeout=10)
        con.row_factory = sqlite3.Row
        con.execute("PRAGMA journal_mode=WAL")
        con.execute(_SCHEMA)
        return con

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
        now = _now()
        with self._connect() as con:
            con.execute(
                "INSERT INTO feedback (answer_id, source, rating, comment, question, cards, created, updated) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(answer_id, source) DO UPDATE SET rating=excluded.rating, "
                "comment=excluded.comment, updated=excluded.updated",
                (answer_id, source, rating, comment, (question or "")[:MAX_QUESTION_CHARS],
                 json.dumps(list(cards)), now, now))
        con.close()

    def get(self, answer_id: str, source: str = "web") -> dict | None:
        with self._connect() as con:
            row = con.execute("SELECT * FROM feedback WHERE answer_id = ? AND source = ?",
                              (answer_id, source)).fetchone()
        con.close()
        return _row(row) if row else None

    def export(self) -> list[dict]:
        """Every rating, newest change first; `cards` as a list."""
        if not self.path.exists():
            return []
        with self._connect() as con:
            rows = con.execute("SELECT * FROM feedback ORDER BY updated DESC, rowid DESC").fetchall()
        con.close()
        return [_row(r) for r in rows]

    def export_csv(self) -> str:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=FIELDS)
        writer.writeheader()
        for row in self.export():
            writer.writerow({**row, "cards": " ".join(row["cards"])})
        return out.getvalue()


def _row(row: sqlite3.Row) -> dict:
    d = dict(row)
    d["cards"] = json.loads(d.get("cards") or "[]")
    return d


# Module-level shortcuts on the default location, for front ends that hold no store object.
def record(answer_id: str, rating: str, comment: str = "", *, source: str = "web", question: str = "",
           cards: Iterable[str] = (), settings: Settings | None = None) -> None:
    FeedbackStore.default(settings).record(answer_id, rating, comment, source=source, question=question, cards=cards)


def export(settings: Settings | None = None) -> list[dict]:
    return FeedbackStore.default(settings).export()


def export_csv(settings: Settings | None = None) -> str:
    return FeedbackStore.default(settings).export_csv()
