"""The SQLite backend: :class:`SQLiteStore`.

Every operation is one SQL round trip on the hot path (a read is one statement; an append is
one ``BEGIN IMMEDIATE`` transaction), straight on :mod:`sqlite3`: the schema lives in
:mod:`chatkeep.sqlite.schema`, options and URLs in :mod:`chatkeep.sqlite.options`.

Each thread gets its own connection (WAL lets readers run beside the one writer); the private
``:memory:`` database has a single connection that threads take turns on.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, TypeVar

from chatkeep.core import AppendConflict, CorruptRecord, Record, RecordConflict, StoreUnavailable

from .errors import InvalidOption, StoreFull
from .options import MEMORY, SQLiteOptions, parse_options, parse_url
from .schema import migrate

__all__ = ["MAX_RECORDS", "MAX_SESSIONS", "SQLiteStore", "prefix_successor", "read_statement"]

T = TypeVar("T")

ALL_CAPABILITIES = frozenset(
    {"delete", "list_sessions", "close", "ttl", "shared", "durable", "conditional", "namespace"}
)
MEMORY_CAPABILITIES = ALL_CAPABILITIES - {"shared", "durable"}

_LIST_PAGE = 500  # session ids fetched per listing query
_PURGE_BATCH = 100  # expired sessions erased per lazy purge, so one append never stalls long
_PURGE_INTERVAL = 60.0  # seconds between lazy purges (shorter when the ttl is)

# A record's rowid is session << 32 | seq (see chatkeep.sqlite.schema).
_SEQ_BITS = 32
MAX_RECORDS = 1 << _SEQ_BITS  # per session
MAX_SESSIONS = (1 << (63 - _SEQ_BITS)) - 1  # session row ids 1 .. 2**31 - 1 keep rowids in int64

# -- SQL ---------------------------------------------------------------------------------------

_SELECT_SESSION = "SELECT id, length, expires_at FROM chatkeep_sessions WHERE session_id = ?"
_SELECT_SESSION_ID = "SELECT id FROM chatkeep_sessions WHERE session_id = ?"
_INSERT_SESSION = "INSERT INTO chatkeep_sessions (session_id, length, expires_at) VALUES (?, ?, ?)"
_UPDATE_SESSION = "UPDATE chatkeep_sessions SET length = ?, expires_at = ? WHERE id = ?"
_DELETE_SESSION = "DELETE FROM chatkeep_sessions WHERE id = ?"
_INSERT_RECORD = (
    "INSERT OR IGNORE INTO chatkeep_records (id, session, record_id, data) VALUES (?, ?, ?, ?)"
)
_SELECT_STORED = "SELECT data FROM chatkeep_records WHERE session = ? AND record_id = ? AND id < ?"
_SELECT_RECORD_ID = "SELECT record_id FROM chatkeep_records WHERE id = ?"
_DELETE_RECORDS = "DELETE FROM chatkeep_records WHERE id >= ? AND id < ?"
_SELECT_EXPIRED = "SELECT id FROM chatkeep_sessions WHERE expires_at <= ? LIMIT ?"

# Queries are assembled only from the fixed fragments below, never from caller input.
# CROSS JOIN pins the join order: one unique lookup of the session row, then one rowid range
# of the records table, already in order - no scan, no sort, whatever the statistics say.
# Both bounds stay inside the session's own range [session << 32, session << 32 | length).
# "s.expires_at > ?" takes the current time: expired sessions read as empty everywhere.
# Each row also carries its position (r.id - (s.id << 32)) and the session's length, so a
# read can tell a missing record (damage) from a short log: positions must be contiguous.
# LEFT JOIN keeps the join order (session row first) and returns the session row even when
# the range holds no record, so "empty" and "all missing" are told apart in one snapshot.
_READ = (
    "SELECT r.record_id, r.data, r.id - (s.id << 32), s.length "
    "FROM chatkeep_sessions AS s LEFT JOIN chatkeep_records AS r "
    "ON r.id >= (s.id << 32) + {lower} AND r.id < (s.id << 32) + {upper} "
    "WHERE s.session_id = ?1 AND (s.expires_at IS NULL OR s.expires_at > ?2) ORDER BY r.id"
)
# Numbered parameters: ?1 session id, ?2 now, ?3 start, ?4 stop (when given).
# Lower bound: from the start (?), or from the end (length + ?, at least 0).
_LOWER_BOUNDS = ("?3", "max(s.length + ?3, 0)")
# Upper bound: the end (length), from the start (?), or from the end (length + ?).
_UPPER_BOUNDS = ("s.length", "?4", "s.length + ?4")
# Indexed [lower kind][upper kind].
_READ_SQL = tuple(
    tuple(_READ.format(lower=lower, upper=upper) for upper in _UPPER_BOUNDS)
    for lower in _LOWER_BOUNDS
)
_LIST = (
    "SELECT session_id FROM chatkeep_sessions AS s WHERE session_id {after} ?{before} "
    "AND (s.expires_at IS NULL OR s.expires_at > ?) ORDER BY session_id LIMIT ?"
)
# Keyed (inclusive lower bound, has an upper bound).
_LIST_SQL = {
    (inclusive, bounded): _LIST.format(
        after=">=" if inclusive else ">", before=" AND session_id < ?" if bounded else ""
    )
    for inclusive in (True, False)
    for bounded in (True, False)
}


def read_statement(start: int, stop: int | None) -> tuple[str, list[int]]:
    """The SQL and slice parameters that read ``log[start:stop]``.

    The statement takes ``(session_id, now, *parameters)``. Negative bounds are resolved
    against the session's stored ``length`` inside the query, so every slice (head, tail or
    middle) is one rowid range of the records table.
    """
    # Clamping to +-2**32 changes no result (a session holds at most 2**32 records) and keeps
    # the arithmetic inside the session's rowid range.
    lower = 0 if start >= 0 else 1
    parameters = [max(min(start, MAX_RECORDS), -MAX_RECORDS)]
    upper = 0
    if stop is not None:
        upper = 1 if stop >= 0 else 2
        parameters.append(max(min(stop, MAX_RECORDS), -MAX_RECORDS))
    return _READ_SQL[lower][upper], parameters


def prefix_successor(prefix: str) -> str | None:
    """The smallest string greater than every string that starts with ``prefix``.

    SQLite compares TEXT by its UTF-8 bytes, which orders like code points, so
    ``prefix <= id < prefix_successor(prefix)`` selects exactly the ids starting with
    ``prefix`` through the index, with ``%`` and ``_`` taken literally. ``None`` means
    no upper bound (the prefix is all U+10FFFF).
    """
    characters = list(prefix)
    while characters:
        code = ord(characters[-1]) + 1
        if code == 0xD800:  # surrogates never occur in valid ids
            code = 0xE000
        if code <= 0x10FFFF:
            characters[-1] = chr(code)
            return "".join(characters)
        characters.pop()
    return None


# -- connections -------------------------------------------------------------------------------


class _Handle:
    """A connection and the lock that serialises its use (and its closing)."""

    __slots__ = ("__weakref__", "connection", "lock")

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        self.lock = threading.Lock()


def _is_unavailability(error: BaseException) -> bool:
    # Locked, busy, I/O, full, read-only, cannot open (OperationalError) and "not a database"
    # or "malformed" (plain DatabaseError); integrity and programming errors stay as they are.
    return isinstance(error, sqlite3.OperationalError) or type(error) is sqlite3.DatabaseError


class SQLiteStore:
    """A chatkeep backend on one SQLite file (or a private in-memory database).

    Example::

        store = SQLiteStore("chats.db", ttl=timedelta(days=30))
        store.append("s1", [Record("m1", b"hello")])
        store.read("s1", start=-50)   # the last fifty records, via one rowid range
        store.close()

    Normally opened through ``chatkeep.core.open_store("sqlite:///chats.db")``. Options:
    ``ttl`` (seconds or timedelta of inactivity before a session expires; refreshed by every
    append), ``timeout`` (seconds to wait for another writer's lock, default 5),
    ``synchronous`` (default ``full``) and ``journal_mode`` (default ``wal``). ``clock``
    replaces :func:`time.time` for tests.

    Thread-safe, and safe for many processes on one file. ``":memory:"`` opens a private
    database that is neither shared nor durable; its ``capabilities`` say so.

    Under ``await``, reads and appends run on the event loop itself (``inline_hooks``; a
    worker thread would cost more than the call): a read of a window takes tens of
    microseconds, an append one short transaction and its fsync, and either waits for
    another process's write lock (at most ``timeout``) on the loop. Set the store's
    ``inline_hooks = frozenset()`` to run them in worker threads instead.
    """

    capabilities: frozenset[str] = ALL_CAPABILITIES
    #: Run on the event loop under ``await`` (see chatkeep.core.store, "Inline hooks").
    inline_hooks: frozenset[str] = frozenset({"read", "append", "append_if"})

    def __init__(
        self,
        path: str | os.PathLike[str] = "chatkeep.db",
        *,
        ttl: float | timedelta | str | None = None,
        timeout: float | str = 5.0,
        synchronous: str = "full",
        journal_mode: str = "wal",
        clock: Callable[[], float] | None = None,
        namespace: str | None = None,
    ) -> None:
        database = os.fspath(path)
        if not isinstance(database, str) or not database or "\x00" in database:
            raise InvalidOption(f"a SQLite database path must be a non-empty str, got {path!r}")
        self.options: SQLiteOptions
        self.options, injected = parse_options(
            {
                "ttl": ttl,
                "timeout": timeout,
                "synchronous": synchronous,
                "journal_mode": journal_mode,
                "clock": clock,
                "namespace": namespace,
            }
        )
        self.namespace = self.options.namespace
        # A namespaced session is stored under "<namespace>\0<session id>": session ids and
        # namespaces never contain NUL, so tenants (nested and prefix-of ones included) and
        # the default namespace are disjoint key ranges of the one sessions table.
        self._tenant = "" if self.namespace is None else self.namespace + "\x00"
        self.path = database
        self.in_memory = database == MEMORY
        if self.in_memory:
            self.capabilities = MEMORY_CAPABILITIES
        self._clock: Callable[[], float] = injected or time.time
        self._ttl = self.options.ttl
        self._purge_interval = min(self._ttl or _PURGE_INTERVAL, _PURGE_INTERVAL)
        self._next_purge = float("-inf")  # the first append purges whatever already expired
        self._closed = False
        self._local = threading.local()
        self._handles_lock = threading.Lock()
        self._handles: weakref.WeakSet[_Handle] = weakref.WeakSet()
        first = _Handle(self._connect())
        try:
            if not self.in_memory:
                self._set_journal_mode(first.connection)
            migrate(first.connection, label=f"SQLite database {self.path!r}")
        except BaseException as exc:
            first.connection.close()
            if _is_unavailability(exc):
                raise self._unavailable(exc) from exc
            raise
        # The in-memory database exists only inside this one connection: every thread shares it.
        self._shared = first if self.in_memory else None
        self._handles.add(first)
        self._local.handle = first
        _open_stores.add(self)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> SQLiteStore:
        """Open ``sqlite:///relative.db``, ``sqlite:////absolute.db`` or ``sqlite://:memory:``.

        Options may be given in the query string (``?ttl=3600&timeout=10``) or as keyword
        arguments, which override the query string.
        """
        path, query = parse_url(url)
        merged: dict[str, Any] = {**query, **options}
        parse_options(merged)  # unknown names fail here, with the list of known ones
        return cls(path, **merged)

    def __repr__(self) -> str:
        ttl = f" ttl={self._ttl:g}s" if self._ttl is not None else ""
        state = " closed" if self._closed else ""
        tenant = f" namespace={self.namespace!r}" if self.namespace is not None else ""
        return f"<SQLiteStore {self.path!r}{tenant}{ttl}{state}>"

    # -- connections ---------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            # isolation_level=None: no implicit BEGIN from the sqlite3 module; transactions
            # are explicit BEGIN IMMEDIATE ... COMMIT. check_same_thread=False lets close()
            # reach every thread's connection (each handle's lock prevents concurrent use).
            connection = sqlite3.connect(
                self.path,
                timeout=self.options.timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            connection.execute(f"PRAGMA synchronous = {self.options.synchronous}")
            # delete() is erasure: overwrite freed content instead of leaving it in free pages
            # (many builds default to this already; measured cost on appends is noise).
            connection.execute("PRAGMA secure_delete = ON")
        except sqlite3.Error as exc:
            if _is_unavailability(exc):
                raise self._unavailable(exc) from exc
            raise
        return connection

    def _set_journal_mode(self, connection: sqlite3.Connection) -> None:
        wanted = self.options.journal_mode
        mode = str(connection.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        if mode == wanted:
            return
        # Switching needs an exclusive lock, which the busy handler does not always wait for
        # when several processes open a new file at once: retry until the timeout.
        deadline = time.monotonic() + self.options.timeout
        while True:
            try:
                row = connection.execute(f"PRAGMA journal_mode = {wanted}").fetchone()
                break
            except sqlite3.OperationalError as exc:
                if "lock" not in str(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)
        mode = str(row[0]).lower()
        if mode != wanted:
            raise StoreUnavailable(
                f"SQLite database {self.path!r} stays in journal_mode={mode}, not {wanted}: "
                "the filesystem may not support it (WAL needs a local disk); "
                "pass journal_mode=delete"
            )

    def _handle(self) -> _Handle:
        try:
            handle: _Handle = self._local.handle
        except AttributeError:
            handle = self._new_handle()
        return handle

    def _new_handle(self) -> _Handle:
        with self._handles_lock:
            self._check_open()
            if self._shared is not None:
                handle = self._shared
            else:
                handle = _Handle(self._connect())
                self._handles.add(handle)
        self._local.handle = handle
        return handle

    def _discard(self, handle: _Handle) -> None:
        """Drop a connection whose state is unknown (its rollback failed)."""
        if self._shared is handle:
            return
        with self._handles_lock:
            self._handles.discard(handle)
        if getattr(self._local, "handle", None) is handle:
            del self._local.handle
        with contextlib.suppress(sqlite3.Error):
            handle.connection.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreUnavailable(
                f"the SQLite store {self.path!r} is closed; open a new one to keep using it"
            )

    def _unavailable(self, error: BaseException) -> StoreUnavailable:
        message = str(error)
        if "locked" in message or "busy" in message:
            hint = (
                f"another connection held the write lock for more than "
                f"timeout={self.options.timeout:g}s; retrying is safe"
            )
        elif "unable to open" in message:
            hint = "check that its directory exists and is writable"
        else:
            hint = "check the file, its disk and its permissions"
        return StoreUnavailable(f"SQLite database {self.path!r}: {message} ({hint})")

    def _write(self, work: Callable[..., T], *arguments: Any) -> T:
        """Run ``work(connection, *arguments)`` in one ``BEGIN IMMEDIATE`` transaction.

        IMMEDIATE takes the write lock up front (waiting up to ``timeout``), so a transaction
        never fails half-way on a lock upgrade; any error rolls everything back.
        """
        self._check_open()
        handle = self._handle()
        with handle.lock:
            connection = handle.connection
            try:
                connection.execute("BEGIN IMMEDIATE")
                result = work(connection, *arguments)
                connection.execute("COMMIT")
            except BaseException as exc:
                self._rollback(handle)
                if _is_unavailability(exc):
                    raise self._unavailable(exc) from exc
                raise
        return result

    def _rollback(self, handle: _Handle) -> None:
        try:
            if handle.connection.in_transaction:
                handle.connection.execute("ROLLBACK")
        except sqlite3.Error:
            self._discard(handle)

    def _key(self, session_id: str) -> str:
        return self._tenant + session_id

    # -- the two hooks -------------------------------------------------------------------

    def append(self, session_id: str, records: list[Record]) -> None:
        """Append ``records`` in one transaction; ids already in the session are skipped."""
        now = self._clock()
        expires_at = None if self._ttl is None else now + self._ttl
        self._write(_append, self._key(session_id), records, now, expires_at)
        if now >= self._next_purge:
            self._purge_some(now)

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        """Append ``records`` only if the session's last record is ``after`` (``None``:
        empty), in the same ``BEGIN IMMEDIATE`` transaction as the check; otherwise raise
        :class:`~chatkeep.core.AppendConflict`. An exact retry is a no-op."""
        now = self._clock()
        expires_at = None if self._ttl is None else now + self._ttl
        work = functools.partial(_append_if, after=after)
        self._write(work, self._key(session_id), records, now, expires_at)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        """``log[start:stop]`` of the session in one rowid-range query (``[]`` if unknown)."""
        self._check_open()
        if stop is not None and (start >= 0) == (stop >= 0) and stop <= start:
            return []  # empty whatever the length: skip the round trip
        sql, bounds = read_statement(start, stop)
        handle = self._handle()
        now = self._clock()
        with handle.lock:
            try:
                key = self._key(session_id)
                rows = handle.connection.execute(sql, (key, now, *bounds)).fetchall()
            except sqlite3.Error as exc:
                if _is_unavailability(exc):
                    raise self._unavailable(exc) from exc
                raise
        if not rows:
            return []  # no such (live) session
        wanted = range(rows[0][3])[start:stop]
        if rows[0][0] is None:
            if not wanted:
                return []
            rows = []
        elif len(rows) == len(wanted) and rows[0][2] == wanted.start:
            return [Record(row[0], row[1]) for row in rows]
        present = {row[2] for row in rows}
        position = next(seq for seq in wanted if seq not in present)
        raise CorruptRecord(
            session_id, position, "the record is missing from the file (a gap in the log)"
        )

    # -- test hooks (chatkeep.testing.hooks; nothing in chatkeep calls them) -----------

    def chatkeep_durability(self) -> str:
        """What an acknowledged append survives with this handle's settings."""
        if self.path == MEMORY:
            return "nothing"
        return "power" if self.options.synchronous in ("full", "extra") else "process"

    def chatkeep_damage(self, session_id: str, position: int, kind: str) -> None:
        """Damage the record at ``position`` behind the store's back, as another program
        writing to the file could: ``"garbage"`` (other bytes), ``"truncated"`` (cut
        short) or ``"missing"`` (its row deleted)."""
        statements = {
            "garbage": "UPDATE chatkeep_records SET data = X'fe000102' WHERE id = ?",
            "truncated": (
                "UPDATE chatkeep_records SET data = substr(data, 1, max(length(data) - 3, 1)) "
                "WHERE id = ?"
            ),
            "missing": "DELETE FROM chatkeep_records WHERE id = ?",
        }
        if kind not in statements:
            raise NotImplementedError(kind)

        def damage(connection: sqlite3.Connection) -> None:
            row = connection.execute(_SELECT_SESSION_ID, (self._key(session_id),)).fetchone()
            if row is None:
                raise IndexError(f"session {session_id!r} does not exist")
            cursor = connection.execute(statements[kind], ((row[0] << _SEQ_BITS) + position,))
            if cursor.rowcount != 1:
                raise IndexError(f"session {session_id!r} has no record at {position}")

        self._write(damage)

    # -- optional capabilities -------------------------------------------------------------

    def delete(self, session_id: str) -> None:
        """Erase the session and all its records (no-op for an unknown session)."""
        self._write(_delete, self._key(session_id))

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        """Yield live session ids in code-point order, lazily, ``_LIST_PAGE`` per query.

        ``prefix`` matches literally (``%`` and ``_`` are ordinary characters) and
        case-sensitively. Each page is its own query, so no read transaction stays open
        between items and the iterator may be resumed from any thread.
        """
        tenant = self._tenant
        lower = tenant + (prefix or "")
        upper = prefix_successor(lower) if lower else None
        if prefix:
            try:
                prefix.encode("utf-8")
            except UnicodeEncodeError:
                return  # a lone surrogate: no valid session id starts with it
        inclusive = True
        while True:
            page = self._list_page(lower, inclusive, upper)
            if tenant:
                yield from (key[len(tenant) :] for key in page)
            else:  # the default namespace: skip other tenants' keys (they hold a NUL)
                yield from (key for key in page if "\x00" not in key)
            if len(page) < _LIST_PAGE:
                return
            lower, inclusive = page[-1], False

    def _list_page(self, lower: str, inclusive: bool, upper: str | None) -> list[str]:
        self._check_open()
        sql = _LIST_SQL[inclusive, upper is not None]
        now = self._clock()
        parameters = (lower, now, _LIST_PAGE) if upper is None else (lower, upper, now, _LIST_PAGE)
        handle = self._handle()
        with handle.lock:
            try:
                return [row[0] for row in handle.connection.execute(sql, parameters)]
            except sqlite3.Error as exc:
                if _is_unavailability(exc):
                    raise self._unavailable(exc) from exc
                raise

    def purge_expired(self) -> int:
        """Erase every expired session now and return how many there were.

        Expired sessions already read as empty and are erased lazily by appends; call this
        (from a scheduled job, say) to reclaim their space sooner.
        """
        total = 0
        while True:
            purged = self._write(_purge, self._clock(), _PURGE_BATCH)
            total += purged
            if purged < _PURGE_BATCH:
                return total

    def _purge_some(self, now: float) -> None:
        self._next_purge = now + self._purge_interval
        try:
            purged = self._write(_purge, now, _PURGE_BATCH)
        except StoreUnavailable:
            return  # best effort: the append itself has committed; a later one retries
        if purged == _PURGE_BATCH:
            self._next_purge = now  # more are waiting: continue on the next append

    def close(self) -> None:
        """Close every connection this store opened, in every thread. Idempotent.

        Waits for an operation running in another thread to finish first.
        """
        with self._handles_lock:
            if self._closed:
                return
            self._closed = True
            handles = list(self._handles)
            self._handles = weakref.WeakSet()
            self._shared = None
            self._local = threading.local()
        for handle in handles:
            with handle.lock:
                handle.connection.close()
        _open_stores.discard(self)

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _forget_connections(self) -> None:
        """In a forked child: never touch the parent's connections again (nor close them,
        which could disturb the parent's locks); the next call opens fresh ones."""
        _inherited.extend(self._handles)
        self._handles = weakref.WeakSet()
        self._handles_lock = threading.Lock()
        self._local = threading.local()
        if self._shared is not None:
            self._shared.lock = threading.Lock()  # a private copy: keep it, reset its lock
            self._handles.add(self._shared)


