"""Backends for testing the conformance suite itself: correct ones, which must pass, and
deliberately broken ones, each with one realistic bug the suite must catch.

Registered at run time by ``conftest.py`` (and re-registered by name in the suite's worker
processes), never through an entry point, so they exist only in these tests.

``DictStore`` is a correct private in-memory store; ``SQLiteFileStore`` a correct store on
a SQLite file that declares every capability and implements every test hook of
``chatkeep.testing.hooks``. Each broken backend below changes one method of one of them.
"""

from __future__ import annotations

import atexit
import contextlib
import fnmatch
import heapq
import random
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qsl

from chatkeep.core.backend import (
    AppendConflict,
    CorruptRecord,
    InvalidOption,
    Record,
    RecordConflict,
    StoreUnavailable,
    check_namespace,
    hookimpl,
)
from chatkeep.core.memory import MemoryStore


def _split_url(url: str) -> tuple[str, dict[str, str]]:
    rest = url.split("://", 1)[1]
    path, _, query = rest.partition("?")
    return path, dict(parse_qsl(query, keep_blank_values=True))


def _refuse_unknown(options: dict[str, Any], known: set[str]) -> None:
    unknown = sorted(set(options) - known)
    if unknown:
        raise InvalidOption(f"unknown option(s) {', '.join(unknown)}")


# -- a correct in-memory backend, and faults injected into it --------------------------------


class DictStore:
    """A correct, private, in-memory store (like ``memory://``)."""

    capabilities: ClassVar[frozenset[str]] = frozenset({"delete", "list_sessions", "close"})
    known_options: ClassVar[set[str]] = set()

    def __init__(self, url: str | None = None, **options: Any) -> None:
        query = _split_url(url)[1] if url else {}
        self.check_options({**query, **options})
        self.lock = threading.Lock()
        self.logs: dict[str, list[Record]] = {}
        self.ids: dict[str, dict[str, bytes]] = {}

    def check_options(self, options: dict[str, Any]) -> None:
        _refuse_unknown(options, self.known_options)

    def key(self, session_id: str) -> str:
        return session_id

    def stored(self, data: bytes) -> bytes:
        return data

    def fresh(self, session_id: str, records: list[Record]) -> list[Record]:
        """The records of a batch not stored yet; RecordConflict for a changed one."""
        ids = self.ids.get(self.key(session_id), {})
        fresh = []
        for record in records:
            known = ids.get(record.id)
            if known is None:
                fresh.append(record)
            elif known != self.stored(record.data):
                raise RecordConflict(session_id, record.id)
        return fresh

    def append(self, session_id: str, records: list[Record]) -> None:
        with self.lock:
            fresh = self.fresh(session_id, records)
            key = self.key(session_id)
            stored = [Record(r.id, self.stored(r.data)) for r in fresh]
            self.logs.setdefault(key, []).extend(stored)
            self.ids.setdefault(key, {}).update((r.id, r.data) for r in stored)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        with self.lock:
            return list(self.logs.get(self.key(session_id), [])[start:stop])

    def delete(self, session_id: str) -> None:
        with self.lock:
            self.logs.pop(self.key(session_id), None)
            self.ids.pop(self.key(session_id), None)

    def matches(self, name: str, prefix: str | None) -> bool:
        return prefix is None or name.startswith(prefix)

    page = 100

    def after(self, name: str, last: str | None) -> bool:
        """Whether ``name`` belongs on the page that continues after ``last``."""
        return last is None or name > last

    def page_after(self, prefix: str | None, last: str | None) -> list[str]:
        """The next page of the listing: memory for a page, whatever the store holds (a
        scan of the dict, where a real store walks an index)."""
        with self.lock:
            return heapq.nsmallest(
                self.page,
                (n for n in self.logs if self.matches(n, prefix) and self.after(n, last)),
            )

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        last: str | None = None
        while True:
            page = self.page_after(prefix, last)
            yield from page
            if len(page) < self.page:
                return
            last = page[-1]

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


class SilentConflict(DictStore):
    """Bug: a stored id sent again with other data is dropped silently (no RecordConflict)."""

    def fresh(self, session_id: str, records: list[Record]) -> list[Record]:
        ids = self.ids.get(session_id, {})
        return [r for r in records if r.id not in ids]


