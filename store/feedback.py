"""Users' ratings of answers, kept in one SQLite file under the data directory.

Every call opens its own connection and writes in one ``BEGIN IMMEDIATE`` transaction, with
the write-ahead log on and a busy timeout: the app, the HTTP server, the MCP server and the CLI
may write at the same time, from threads or processes, and none loses a rating. What is
committed survives a restart or a kill.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path

from core.errors import InputError, StoreError
from core.models import Feedback, FeedbackRecord, Rating

FILENAME = "feedback.sqlite3"
SCHEMA_VERSION = 1
BUSY_SECONDS = 30.0  # how long a writer waits for another's transaction

_SCHEMA = """
CREATE TABLE IF NOT EXISTS feedback (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created TEXT NOT NULL,
    updated TEXT NOT NULL,
    rating TEXT NOT NULL CHECK (rating IN ('up', 'down')),
    comment TEXT,
    question TEXT NOT NULL,
    standalone_question TEXT,
    answer TEXT NOT NULL,
    cited TEXT NOT NULL,
    abstained INTEGER NOT NULL,
    filters TEXT NOT NULL,
    provider TEXT,
    model TEXT,
    index_fingerprint TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS feedback_created ON feedback (created);
"""
_COLUMNS = (
    "id, created, updated, rating, comment, question, standalone_question, answer, cited, "
    "abstained, filters, provider, model, index_fingerprint"
)
_NAMES = [name.strip() for name in _COLUMNS.split(",")]


class FeedbackStore:
    """The ratings in ``data_dir/feedback.sqlite3`` (made on the first write)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILENAME

    @contextmanager
    def _connect(self, write: bool) -> Iterator[sqlite3.Connection]:
        try:
            if write:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            with closing(
                sqlite3.connect(self.path, timeout=BUSY_SECONDS, isolation_level=None)
            ) as db:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=FULL")  # a committed rating survives a crash
                if write:
                    db.execute("BEGIN IMMEDIATE")  # the write lock now: no upgrade deadlock
                    try:
                        self._migrate(db)
                        yield db
                        db.execute("COMMIT")
                    except BaseException:
                        if db.in_transaction:  # SQLite may have rolled back already
                            db.execute("ROLLBACK")
                        raise
                else:
                    self._check_version(db)
                    yield db
        except sqlite3.DatabaseError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise StoreError(
                    f"{self.path}: the feedback store stayed busy for {BUSY_SECONDS:.0f} s "
                    "(another process kept writing to it); try again."
                ) from exc
            raise StoreError(
                f"{self.path}: the feedback store cannot be used ({exc}). Check that the data "
                "directory is writable; a file that is not a SQLite database can be moved away."
            ) from exc
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot write the feedback store ({exc}).") from exc

    def _check_version(self, db: sqlite3.Connection) -> int:
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} was written by a newer abstract-qa (feedback schema {version}); "
                "upgrade abstract-qa to use it"
            )
        return version

    def _migrate(self, db: sqlite3.Connection) -> None:
        if self._check_version(db) < SCHEMA_VERSION:  # a new file: made in this same transaction
            for statement in filter(str.strip, _SCHEMA.split(";")):
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def add(self, feedback: Feedback, index: str) -> FeedbackRecord:
        """Store a rating of an answer given from the index with fingerprint ``index``."""
        now = _now()
        with self._connect(write=True) as db:
            cursor = db.execute(
                f"INSERT INTO feedback ({_COLUMNS.removeprefix('id, ')}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    now,
                    now,
                    feedback.rating,
                    (feedback.comment or "").strip() or None,
                    feedback.question,
                    feedback.standalone_question,
                    feedback.answer,
                    json.dumps(feedback.cited),
                    int(feedback.abstained),
                    feedback.filters.model_dump_json(),
                    feedback.provider,
                    feedback.model,
                    index,
                ),
            )
            row_id = cursor.lastrowid
            assert row_id is not None
            return _record(db.execute(f"SELECT {_COLUMNS} FROM feedback WHERE id = ?", (row_id,)))

    def change(
        self, feedback_id: int, rating: Rating | None = None, comment: str | None = None
    ) -> FeedbackRecord:
        """A rating changed (the other thumb) or a comment added or replaced ("" removes it)."""
        with self._connect(write=True) as db:
            found = db.execute(f"SELECT {_COLUMNS} FROM feedback WHERE id = ?", (feedback_id,))
            if found.fetchone() is None:
                raise InputError(f"No rating #{feedback_id} in {self.path}.")
            if rating is not None:
                db.execute("UPDATE feedback SET rating = ? WHERE id = ?", (rating, feedback_id))
            if comment is not None:
                text = comment.strip() or None
                db.execute("UPDATE feedback SET comment = ? WHERE id = ?", (text, feedback_id))
            db.execute("UPDATE feedback SET updated = ? WHERE id = ?", (_now(), feedback_id))
            return _record(
                db.execute(f"SELECT {_COLUMNS} FROM feedback WHERE id = ?", (feedback_id,))
            )

    def remove(self, feedback_id: int) -> None:
        """A rating taken back (the thumb clicked again)."""
        with self._connect(write=True) as db:
            db.execute("DELETE FROM feedback WHERE id = ?", (feedback_id,))

    def all(self) -> list[FeedbackRecord]:
        """Every rating, oldest first (none when nothing was rated yet)."""
        if not self.path.exists():
            return []
        with self._connect(write=False) as db:
            if not self._check_version(db):
                return []
            cursor = db.execute(f"SELECT {_COLUMNS} FROM feedback ORDER BY id")
            return [_parse(row) for row in cursor.fetchall()]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _record(cursor: sqlite3.Cursor) -> FeedbackRecord:
    return _parse(cursor.fetchone())


def _parse(row: tuple[object, ...]) -> FeedbackRecord:
    values = dict(zip(_NAMES, row, strict=True))
    values["cited"] = json.loads(str(values["cited"]))
    values["filters"] = json.loads(str(values["filters"]))
    values["abstained"] = bool(values["abstained"])
    values["index"] = values.pop("index_fingerprint")
    return FeedbackRecord.model_validate(values)
