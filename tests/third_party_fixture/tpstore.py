"""``tp:///path/to/file.db``: a third-party chatkeep backend on one SQLite file.

The complete example of core/BACKENDS.md (a test keeps the two identical). Shared between
processes and durable (SQLite's file locking and transactions do the work), with delete,
paged listing and close; it passes the conformance suite at level ``full``.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

from chatkeep.core.backend import (
    CLOSE,
    DELETE,
    DURABLE,
    LIST_SESSIONS,
    SHARED,
    InvalidOption,
    Record,
    RecordConflict,
    hookimpl,
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session TEXT PRIMARY KEY,
    length INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS log (
    session TEXT NOT NULL,
    position INTEGER NOT NULL,
    record_id TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (session, position),
    UNIQUE (session, record_id)
) WITHOUT ROWID;
"""


class TPStore:
    """Sessions as rows of one table, at dense positions; their lengths in another."""

    capabilities: ClassVar[frozenset[str]] = frozenset(
        {SHARED, DURABLE, DELETE, LIST_SESSIONS, CLOSE}
    )
    page_size = 64

    def __init__(self, path: str) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
        with self._lock:
            self._db.execute("PRAGMA synchronous = FULL")  # durable: survives power loss
            self._db.executescript(_SCHEMA)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> TPStore:
        """``tp:///relative/path.db`` or ``tp:////absolute/path.db``; no options."""
        rest = url.split("://", 1)[1]
        path, _, query = rest.partition("?")
        if query or options:
            unknown = sorted({*options, *(p.split("=", 1)[0] for p in query.split("&") if p)})
            raise InvalidOption(f"tp:// takes no options (got {', '.join(unknown)})")
        path = path[1:] if path.startswith("/") else path
        if not path:
            raise InvalidOption("tp:// needs a file path: tp:///chats.db")
        return cls(path)

    def _length(self, session_id: str) -> int:
        row = self._db.execute(
            "SELECT length FROM sessions WHERE session = ?", (session_id,)
        ).fetchone()
        return 0 if row is None else int(row[0])

    def append(self, session_id: str, records: list[Record]) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                marks = ",".join("?" * len(records))
                stored = dict(
                    self._db.execute(
                        f"SELECT record_id, data FROM log WHERE session = ? "
                        f"AND record_id IN ({marks})",
                        (session_id, *(r.id for r in records)),
                    ).fetchall()
                )
                for record in records:
                    if record.id in stored and bytes(stored[record.id]) != record.data:
                        raise RecordConflict(session_id, record.id)
                # Already stored with the same data: a retry, skipped. The rest is new.
                fresh = [r for r in records if r.id not in stored]
                length = self._length(session_id)
                self._db.executemany(
                    "INSERT INTO log (session, position, record_id, data) VALUES (?, ?, ?, ?)",
                    [(session_id, length + n, r.id, r.data) for n, r in enumerate(fresh)],
                )
                self._db.execute(
                    "INSERT INTO sessions (session, length) VALUES (?, ?) "
                    "ON CONFLICT (session) DO UPDATE SET length = excluded.length",
                    (session_id, length + len(fresh)),
                )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        with self._lock:
            self._db.execute("BEGIN")
            try:
                first, end, _ = slice(start, stop).indices(self._length(session_id))
                rows = self._db.execute(
                    "SELECT record_id, data FROM log WHERE session = ? "
                    "AND position >= ? AND position < ? ORDER BY position",
                    (session_id, first, end),
                ).fetchall()
            finally:
                self._db.execute("COMMIT")
        return [Record(record_id, bytes(data)) for record_id, data in rows]

    def delete(self, session_id: str) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("DELETE FROM log WHERE session = ?", (session_id,))
            self._db.execute("DELETE FROM sessions WHERE session = ?", (session_id,))
            self._db.execute("COMMIT")

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        prefix = prefix or ""
        after = None
        while True:
            with self._lock:
                page = self._db.execute(
                    "SELECT session FROM sessions WHERE substr(session, 1, ?) = ? "
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