class DropsMixedBatch(DictStore):
    """Bug: a batch in which any id is already stored is taken for a retry and skipped
    whole, losing its new records."""

    def fresh(self, session_id: str, records: list[Record]) -> list[Record]:
        fresh = super().fresh(session_id, records)
        return fresh if len(fresh) == len(records) else []


class TailReadScansLog(DictStore):
    """Bug: every read copies the whole log (as a client that fetches everything and
    slices locally), so a tail read costs the log's length."""

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        with self.lock:
            whole = [Record(r.id, bytes(r.data)) for r in self.logs.get(session_id, [])]
        return whole[start:stop]


class AppendScansLog(DictStore):
    """Bug: the duplicate check walks the whole log on every append (O(log), not O(batch))."""

    def fresh(self, session_id: str, records: list[Record]) -> list[Record]:
        stored = {r.id: r.data for r in list(self.logs.get(session_id, []))}
        fresh = []
        for record in records:
            if record.id not in stored:
                fresh.append(record)
            elif stored[record.id] != record.data:
                raise RecordConflict(session_id, record.id)
        return fresh


class LenientOptions(DictStore):
    """Bug: options the store does not know are silently accepted."""

    def check_options(self, options: dict[str, Any]) -> None:
        pass


class SkipsUndecodable(DictStore):
    """Bug: records that look like JSON but do not parse are "repaired" by leaving them out
    of reads, so damage is silent."""

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        import json

        def fine(record: Record) -> bool:
            if not record.data.startswith(b"{"):
                return True
            try:
                json.loads(record.data)
            except ValueError:
                return False
            return True

        return [r for r in super().read(session_id, start, stop) if fine(r)]


class TenMebibyteCap(DictStore):
    """Bug: the store stops accepting data at 10 MiB in total."""

    limit = 10 * 1024 * 1024

    def append(self, session_id: str, records: list[Record]) -> None:
        with self.lock:
            used = sum(len(r.data) for log in self.logs.values() for r in log)
        if used + sum(len(r.data) for r in records) > self.limit:
            raise StoreUnavailable("the store is full (10 MiB)")
        super().append(session_id, records)


class ShortPrefixCompare(DictStore):
    """Bug: listing prefixes are compared on their first 448 bytes only (a key-length limit
    of the index behind it)."""

    def matches(self, name: str, prefix: str | None) -> bool:
        if prefix is None:
            return True
        return name.encode()[:448].startswith(prefix.encode()[:448])


class PagedDictStore(DictStore):
    """A correct listing in pages of 100, resuming after the last id of a page (as
    ``DictStore`` does; the broken listings below derive from this one)."""


class PagesSkipExtensions(PagedDictStore):
    """Bug: the next page starts after the *upper bound* of the last id, as for a prefix,
    so ids that extend the last id of a page (``abc`` then ``abc-x``) are skipped."""

    def after(self, name: str, last: str | None) -> bool:
        return last is None or name > last + "\U0010ffff"


class PagesRepeatLast(PagedDictStore):
    """Bug: the next page starts *at* the last id of the previous one (``>=``), so every
    page boundary lists an id twice."""

    def after(self, name: str, last: str | None) -> bool:
        return last is None or name >= last


class PagesForgetPrefix(PagedDictStore):
    """Bug: pages after the first forget the prefix, so a listing runs on into the
    sessions that sort after it."""

    def page_after(self, prefix: str | None, last: str | None) -> list[str]:
        return super().page_after(prefix if last is None else None, last)


class EagerListing(PagedDictStore):
    """Bug: the listing gathers every page before yielding the first id (a list built
    from the pages, to sort or count it), so memory and the wait for the first id grow
    with the listing."""

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        return iter(list(super().list_sessions(prefix)))


class TiesByIdAscending(MemoryStore):
    """Bug (on the built-in memory store, which declares ``recent``): sessions whose last
    appends share one time are listed by id *ascending* (``ORDER BY updated_at DESC,
    session_id ASC``), while the keyset cursor still continues below the last pair, so
    pages ending inside a tie lose and repeat sessions."""

    def recent_sessions(
        self, prefix: str | None, before: tuple[float, str] | None, limit: int
    ) -> list[tuple[str, float]]:
        pairs = super().recent_sessions(prefix, before, 1 << 30)
        pairs.sort(key=lambda pair: (-pair[1], pair[0]))
        return pairs[:limit]


