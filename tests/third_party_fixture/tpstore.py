"""``tp:///path/to/file.db``: a third-party chatkeep backend on one SQLite file.

Shared between processes and durable (SQLite's file locking and transactions do the work),
with delete, paged listing and close.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

from chatkeep.core import Record, hookimpl

_SCHEMA = """
CREATE TABLE IF NOT EXISTS log (
    position INTEGER PRIMARY KEY AUTOINCREMENT,
    session TEXT NOT NULL,
    record_id TEXT NOT NULL,
    data BLOB NOT NULL,
    UNIQUE (session, record_id)
);
CREATE INDEX IF NOT EXISTS log_by_session ON log (session, position);
"""


class TPStore:
    """Sessions as rows of one table, ordered by an autoincrementing position."""

    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"shared", "durable", "delete", "list_sessions", "close"}
    )
    page_size = 64

    def __init__(self, path: str) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
        with self._lock:
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._db.executescript(_SCHEMA)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> TPStore:
        """``tp:///absolute/path.db``."""
        return cls(url.split("://", 1)[1], **options)

    def append(self, session_id: str, records: list[Record]) -> None:
        rows = [(session_id, record.id, record.data) for record in records]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                # OR IGNORE: a retried batch whose records already landed adds nothing.
                self._db.executemany(
                    "INSERT OR IGNORE INTO log (session, record_id, data) VALUES (?, ?, ?)", rows
                )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        with self._lock:
            self._db.execute("BEGIN")
            try:
                if start < 0 or (stop is not None and stop < 0):
                    (length,) = self._db.execute(
                        "SELECT count(*) FROM log WHERE session = ?", (session_id,)
                    ).fetchone()
                    start, stop, _ = slice(start, stop).indices(length)
                limit = -1 if stop is None else max(stop - start, 0)
                rows = self._db.execute(
                    "SELECT record_id, data FROM log WHERE session = ? "
                    "ORDER BY position LIMIT ? OFFSET ?",
                    (session_id, limit, start),
                ).fetchall()
            finally:
                self._db.execute("COMMIT")
        return [Record(record_id, bytes(data)) for record_id, data in rows]

    def delete(self, session_id: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM log WHERE session = ?", (session_id,))

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        prefix = prefix or ""
        after = None
        while True:
            with self._lock:
                page = self._db.execute(
                    "SELECT DISTINCT session FROM log WHERE substr(session, 1, ?) = ? "
                    "AND (? IS NULL OR session > ?) ORDER BY session LIMIT ?",
                    (len(prefix), prefix, after, after, self.page_size),
                ).fetchall()
            yield from (session for (session,) in page)
            if len(page) < self.page_size:
                return
            after = page[-1][0]

    def close(self) -> None:
        with self._lock:
            self._db.close()


@hookimpl
def chatkeep_register_backends(register: Any) -> None:
    """Make ``tp://`` URLs open a :class:`TPStore`."""
    register("tp", TPStore, schemes=["tp"], description="third-party SQLite file store")