# -- transaction bodies (run inside SQLiteStore._write) -----------------------------------------


def _append(
    connection: sqlite3.Connection,
    session_id: str,
    records: list[Record],
    now: float,
    expires_at: float | None,
) -> None:
    row = connection.execute(_SELECT_SESSION, (session_id,)).fetchone()
    count = len(records)
    if row is None:
        session: int = connection.execute(
            _INSERT_SESSION, (session_id, count, expires_at)
        ).lastrowid  # type: ignore[assignment]  # an INSERT always sets it
        if session > MAX_SESSIONS:
            raise StoreFull(f"the SQLite store holds its maximum of {MAX_SESSIONS:,} sessions")
        length = 0
    else:
        session, length, old_expiry = row
        if old_expiry is not None and old_expiry <= now:
            # Expired but not purged yet: the session starts over, its old ids forgotten.
            connection.execute(_DELETE_RECORDS, _session_range(session))
            length = 0
    if length + count > MAX_RECORDS:
        raise StoreFull(f"session {_label(session_id)!r} would exceed {MAX_RECORDS:,} records")
    base = (session << _SEQ_BITS) + length
    inserted = connection.executemany(
        _INSERT_RECORD,
        [(base + offset, session, record.id, record.data) for offset, record in enumerate(records)],
    ).rowcount
    if inserted != count:
        # Some ids were stored already (a retried batch): OR IGNORE left holes in seq. An id
        # stored with other data refuses the whole batch (the transaction rolls back).
        _check_stored(connection, session_id, session, length, records)
        inserted = _insert_skipping_stored(connection, session, length, records)
    elif row is None:
        return  # the new session row was inserted with its final length
    connection.execute(_UPDATE_SESSION, (length + inserted, expires_at, session))