class FarTailRefused(DictStore):
    """Bug: a tail bound far longer than the log (but not extreme) is refused instead of
    reading the whole log (a SQL ``OFFSET`` computed as length + start, say)."""

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        if -(2**31) < start <= -(10**5):
            raise ValueError(f"negative offset {start}")
        return super().read(session_id, start, stop)


class WarmTailAfterDelete(DictStore):
    """Bug: a per-session tail cache (for cheap tail reads) survives delete."""

    def __init__(self, url: str | None = None, **options: Any) -> None:
        super().__init__(url, **options)
        self.tails: dict[str, list[Record]] = {}

    def append(self, session_id: str, records: list[Record]) -> None:
        super().append(session_id, records)
        self.tails.pop(session_id, None)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        if start < 0 and stop is None:
            cached = self.tails.get(session_id)
            if cached is not None and len(cached) >= -start:
                return list(cached[start:])
            got = super().read(session_id, start, stop)
            self.tails[session_id] = got
            return list(got)
        return super().read(session_id, start, stop)


class UnclampedTail(DictStore):
    """Bug: one log for all sessions, with the positions of each session's records in it;
    a tail bound beyond the session's start is not clamped, so ``read(s, -sys.maxsize)``
    reaches into the sessions written before it."""

    def __init__(self, url: str | None = None, **options: Any) -> None:
        super().__init__(url, **options)
        self.rows: list[tuple[str, Record]] = []
        self.where: dict[str, list[int]] = {}

    def append(self, session_id: str, records: list[Record]) -> None:
        with self.lock:
            fresh = self.fresh(session_id, records)
            places = self.where.setdefault(session_id, [])
            for record in fresh:
                places.append(len(self.rows))
                self.rows.append((session_id, record))
            self.logs.setdefault(session_id, []).extend(fresh)
            self.ids.setdefault(session_id, {}).update((r.id, r.data) for r in fresh)

    def delete(self, session_id: str) -> None:
        super().delete(session_id)
        with self.lock:
            self.where.pop(session_id, None)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        with self.lock:
            places = list(self.where.get(session_id, []))
        if not places or start >= -len(places) or stop is not None:
            return super().read(session_id, start, stop)
        with self.lock:
            low = max(places[0] + len(places) + start, 0)  # not clamped to the session
            return [
                record
                for place, (owner, record) in enumerate(self.rows)
                if low <= place <= places[-1] and (owner == session_id or place < places[0])
            ]


# -- a correct shared, durable backend on a SQLite file ----------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    ns TEXT NOT NULL,
    session TEXT NOT NULL,
    position INTEGER NOT NULL,
    id TEXT NOT NULL,
    data BLOB NOT NULL,
    written REAL NOT NULL,
    PRIMARY KEY (ns, session, position)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS records_by_id ON records (ns, session, id);
