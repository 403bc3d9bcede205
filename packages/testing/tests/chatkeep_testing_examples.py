"""Backends for testing the conformance suite itself: correct ones, which must pass, and
deliberately broken ones, each with one realistic bug the suite must catch.

Registered at run time by ``conftest.py`` (and re-registered by name in the suite's worker
processes), never through an entry point, so they exist only in these tests.
"""

from __future__ import annotations

import fnmatch
import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

from chatkeep.core import Record, hookimpl

# -- an in-memory backend, and faults injected into it -----------------------------------


class DictStore:
    """A correct, private, in-memory store (like ``memory://``)."""

    capabilities: ClassVar[frozenset[str]] = frozenset({"delete", "list_sessions", "close"})

    def __init__(self, url: str | None = None) -> None:
        self.lock = threading.Lock()
        self.logs: dict[str, list[Record]] = {}
        self.ids: dict[str, set[str]] = {}

    def key(self, session_id: str) -> str:
        return session_id

    def stored(self, data: bytes) -> bytes:
        return data

    def append(self, session_id: str, records: list[Record]) -> None:
        with self.lock:
            key = self.key(session_id)
            ids = self.ids.setdefault(key, set())
            fresh = [Record(r.id, self.stored(r.data)) for r in records if r.id not in ids]
            self.logs.setdefault(key, []).extend(fresh)
            ids.update(r.id for r in fresh)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        with self.lock:
            return list(self.logs.get(self.key(session_id), [])[start:stop])

    def delete(self, session_id: str) -> None:
        with self.lock:
            self.logs.pop(self.key(session_id), None)
            self.ids.pop(self.key(session_id), None)

    def matches(self, name: str, prefix: str | None) -> bool:
        return prefix is None or name.startswith(prefix)

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        with self.lock:
            names = sorted(self.logs)
        for name in names:
            if self.matches(name, prefix):
                yield name

    def close(self) -> None:
        pass


class NegativeStartIgnored(DictStore):
    """Bug: a negative ``start`` is treated as 0 (the whole log instead of a tail)."""

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        return super().read(session_id, max(start, 0), stop)


class DuplicatesOnRetry(DictStore):
    """Bug: no record-id index, so a retried batch is stored twice."""

    def append(self, session_id: str, records: list[Record]) -> None:
        with self.lock:
            self.logs.setdefault(session_id, []).extend(records)


class DropsAfterNul(DictStore):
    """Bug: payloads are handled as C strings, losing everything from the first NUL."""

    def stored(self, data: bytes) -> bytes:
        return data.split(b"\x00", 1)[0]


class CaseInsensitiveIds(DictStore):
    """Bug: session ids are case-folded (as on a case-insensitive file system)."""

    def key(self, session_id: str) -> str:
        return session_id.casefold()


class ReturnsInternalList(DictStore):
    """Bug: a full read returns the stored list itself, so callers can corrupt it."""

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        if start == 0 and stop is None:
            with self.lock:
                log = self.logs.get(session_id)
            if log is not None:
                return log
        return super().read(session_id, start, stop)


class GlobPrefix(DictStore):
    """Bug: the listing prefix is used as a glob pattern, so ``*``, ``?`` and ``[`` match."""

    def matches(self, name: str, prefix: str | None) -> bool:
        return prefix is None or fnmatch.fnmatchcase(name, prefix + "*")


class DeleteByPrefix(DictStore):
    """Bug: delete removes every session whose id starts with the given one."""

    def delete(self, session_id: str) -> None:
        with self.lock:
            for name in [n for n in self.logs if n.startswith(session_id)]:
                self.logs.pop(name, None)
                self.ids.pop(name, None)


class StickyIdsAfterDelete(DictStore):
    """Bug: delete forgets the records but not their ids, so re-used ids are dropped."""

    def delete(self, session_id: str) -> None:
        with self.lock:
            self.logs.pop(session_id, None)