def _append_if(
    connection: sqlite3.Connection,
    session_id: str,
    records: list[Record],
    now: float,
    expires_at: float | None,
    *,
    after: str | None,
) -> None:
    row = connection.execute(_SELECT_SESSION, (session_id,)).fetchone()
    last = None
    if row is not None:
        session, length, expiry = row
        if length and (expiry is None or expiry > now):
            if _check_stored(connection, session_id, session, length, records) == len(records):
                return  # an exact retry of a call that was stored: a no-op
            last = connection.execute(
                _SELECT_RECORD_ID, ((session << _SEQ_BITS) + length - 1,)
            ).fetchone()[0]
    if last != after:
        raise AppendConflict(_label(session_id), after)
    _append(connection, session_id, records, now, expires_at)


def _label(key: str) -> str:
    """The session id a stored key names (its namespace part, if any, dropped)."""
    return key.rpartition("\x00")[2]


def _session_range(session: int) -> tuple[int, int]:
    """The rowid range [first, last + 1) that every record of ``session`` falls in."""
    return session << _SEQ_BITS, (session + 1) << _SEQ_BITS


def _check_stored(
    connection: sqlite3.Connection,
    session_id: str,
    session: int,
    length: int,
    records: list[Record],
) -> int:
    """How many of ``records`` are stored before ``length``; raise :class:`RecordConflict`
    if one's id is stored there with other data.

    One lookup per record on the ``(session, record_id)`` unique index: only a batch that
    met an id already stored (a retry, or a reuse) pays for it in a plain append.
    """
    below = (session << _SEQ_BITS) + length
    stored = 0
    for record in records:
        row = connection.execute(_SELECT_STORED, (session, record.id, below)).fetchone()
        if row is not None:
            if bytes(row[0]) != record.data:
                raise RecordConflict(_label(session_id), record.id)
            stored += 1
    return stored