CREATE TABLE IF NOT EXISTS sessions (
    ns TEXT NOT NULL,
    session TEXT NOT NULL,
    length INTEGER NOT NULL,
    last_id TEXT,
    expires REAL,
    PRIMARY KEY (ns, session)
) WITHOUT ROWID;
"""

_SYNC = {"full": "FULL", "normal": "NORMAL", "off": "OFF"}


class SQLiteCore:
    """A correct store on a SQLite file (``sqlfile:///path/to.db?ttl=2&namespace=a``).

    Positions are dense per session and the length is kept in a table, so tail reads are
    O(what they return) and a missing record is detected; ``delete`` zeroes freed pages
    (``secure_delete``) and truncates the journal, so no byte of a deleted session stays.
    """

    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"delete", "list_sessions", "close", "shared", "durable", "ttl", "conditional", "namespace"}
    )
    page_size = 100
    secure_delete = True
    schema = _SCHEMA

    def __init__(
        self,
        path: str,
        *,
        namespace: str | None = None,
        ttl: float | None = None,
        synchronous: str = "full",
    ) -> None:
        self.path = path
        self.namespace = "" if namespace is None else check_namespace(namespace) + "/"
        if ttl is not None and (not isinstance(ttl, (int, float)) or ttl <= 0):
            raise InvalidOption(f"ttl must be a positive number of seconds, not {ttl!r}")
        self.ttl = None if ttl is None else float(ttl)
        if synchronous not in _SYNC:
            raise InvalidOption(f"synchronous must be one of {sorted(_SYNC)}")
        self.synchronous = synchronous
        self.lock = threading.RLock()
        self.db = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
        with self.lock:
            self.db.execute(f"PRAGMA synchronous = {_SYNC[synchronous]}")
            self.db.execute(f"PRAGMA secure_delete = {'ON' if self.secure_delete else 'OFF'}")
            self.db.executescript(self.schema)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> SQLiteCore:
        path, query = _split_url(url)
        merged: dict[str, Any] = {**query, **options}
        _refuse_unknown(merged, {"namespace", "ttl", "synchronous"})
        if isinstance(merged.get("ttl"), str):
            try:
                merged["ttl"] = float(merged["ttl"])
            except ValueError:
                raise InvalidOption(f"ttl must be seconds, not {merged['ttl']!r}") from None
        return cls(path, **merged)

    # -- helpers ---------------------------------------------------------------------------

    def now(self) -> float:
        return time.time()

    def alive(self, expires: float | None) -> bool:
        """Whether a session whose expiry is ``expires`` (``None``: never) is live."""
        return expires is None or self.now() < expires

    def expiry(self) -> float | None:
        """The expiry an append through this handle sets (its ``ttl`` from now)."""
        return None if self.ttl is None else self.now() + self.ttl

    def state(self, session_id: str) -> tuple[int, str | None]:
        """(length, last id) of a live session; an expired one is erased first."""
        row = self.db.execute(
            "SELECT length, last_id, expires FROM sessions WHERE ns = ? AND session = ?",
            (self.namespace, session_id),
        ).fetchone()
        if row is None:
            return 0, None
        if not self.alive(row[2]):
            self.erase(session_id)
            return 0, None
        return row[0], row[1]

    def erase(self, session_id: str) -> None:
        self.db.execute(
            "DELETE FROM records WHERE ns = ? AND session = ?", (self.namespace, session_id)
        )
        self.db.execute(
            "DELETE FROM sessions WHERE ns = ? AND session = ?", (self.namespace, session_id)
        )

    def fresh(self, session_id: str, records: list[Record]) -> list[Record]:
        marks = ",".join("?" * len(records))
        stored = dict(
            self.db.execute(
                f"SELECT id, data FROM records WHERE ns = ? AND session = ? AND id IN ({marks})",
                (self.namespace, session_id, *(r.id for r in records)),
            ).fetchall()
        )
        fresh = []
        for record in records:
            if record.id not in stored:
                fresh.append(record)
            elif bytes(stored[record.id]) != record.data:
                raise RecordConflict(session_id, record.id)
        return fresh

    def write_time(self) -> float:
        """The time recorded with each record (ordering never depends on it)."""
        return self.now()

    def write(self, session_id: str, records: list[Record], length: int) -> None:
        written = self.write_time()
        self.db.executemany(
            "INSERT INTO records (ns, session, position, id, data, written) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [
                (self.namespace, session_id, length + n, r.id, r.data, written)
                for n, r in enumerate(records)
            ],
        )
        self.db.execute(
            "INSERT INTO sessions (ns, session, length, last_id, expires) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (ns, session) DO UPDATE SET length = excluded.length, "
            "last_id = excluded.last_id, expires = excluded.expires",
            (self.namespace, session_id, length + len(records), records[-1].id, self.expiry()),
        )

    def refresh(self, session_id: str) -> None:
        """An exact retry stored nothing: it still sets the expiry from this handle."""
        self.db.execute(
            "UPDATE sessions SET expires = ? WHERE ns = ? AND session = ?",
            (self.expiry(), self.namespace, session_id),
        )

    def transaction(self, session_id: str, records: list[Record], after: Any) -> None:
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                length, last = self.state(session_id)
                fresh = self.fresh(session_id, records)
                if fresh:
                    if after is not _ANY and after != last:
                        raise AppendConflict(session_id, expected=after)
                    self.write(session_id, fresh, length)
                elif length:
                    self.refresh(session_id)
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    # -- the hooks -------------------------------------------------------------------------

    def append(self, session_id: str, records: list[Record]) -> None:
        self.transaction(session_id, records, _ANY)

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        self.transaction(session_id, records, after)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        with self.lock:
            self.db.execute("BEGIN")
            try:
                length, _ = self.state(session_id)
                first, end, _ = slice(start, stop).indices(length)
                rows = self.db.execute(
                    "SELECT position, id, data FROM records WHERE ns = ? AND session = ? "
                    "AND position >= ? AND position < ? ORDER BY position",
                    (self.namespace, session_id, first, end),
                ).fetchall()
            finally:
                self.db.execute("COMMIT")
        return self.check_rows(session_id, rows, first, end)

    def check_rows(
        self, session_id: str, rows: list[tuple[int, str, bytes]], first: int, end: int
    ) -> list[Record]:
        for expected, (position, _, _) in zip(range(first, end), rows, strict=False):
            if position != expected:
                raise CorruptRecord(session_id, expected, "the record is missing from storage")
        if len(rows) < max(end - first, 0):
            raise CorruptRecord(session_id, first + len(rows), "the record is missing")
        return [Record(rid, bytes(data)) for _, rid, data in rows]

    def delete(self, session_id: str) -> None:
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            self.erase(session_id)
            self.db.execute("COMMIT")

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        prefix = prefix or ""
        last: str | None = None
        while True:
            with self.lock:
                rows = self.db.execute(
                    "SELECT session, expires FROM sessions WHERE ns = ? "
                    "AND substr(session, 1, ?) = ? AND (? IS NULL OR session > ?) "
                    "ORDER BY session LIMIT ?",
                    (self.namespace, len(prefix), prefix, last, last, self.page_size),
                ).fetchall()
            for name, expires in rows:
                if self.alive(expires):
                    yield name
            if len(rows) < self.page_size:
                return
            last = rows[-1][0]

    def close(self) -> None:
        with self.lock:
            self.db.close()


class SQLiteFileStore(SQLiteCore):
    """:class:`SQLiteCore` with every test hook of :mod:`chatkeep.testing.hooks`."""

    def chatkeep_damage(self, session_id: str, position: int, kind: str) -> None:
        key = (self.namespace, session_id, position)
        with self.lock:
            if kind == "missing":
                self.db.execute(
                    "DELETE FROM records WHERE ns = ? AND session = ? AND position = ?", key
                )
            elif kind == "truncated":
                self.db.execute(
                    "UPDATE records SET data = substr(data, 1, length(data) / 2) "
                    "WHERE ns = ? AND session = ? AND position = ?",
                    key,
                )
            elif kind == "garbage":
                self.db.execute(
                    "UPDATE records SET data = randomblob(length(data)) "
                    "WHERE ns = ? AND session = ? AND position = ?",
                    key,
                )
            else:
                raise NotImplementedError(kind)

    def chatkeep_storage_contains(self, data: bytes) -> bool:
        files = [Path(self.path + suffix) for suffix in ("", "-journal", "-wal")]
        return any(f.exists() and data in f.read_bytes() for f in files)

    def chatkeep_durability(self) -> str:
        return "power" if self.synchronous == "full" else "process"

    def chatkeep_expiry(self, session_id: str) -> float | None:
        with self.lock:
            row = self.db.execute(
                "SELECT expires FROM sessions WHERE ns = ? AND session = ?",
                (self.namespace, session_id),
            ).fetchone()
        return None if row is None else row[0]


_ANY: Any = object()


class NonAtomicSQLiteFileStore(SQLiteFileStore):
    """Bug: each record of a batch is committed on its own, so batches can interleave and
    readers can see half of one."""

    def append(self, session_id: str, records: list[Record]) -> None:
        for record in records:
            self.transaction(session_id, [record], _ANY)
            time.sleep(0.002)


class IgnoresTtl(SQLiteFileStore):
    """Bug: declares ``ttl`` and accepts the option, but nothing ever expires."""

    def alive(self, expires: float | None) -> bool:
        return True


class RetryKeepsExpiry(SQLiteFileStore):
    """Bug: an exact retry that stores nothing leaves the session's expiry alone, so a
    session kept alive by retries expires, and a retry through a handle without ``ttl``
    does not stop the expiry."""

    def refresh(self, session_id: str) -> None:
        pass


class HandleListing(SQLiteFileStore):
    """Bug: ``list_sessions`` lists what this handle wrote (a per-handle index), not what the
    store holds, so another handle and a reopened store list nothing."""

    def __init__(self, path: str, **options: Any) -> None:
        super().__init__(path, **options)
        self.mine: set[str] = set()

    def write(self, session_id: str, records: list[Record], length: int) -> None:
        super().write(session_id, records, length)
        self.mine.add(session_id)

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        listed = set(super().list_sessions(prefix))
        yield from sorted(listed & self.mine)


class CachedReads(SQLiteCore):
    """Bug: a read cache per handle, dropped only by this handle's own appends, so appends
    from another handle or process go unseen once a session was read."""

    capabilities = SQLiteCore.capabilities - {"ttl"}  # a cache and expiry do not mix

    def __init__(self, path: str, **options: Any) -> None:
        super().__init__(path, **options)
        self.cache: dict[tuple[str, int, int | None], list[Record]] = {}

    def forget(self, session_id: str) -> None:
        for key in [k for k in self.cache if k[0] == session_id]:
            del self.cache[key]

    def write(self, session_id: str, records: list[Record], length: int) -> None:
        super().write(session_id, records, length)
        self.forget(session_id)

    def erase(self, session_id: str) -> None:
        super().erase(session_id)
        self.forget(session_id)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        key = (session_id, start, stop)
        if key not in self.cache:
            self.cache[key] = super().read(session_id, start, stop)
        return list(self.cache[key])


class WriterClockOrder(SQLiteCore):
    """Bug: records are ordered by the writing handle's clock (each process's clock is a
    little off, as client timestamps in object keys are), not by when they committed."""

    schema = _SCHEMA + "CREATE INDEX IF NOT EXISTS by_time ON records (ns, session, written);"

    def __init__(self, path: str, **options: Any) -> None:
        super().__init__(path, **options)
        self.skew = random.uniform(-0.5, 0.5)

    def write_time(self) -> float:
        return time.time() + self.skew

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        with self.lock:
            length, _ = self.state(session_id)
            first, end, _ = slice(start, stop).indices(length)
            if end <= first:
                return []
            if first > length // 2:  # from the end, so tail reads stay cheap
                rows = self.db.execute(
                    "SELECT id, data FROM records WHERE ns = ? AND session = ? "
                    "ORDER BY written DESC, position DESC LIMIT ? OFFSET ?",
                    (self.namespace, session_id, end - first, length - end),
                ).fetchall()[::-1]
            else:
                rows = self.db.execute(
                    "SELECT id, data FROM records WHERE ns = ? AND session = ? "
                    "ORDER BY written, position LIMIT ? OFFSET ?",
                    (self.namespace, session_id, end - first, first),
                ).fetchall()
        return [Record(rid, bytes(data)) for rid, data in rows]


class HandleDedup(SQLiteFileStore):
    """Bug: the duplicate check uses what this handle appended (an in-process set), so a
    batch re-sent by another process after a crash is stored twice."""

    schema = _SCHEMA.replace("CREATE UNIQUE INDEX", "CREATE INDEX")

    def __init__(self, path: str, **options: Any) -> None:
        super().__init__(path, **options)
        self.sent: dict[tuple[str, str], bytes] = {}

    def fresh(self, session_id: str, records: list[Record]) -> list[Record]:
        fresh = []
        for record in records:
            known = self.sent.get((session_id, record.id))
            if known is None:
                fresh.append(record)
            elif known != record.data:
                raise RecordConflict(session_id, record.id)
        return fresh

    def write(self, session_id: str, records: list[Record], length: int) -> None:
        super().write(session_id, records, length)
        self.sent.update(((session_id, r.id), r.data) for r in records)

    def erase(self, session_id: str) -> None:
        super().erase(session_id)
        for key in [k for k in self.sent if k[0] == session_id]:
            del self.sent[key]


class RacyConditional(SQLiteFileStore):
    """Bug: ``append_if`` checks the condition, then appends in a second transaction, so
    racing writers can both win."""

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        with self.lock:
            _, last = self.state(session_id)
            fresh = self.fresh(session_id, records)
        if not fresh:
            return
        if last != after:
            raise AppendConflict(session_id, expected=after)
        time.sleep(0.01)
        self.append(session_id, fresh)


class ConditionBeforeRetry(SQLiteFileStore):
    """Bug: ``append_if`` checks the condition before dropping already-stored records, so an
    exact retry of an acknowledged conditional append raises AppendConflict."""

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        with self.lock:
            _, last = self.state(session_id)
        if last != after:
            raise AppendConflict(session_id, expected=after)
        super().append_if(session_id, records, after)


class JoinedNamespaces(SQLiteFileStore):
    """Bug: the namespace is joined to the session id with ``/``, so ``acme`` + ``eu/s``
    and ``acme/eu`` + ``s`` are one key, and ``acme`` lists ``acme/eu``'s sessions."""

    def __init__(self, path: str, *, namespace: str | None = None, **options: Any) -> None:
        super().__init__(path, **options)
        self.prefix = "" if namespace is None else check_namespace(namespace) + "/"

    def append(self, session_id: str, records: list[Record]) -> None:
        super().append(self.prefix + session_id, records)

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        super().append_if(self.prefix + session_id, records, after)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        return super().read(self.prefix + session_id, start, stop)

    def delete(self, session_id: str) -> None:
        super().delete(self.prefix + session_id)

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        for name in super().list_sessions(self.prefix + (prefix or "")):
            yield name[len(self.prefix) :]