# -- a shared, durable backend on a SQLite file, and a non-atomic variant ---------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session TEXT NOT NULL,
    id TEXT NOT NULL,
    data BLOB NOT NULL,
    UNIQUE (session, id)
);
CREATE INDEX IF NOT EXISTS records_by_session ON records (session, seq);
"""


class SQLiteFileStore:
    """A correct store on a SQLite file (``sqlfile:///path/to.db``): shared and durable."""

    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"delete", "list_sessions", "close", "shared", "durable"}
    )
    page_size = 100

    def __init__(self, path: str) -> None:
        self.lock = threading.Lock()
        self.db = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
        with self.lock:
            # Durable across close and reopen (what "durable" promises) but without an
            # fsync per commit: these tests need speed, not power-loss safety.
            self.db.execute("PRAGMA synchronous = OFF")
            self.db.executescript(_SCHEMA)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> SQLiteFileStore:
        return cls(url.split("://", 1)[1], **options)

    def insert(self, session_id: str, records: list[Record]) -> None:
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.executemany(
                    "INSERT OR IGNORE INTO records (session, id, data) VALUES (?, ?, ?)",
                    [(session_id, r.id, r.data) for r in records],
                )
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    def append(self, session_id: str, records: list[Record]) -> None:
        self.insert(session_id, records)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        with self.lock:
            self.db.execute("BEGIN")
            try:
                if start < 0 or (stop is not None and stop < 0):
                    (count,) = self.db.execute(
                        "SELECT count(*) FROM records WHERE session = ?", (session_id,)
                    ).fetchone()
                    start, stop, _ = slice(start, stop).indices(count)
                limit = -1 if stop is None else max(stop - start, 0)
                rows = self.db.execute(
                    "SELECT id, data FROM records WHERE session = ? ORDER BY seq LIMIT ? OFFSET ?",
                    (session_id, limit, start),
                ).fetchall()
            finally:
                self.db.execute("COMMIT")
        return [Record(rid, bytes(data)) for rid, data in rows]

    def delete(self, session_id: str) -> None:
        with self.lock:
            self.db.execute("DELETE FROM records WHERE session = ?", (session_id,))

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        prefix = prefix or ""
        last: str | None = None
        while True:
            with self.lock:
                rows = self.db.execute(
                    "SELECT DISTINCT session FROM records WHERE substr(session, 1, ?) = ? "
                    "AND (? IS NULL OR session > ?) ORDER BY session LIMIT ?",
                    (len(prefix), prefix, last, last, self.page_size),
                ).fetchall()
            for (name,) in rows:
                yield name
            if len(rows) < self.page_size:
                return
            last = rows[-1][0]

    def close(self) -> None:
        with self.lock:
            self.db.close()


class NonAtomicSQLiteFileStore(SQLiteFileStore):
    """Bug: each record of a batch is committed on its own, so batches can interleave and
    readers can see half of one."""

    def append(self, session_id: str, records: list[Record]) -> None:
        for record in records:
            self.insert(session_id, [record])
            time.sleep(0.002)


BROKEN = {
    "negstart": NegativeStartIgnored,
    "retrydup": DuplicatesOnRetry,
    "nuldrop": DropsAfterNul,
    "caseids": CaseInsensitiveIds,
    "aliasing": ReturnsInternalList,
    "globprefix": GlobPrefix,
    "prefixdelete": DeleteByPrefix,
    "stickyids": StickyIdsAfterDelete,
    "sqlfile-nonatomic": NonAtomicSQLiteFileStore,
}


@hookimpl
def chatkeep_register_backends(register: Any) -> None:
    register("dict", DictStore, schemes=["dict"], description="test: correct, in memory")
    register("sqlfile", SQLiteFileStore, schemes=["sqlfile"], description="test: SQLite file")
    for name, factory in BROKEN.items():
        register(name, factory, schemes=[name], description=f"test: broken ({factory.__doc__})")