def _insert_skipping_stored(
    connection: sqlite3.Connection, session: int, length: int, records: list[Record]
) -> int:
    """Re-insert a batch with contiguous seq numbers, skipping ids already stored."""
    base = session << _SEQ_BITS
    connection.execute(_DELETE_RECORDS, (base + length, base + MAX_RECORDS))
    seq = length
    for record in records:
        cursor = connection.execute(_INSERT_RECORD, (base + seq, session, record.id, record.data))
        seq += cursor.rowcount
    return seq - length


def _delete(connection: sqlite3.Connection, session_id: str) -> None:
    row = connection.execute(_SELECT_SESSION_ID, (session_id,)).fetchone()
    if row is not None:
        connection.execute(_DELETE_RECORDS, _session_range(row[0]))
        connection.execute(_DELETE_SESSION, row)


def _purge(connection: sqlite3.Connection, now: float, limit: int) -> int:
    expired = connection.execute(_SELECT_EXPIRED, (now, limit)).fetchall()
    connection.executemany(_DELETE_RECORDS, [_session_range(row[0]) for row in expired])
    connection.executemany(_DELETE_SESSION, expired)
    return len(expired)


# -- fork safety ---------------------------------------------------------------------------

_open_stores: weakref.WeakSet[SQLiteStore] = weakref.WeakSet()
_inherited: list[_Handle] = []  # parents' connections, kept unclosed in forked children


def _after_fork_in_child() -> None:
    for store in list(_open_stores):
        store._forget_connections()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