class AcceptsAnyNamespace(SQLiteFileStore):
    """Bug: namespaces are not validated (``..``, ``a//b``, ``/`` are all accepted)."""

    def __init__(self, path: str, *, namespace: str | None = None, **options: Any) -> None:
        super().__init__(path, **options)
        self.namespace = "" if namespace is None else str(namespace) + "/"


class KeepsDeletedBytes(SQLiteFileStore):
    """Bug: ``delete`` removes the rows but leaves their bytes in the file's free pages
    (no ``secure_delete``)."""

    secure_delete = False


class NoFsync(SQLiteFileStore):
    """Bug: declares ``durable`` but never syncs (``synchronous=OFF`` by default)."""

    def __init__(self, path: str, **options: Any) -> None:
        options.setdefault("synchronous", "off")
        super().__init__(path, **options)


class SilentlyShortened(SQLiteFileStore):
    """Bug: a record missing from storage is left out of reads, silently shortening the
    history (no CorruptRecord)."""

    def check_rows(
        self, session_id: str, rows: list[tuple[int, str, bytes]], first: int, end: int
    ) -> list[Record]:
        return [Record(rid, bytes(data)) for _, rid, data in rows]


class DeleteInHandleOnly(SQLiteFileStore):
    """Bug: ``delete`` hides the session in this handle (a tombstone set) instead of erasing
    it, so another handle, and this store reopened, read it back."""

    def __init__(self, path: str, **options: Any) -> None:
        super().__init__(path, **options)
        self.tombstones: set[str] = set()

    def delete(self, session_id: str) -> None:
        self.tombstones.add(session_id)

    def append(self, session_id: str, records: list[Record]) -> None:
        if session_id in self.tombstones:
            self.tombstones.discard(session_id)
            super().delete(session_id)
        super().append(session_id, records)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        if session_id in self.tombstones:
            return []
        return super().read(session_id, start, stop)

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        for name in super().list_sessions(prefix):
            if name not in self.tombstones:
                yield name


class ColdReadScans(SQLiteFileStore):
    """Bug: a new handle's first read of a session loads its whole log (to build a position
    index), so a serverless process pays the log's length on every turn."""

    def __init__(self, path: str, **options: Any) -> None:
        super().__init__(path, **options)
        self.warm: set[str] = set()

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        if session_id not in self.warm:
            self.warm.add(session_id)
            super().read(session_id)  # the whole log, once per handle
        return super().read(session_id, start, stop)


_BUFFERS: list[WriteBehind] = []


class WriteBehind(SQLiteFileStore):
    """Bug: appends are buffered in the process and written at ``close`` or exit, so what a
    process acknowledged dies with it (and other processes see it late)."""

    def __init__(self, path: str, **options: Any) -> None:
        super().__init__(path, **options)
        self.pending: list[tuple[str, list[Record]]] = []
        _BUFFERS.append(self)

    capabilities = SQLiteCore.capabilities - {"ttl"}  # expiry counts from the late write

    def append(self, session_id: str, records: list[Record]) -> None:
        self.flush()  # the previous append goes out now; this one waits in the buffer
        with self.lock:
            self.db.execute("BEGIN")
            try:
                self.state(session_id)
                self.fresh(session_id, records)  # conflicts are refused now, not at flush
            finally:
                self.db.execute("ROLLBACK")
            self.pending.append((session_id, records))

    def flush(self) -> None:
        with self.lock:
            pending, self.pending = self.pending, []
            for session_id, records in pending:
                super().append(session_id, records)

    # Everything this handle does sees its own buffer: only other processes miss it.
    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        self.flush()
        return super().read(session_id, start, stop)

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        self.flush()
        super().append_if(session_id, records, after)

    def delete(self, session_id: str) -> None:
        self.flush()
        super().delete(session_id)

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        self.flush()
        return super().list_sessions(prefix)

    def chatkeep_damage(self, session_id: str, position: int, kind: str) -> None:
        self.flush()
        super().chatkeep_damage(session_id, position, kind)

    def chatkeep_storage_contains(self, data: bytes) -> bool:
        self.flush()
        return super().chatkeep_storage_contains(data)

    def close(self) -> None:
        self.flush()
        super().close()


@atexit.register
def _flush_write_behind() -> None:
    for store in _BUFFERS:
        with contextlib.suppress(Exception):  # a store closed before exit
            store.flush()


BROKEN = {
    "negstart": NegativeStartIgnored,
    "retrydup": DuplicatesOnRetry,
    "nuldrop": DropsAfterNul,
    "caseids": CaseInsensitiveIds,
    "aliasing": ReturnsInternalList,
    "globprefix": GlobPrefix,
    "prefixdelete": DeleteByPrefix,
    "stickyids": StickyIdsAfterDelete,
    "silentconflict": SilentConflict,
    "mixeddrop": DropsMixedBatch,
    "tailscan": TailReadScansLog,
    "appendscan": AppendScansLog,
    "lenient": LenientOptions,
    "skipcorrupt": SkipsUndecodable,
    "cap10": TenMebibyteCap,
    "prefix448": ShortPrefixCompare,
    "pageskip": PagesSkipExtensions,
    "pagerepeat": PagesRepeatLast,
    "warmtail": WarmTailAfterDelete,
    "unclamped": UnclampedTail,
    "pageforget": PagesForgetPrefix,
    "fartail": FarTailRefused,
    "eager": EagerListing,
    "memory-tieasc": TiesByIdAscending,
}

BROKEN_FILES = {
    "sqlfile-nonatomic": NonAtomicSQLiteFileStore,
    "sqlfile-ttl": IgnoresTtl,
    "sqlfile-retryttl": RetryKeepsExpiry,
    "sqlfile-handlelist": HandleListing,
    "sqlfile-cached": CachedReads,
    "sqlfile-clock": WriterClockOrder,
    "sqlfile-handledup": HandleDedup,
    "sqlfile-racy": RacyConditional,
    "sqlfile-strictcond": ConditionBeforeRetry,
    "sqlfile-joinedns": JoinedNamespaces,
    "sqlfile-anyns": AcceptsAnyNamespace,
    "sqlfile-keepbytes": KeepsDeletedBytes,
    "sqlfile-nofsync": NoFsync,
    "sqlfile-shortened": SilentlyShortened,
    "sqlfile-tombstone": DeleteInHandleOnly,
    "sqlfile-coldscan": ColdReadScans,
    "sqlfile-writebehind": WriteBehind,
}


@hookimpl
def chatkeep_register_backends(register: Any) -> None:
    register("dict", DictStore, schemes=["dict"], description="test: correct, in memory")
    register("paged", PagedDictStore, schemes=["paged"], description="test: correct, paged")
    register("sqlfile", SQLiteFileStore, schemes=["sqlfile"], description="test: SQLite file")
    for name, factory in {**BROKEN, **BROKEN_FILES}.items():
        register(name, factory, schemes=[name], description=f"test: broken ({factory.__doc__})")


__all__ = ["BROKEN", "BROKEN_FILES", "DictStore", "SQLiteFileStore"]
