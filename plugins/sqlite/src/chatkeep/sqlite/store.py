"""The SQLite backend: :class:`SQLiteStore`.

Every operation is one SQL round trip on the hot path (a read is one statement; an append is
one ``BEGIN IMMEDIATE`` transaction), straight on :mod:`sqlite3`. The statements are in
:mod:`chatkeep.sqlite.sql`, the table layout in :mod:`chatkeep.sqlite.layout`, its
migrations in :mod:`chatkeep.sqlite.migrations`, URLs and options in
:mod:`chatkeep.sqlite.config`, the error table in :mod:`chatkeep.sqlite.faults`.

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
from pathlib import Path
from typing import Any, TypeVar

from chatkeep.core.backend import (
    FULLTEXT,
    AppendConflict,
    CorruptRecord,
    InvalidOption,
    Record,
    RecordConflict,
    StoreUnavailable,
    prefix_upper_bound,
)

from .config import MEMORY, SQLiteOptions, parse_options, parse_url
from .errors import DatabaseNotFound, DatabaseReplaced, IncompatibleSchema, ReadOnlyStore, StoreFull
from .faults import Faults
from .fulltext import FULLTEXT_VERSION, FulltextHooks, delete_words
from .layout import MAX_RECORDS, MAX_SESSIONS, SEQ_BITS, label, session_range, tenant_prefix
from .migrations import (
    LATEST_VERSION,
    MIN_READABLE_VERSION,
    RECENT_VERSION,
    migrate,
    schema_version,
)
from .plugin import (
    CAPABILITIES,
    MEMORY_CAPABILITIES,
    READ_ONLY_CAPABILITIES,
    READ_ONLY_V1_CAPABILITIES,
)
from .sql import DAMAGE as _DAMAGE
from .sql import DELETE_RECORDS as _DELETE_RECORDS
from .sql import DELETE_SESSION as _DELETE_SESSION
from .sql import INSERT_RECORD as _INSERT_RECORD
from .sql import INSERT_RECORDS as _INSERT_RECORDS
from .sql import INSERT_ROWS_MAX as _INSERT_ROWS_MAX
from .sql import INSERT_SESSION as _INSERT_SESSION
from .sql import LIST_SQL as _LIST_SQL
from .sql import RECENT_SQL as _RECENT_SQL
from .sql import RESERVE_POSITIONS as _RESERVE_POSITIONS
from .sql import SELECT_EXPIRED as _SELECT_EXPIRED
from .sql import SELECT_EXPIRY as _SELECT_EXPIRY
from .sql import SELECT_RECORD_ID as _SELECT_RECORD_ID
from .sql import SELECT_SESSION as _SELECT_SESSION
from .sql import SELECT_SESSION_ID as _SELECT_SESSION_ID
from .sql import SELECT_STORED as _SELECT_STORED
from .sql import SET_UPDATED_AT as _SET_UPDATED_AT
from .sql import UPDATE_SESSION as _UPDATE_SESSION
from .sql import pragma, read_positions_statement, read_statement

__all__ = ["MAX_RECORDS", "MAX_SESSIONS", "SQLiteStore", "prefix_successor", "read_statement"]

T = TypeVar("T")

_LIST_PAGE = 500  # session ids fetched per listing query
_PURGE_BATCH = 100  # expired sessions erased per lazy purge, so one append never stalls long
_PURGE_INTERVAL = 60.0  # seconds between lazy purges (shorter when the ttl is)

#: Kept for code that imported it: :func:`chatkeep.core.backend.prefix_upper_bound`.
prefix_successor = prefix_upper_bound

#: ``_as_record((record_id, data))`` is ``Record(record_id, data)``, built without running
#: Python code per row (a NamedTuple's own ``__new__`` is a Python function).
_as_record: Callable[[tuple[str, bytes]], Record] = functools.partial(tuple.__new__, Record)


# -- connections -------------------------------------------------------------------------------


class _Writers:
    """The lock that queues one process's writers to one file (see ``SQLiteStore._write``)."""

    __slots__ = ("__weakref__", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()


_writers_guard = threading.Lock()
_writers_by_file: weakref.WeakValueDictionary[tuple[int, int], _Writers] = (
    weakref.WeakValueDictionary()
)


def _writers_of(identity: tuple[int, int] | None) -> _Writers:
    """The writers' lock of the file with ``identity`` (shared by every store of this process
    on it), or a lock of its own for a private ``:memory:`` database (``None``)."""
    if identity is None:
        return _Writers()
    with _writers_guard:
        writers = _writers_by_file.get(identity)
        if writers is None:
            writers = _writers_by_file[identity] = _Writers()
        return writers


class _Handle:
    """A connection and the lock that serialises its use (and its closing)."""

    __slots__ = ("__weakref__", "connection", "lock")

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        self.lock = threading.Lock()


class SQLiteStore(FulltextHooks):
    """A chatkeep backend on one SQLite file (or a private in-memory database).

    Example::

        store = SQLiteStore("chats.db", ttl=timedelta(days=30))
        store.append("s1", [Record("m1", b"hello")])
        store.read("s1", start=-50)   # the last fifty records, via one rowid range
        store.close()

    Normally opened through ``chatkeep.core.open_store("sqlite:///chats.db")``. Options:
    ``ttl`` (seconds or timedelta of inactivity before a session expires; refreshed by every
    append), ``timeout`` (seconds to wait for another writer's lock, default 5),
    ``synchronous`` (default ``full``), ``journal_mode`` (default ``wal``), ``namespace``
    (the tenant this handle sees) and ``mode`` (``rwc`` default, ``rw`` never creates the
    file, ``ro`` read-only). ``clock`` replaces :func:`time.time` for tests.

    Thread-safe, and safe for many processes on one file. ``":memory:"`` opens a private
    database that is neither shared nor durable; its ``capabilities`` say so, as a
    ``mode=ro`` handle's leave out ``delete`` and ``conditional``. A write to a file that was
    deleted or replaced since it was opened raises
    :class:`~chatkeep.sqlite.errors.DatabaseReplaced` with nothing stored.

    Under ``await``, reads and appends run on the event loop itself (``inline_hooks``; a
    worker thread would cost more than the call): a read of a window takes tens of
    microseconds, an append one short transaction and its fsync, and either waits for
    another process's write lock (at most ``timeout``) on the loop. Set the store's
    ``inline_hooks = frozenset()`` to run them in worker threads instead.
    """

    capabilities: frozenset[str] = CAPABILITIES
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
        mode: str = "rwc",
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
                "mode": mode,
            }
        )
        self.namespace = self.options.namespace
        # Session keys: see chatkeep.sqlite.layout (tenants are disjoint key ranges).
        self._tenant = tenant_prefix(self.namespace)
        self.path = database
        self._faults = Faults(database, self.options.timeout)
        self.in_memory = database == MEMORY
        # Connections (every thread's) and the identity check use the absolute path: a later
        # os.chdir() must not point the store at another file.
        self._file = database if self.in_memory else os.path.abspath(database)
        self._identity: tuple[int, int] | None = None
        self.mode = self.options.mode
        self.read_only = self.mode == "ro"
        self._target, self._uri = self._where()
        # mode=ro on a file without chatkeep's tables: everything reads as empty until a
        # writer creates them (checked again on each read while they are missing).
        self._no_tables = False
        self._clock: Callable[[], float] = injected or time.time
        self._ttl = self.options.ttl
        self._purge_interval = min(self._ttl or _PURGE_INTERVAL, _PURGE_INTERVAL)
        self._next_purge = float("-inf")  # the first append purges whatever already expired
        self._closed = False
        self._local = threading.local()
        self._handles_lock = threading.Lock()
        self._handles: weakref.WeakSet[_Handle] = weakref.WeakSet()
        first = _Handle(self._open_read_only() if self.read_only else self._connect())
        try:
            with self._faults.mapped():
                if not self.read_only:
                    if not self.in_memory:
                        self._set_journal_mode(first.connection)
                    migrate(first.connection, label=f"SQLite database {self.path!r}")
                if not self.in_memory:
                    # The file this store writes to: every write transaction checks that the
                    # path still names it (see _moved).
                    self._identity = _identity(os.stat(self._file))
            self._writers = _writers_of(self._identity)
        except BaseException:
            first.connection.close()
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
        mode = f" mode={self.mode}" if self.mode != "rwc" else ""
        return f"<SQLiteStore {self.path!r}{mode}{tenant}{ttl}{state}>"

    # -- connections ---------------------------------------------------------------------

    def _where(self) -> tuple[str, bool]:
        """What to pass to :func:`sqlite3.connect` (and whether it is a URI), for the mode;
        sets the handle's capabilities."""
        if self.in_memory:
            if self.mode != "rwc":
                raise InvalidOption(
                    f"SQLite option mode={self.mode} needs a file: a private :memory: database "
                    "is always created empty (use mode=rwc, the default)"
                )
            self.capabilities = MEMORY_CAPABILITIES
            return self._file, False
        if os.path.isdir(self._file):
            # SQLite itself says "disk I/O error" or "unable to open database file".
            raise InvalidOption(
                f"SQLite database path {self.path!r} is a directory: name a file in it, such "
                f"as sqlite:///{os.path.join(self.path, 'chatkeep.db')}"
            )
        if self.mode == "rwc":
            return self._file, False
        if not os.path.exists(self._file):
            raise DatabaseNotFound(self.path, self.mode)
        if self.read_only:
            self.capabilities = READ_ONLY_CAPABILITIES
        # SQLite's URI form: mode=rw never creates the file, mode=ro opens it read-only.
        return f"{Path(self._file).as_uri()}?mode={self.mode}", True

    def _connect(self) -> sqlite3.Connection:
        with self._faults.mapped():
            # isolation_level=None: no implicit BEGIN from the sqlite3 module; transactions
            # are explicit BEGIN IMMEDIATE ... COMMIT. check_same_thread=False lets close()
            # reach every thread's connection (each handle's lock prevents concurrent use).
            connection = sqlite3.connect(
                self._target,
                timeout=self.options.timeout,
                isolation_level=None,
                check_same_thread=False,
                uri=self._uri,
            )
            try:
                connection.execute(pragma("synchronous", self.options.synchronous))
                # delete() is erasure: overwrite freed content instead of leaving it in free
                # pages (many builds default to this already; measured cost on appends is noise).
                connection.execute(pragma("secure_delete", "ON"))
            except BaseException:
                connection.close()
                raise
        return connection

    def _open_read_only(self) -> sqlite3.Connection:
        """The first connection of a ``mode=ro`` store, its schema checked, nothing written.

        A WAL file in a directory this process cannot write has no ``-shm`` to share, and
        SQLite refuses to read it; then no writer can be using it either (a writer needs that
        file too), so the store reopens it with ``immutable=1``, which reads the file as it
        is without the shared memory (every later connection of the store does the same).
        """
        try:
            connection, version = self._connect_and_check()
        except StoreUnavailable as exc:
            if not _cannot_share_memory(exc.__context__):
                raise
            self._target += "&immutable=1"
            connection, version = self._connect_and_check()
        if version > LATEST_VERSION:
            connection.close()
            raise IncompatibleSchema(
                f"SQLite database {self.path!r} has chatkeep schema version {version}, but "
                f"this chatkeep-sqlite only knows versions up to {LATEST_VERSION}; upgrade "
                "chatkeep-sqlite to open it"
            )
        if 0 < version < MIN_READABLE_VERSION:  # pragma: no cover - none is unreadable yet
            connection.close()
            raise StoreUnavailable(
                f"SQLite database {self.path!r} has the older chatkeep schema version "
                f"{version}, which mode=ro cannot migrate: open it once without mode=ro"
            )
        if 0 < version < RECENT_VERSION:
            # Readable as it is, without migrating: only the last-append index is missing.
            self.capabilities = READ_ONLY_V1_CAPABILITIES
        elif version >= FULLTEXT_VERSION:
            # The index is there to search (appends, the only writers of it, are refused).
            self.capabilities = READ_ONLY_CAPABILITIES | {FULLTEXT}
        self._no_tables = version == 0
        return connection

    def _connect_and_check(self) -> tuple[sqlite3.Connection, int]:
        connection = self._connect()
        try:
            with self._faults.mapped():
                return connection, schema_version(connection)
        except BaseException:
            connection.close()
            raise

    def _tables_missing(self, connection: sqlite3.Connection) -> bool:
        """For ``mode=ro``: whether the file still has no chatkeep tables."""
        if self._no_tables and schema_version(connection) != 0:
            self._no_tables = False
        return self._no_tables

    def _refuse_writes(self, operation: str) -> None:
        if self.read_only:
            raise ReadOnlyStore(self.path, operation)

    def _set_journal_mode(self, connection: sqlite3.Connection) -> None:
        wanted = self.options.journal_mode
        mode = str(connection.execute(pragma("journal_mode")).fetchone()[0]).lower()
        if mode == wanted:
            return
        # Switching needs an exclusive lock, which the busy handler does not always wait for
        # when several processes open a new file at once: retry until the timeout.
        deadline = time.monotonic() + self.options.timeout
        while True:
            try:
                row = connection.execute(pragma("journal_mode", wanted)).fetchone()
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

    def _write(self, work: Callable[..., T], *arguments: Any) -> T:
        """Run ``work(connection, *arguments)`` in one ``BEGIN IMMEDIATE`` transaction.

        IMMEDIATE takes the write lock up front (waiting up to ``timeout``), so a transaction
        never fails half-way on a lock upgrade; any error rolls everything back.
        """
        self._check_open()
        handle = self._handle()
        # This process's writers to the file queue here rather than in SQLite's busy handler,
        # which polls with sleeps of up to 100 ms: under load a thread could lose every race
        # for the lock until its timeout (measured: one append waited 3.8 s of a 4 ms median
        # with four threads). Other processes still meet at SQLite's lock.
        writers = self._writers.lock
        if not writers.acquire(timeout=self.options.timeout):
            raise self._faults.unavailable(sqlite3.OperationalError("database is locked"))
        try:
            return self._transaction(handle, work, *arguments)
        finally:
            writers.release()

    def _transaction(self, handle: _Handle, work: Callable[..., T], *arguments: Any) -> T:
        with handle.lock, self._faults.mapped():
            connection = handle.connection
            moved: DatabaseReplaced | None = None
            try:
                connection.execute("BEGIN IMMEDIATE")
                # Under the write lock: nothing is committed to a file that was deleted or
                # replaced (WAL would accept the commit into the orphaned file).
                moved = self._moved()
                if moved is not None:
                    raise moved
                result = work(connection, *arguments)
                connection.execute("COMMIT")
            except BaseException as exc:
                self._rollback(handle)
                if isinstance(exc, sqlite3.Error):
                    moved = self._moved()  # a vanished file explains the driver's error
                if moved is None:
                    raise
                _salvage(connection)
                raise moved from None
        return result

    def _moved(self) -> DatabaseReplaced | None:
        """The error to raise if the path no longer names the file this store opened.

        One ``stat`` (about a microsecond, measured: see the README): a write transaction
        never commits to a file that was deleted, or that another file was renamed over,
        since the store opened it.
        """
        if self._identity is None:
            return None  # :memory:
        try:
            now = _identity(os.stat(self._file))
        except FileNotFoundError:
            return DatabaseReplaced(self.path, "was deleted")
        except OSError:
            return None  # cannot tell (the directory's permissions changed): SQLite decides
        if now != self._identity:
            return DatabaseReplaced(self.path, "was replaced by another file")
        return None

    def _rollback(self, handle: _Handle) -> None:
        try:
            if handle.connection.in_transaction:
                handle.connection.execute("ROLLBACK")
        except sqlite3.Error:
            self._discard(handle)

    def _key(self, session_id: str) -> str:
        return self._tenant + session_id

    def _append_bodies(self) -> tuple[Callable[..., int | None], Callable[..., int | None]]:
        """The append and conditional append transaction bodies (for :mod:`.fulltext`)."""
        return _append, _append_if

    # -- the two hooks -------------------------------------------------------------------

    def append(self, session_id: str, records: list[Record]) -> None:
        """Append ``records`` in one transaction; ids already in the session are skipped."""
        if self.read_only:
            raise ReadOnlyStore(self.path, "append")
        now = self._clock()
        expires_at = None if self._ttl is None else now + self._ttl
        self._write(_append, self._key(session_id), records, now, expires_at)
        if now >= self._next_purge:
            self._purge_some(now)

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        """Append ``records`` only if the session's last record is ``after`` (``None``:
        empty), in the same ``BEGIN IMMEDIATE`` transaction as the check; otherwise raise
        :class:`~chatkeep.core.AppendConflict`. An exact retry is a no-op."""
        self._refuse_writes("append_if")
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
        key = self._key(session_id)
        with handle.lock, self._faults.mapped():
            if self._no_tables and self._tables_missing(handle.connection):
                return []
            cursor = handle.connection.execute(sql, (key, now, *bounds))
            head = cursor.fetchone()
            if head is None:
                return []  # no such (live) session
            # The rows are (record_id, data) pairs already: each becomes a Record in C as the
            # cursor yields it, so each row tuple is freed at once (fetchall() first would keep
            # a whole session's rows beside their Records: measured ~20% slower at 10,000 on
            # a large heap, the garbage collector's extra passes).
            records: list[Record] = list(map(_as_record, cursor))
        if head[1] is None and len(records) == len(range(head[0])[start:stop]):
            return records
        # A record is missing from its range (or the driver ordered the rows unexpectedly):
        # read the slice again with each record's position.
        return self._read_positioned(handle, session_id, key, start=start, stop=stop, now=now)

    def _read_positioned(
        self,
        handle: _Handle,
        session_id: str,
        key: str,
        *,
        start: int,
        stop: int | None,
        now: float,
    ) -> list[Record]:
        """The read of a short range: return it if it is whole now, else raise
        :class:`~chatkeep.core.CorruptRecord` naming the first missing position."""
        sql, bounds = read_positions_statement(start, stop)
        with handle.lock, self._faults.mapped():
            rows = handle.connection.execute(sql, (key, now, *bounds)).fetchall()
        if not rows:
            return []  # deleted or expired since
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

    @property
    def chatkeep_storage_contains(self) -> Callable[[bytes], bool]:
        """Whether some bytes occur anywhere in the store's files: the database with its
        free pages, its ``-wal`` and its ``-journal`` (``:memory:``: the serialized
        database, which needs Python 3.11; on 3.10 the hook is absent there)."""
        if self.in_memory and not hasattr(sqlite3.Connection, "serialize"):
            raise AttributeError("chatkeep_storage_contains needs Connection.serialize (3.11)")
        return self._storage_contains

    def _storage_contains(self, data: bytes) -> bool:
        self._check_open()
        if self.in_memory:
            handle = self._handle()
            with handle.lock, self._faults.mapped():
                image: bytes = handle.connection.serialize()  # type: ignore[attr-defined,unused-ignore]
            return data in image
        import subprocess
        import sys

        # Not read here: closing a descriptor of the database file would drop every POSIX
        # lock this process holds on it, SQLite's included. A child process reads instead.
        files = [self._file + suffix for suffix in ("", "-wal", "-journal")]
        answer = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _SEARCH_FILES, *files],
            input=data,
            capture_output=True,
            check=True,
        )
        return answer.stdout == b"1"

    def chatkeep_durability(self) -> str:
        """What an acknowledged append survives with this handle's settings."""
        if self.path == MEMORY:
            return "nothing"
        return "power" if self.options.synchronous in ("full", "extra") else "process"

    def chatkeep_expiry(self, session_id: str) -> float | None:
        """When the session expires (seconds since the epoch, the ``expires_at`` its last
        append stored), ``None`` for never or no session (a test hook of
        ``chatkeep.testing``)."""
        self._check_open()
        handle = self._handle()
        with handle.lock, self._faults.mapped():
            if self._no_tables and self._tables_missing(handle.connection):
                return None
            row = handle.connection.execute(_SELECT_EXPIRY, (self._key(session_id),)).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def chatkeep_set_updated(self, session_id: str, updated: float) -> None:
        """Set the session's ``updated_at`` (the time of its last append, which ``recent``
        orders by) to ``updated`` (a test hook of ``chatkeep.testing``, so the suite can
        make ties)."""
        self._refuse_writes("chatkeep_set_updated")
        key = self._key(session_id)

        def update(connection: sqlite3.Connection) -> None:
            if connection.execute(_SET_UPDATED_AT, (float(updated), key)).rowcount != 1:
                raise KeyError(f"no session {session_id!r}")

        self._write(update)

    def chatkeep_damage(self, session_id: str, position: int, kind: str) -> None:
        """Damage the record at ``position`` behind the store's back, as another program
        writing to the file could: ``"garbage"`` (other bytes), ``"truncated"`` (cut
        short) or ``"missing"`` (its row deleted)."""
        statements = _DAMAGE
        if kind not in statements:
            raise NotImplementedError(kind)
        self._refuse_writes("chatkeep_damage")

        def damage(connection: sqlite3.Connection) -> None:
            row = connection.execute(_SELECT_SESSION_ID, (self._key(session_id),)).fetchone()
            if row is None:
                raise IndexError(f"session {session_id!r} does not exist")
            cursor = connection.execute(statements[kind], ((row[0] << SEQ_BITS) + position,))
            if cursor.rowcount != 1:
                raise IndexError(f"session {session_id!r} has no record at {position}")

        self._write(damage)

    # -- optional capabilities -------------------------------------------------------------

    def delete(self, session_id: str) -> None:
        """Erase the session and all its records (no-op for an unknown session).

        Erasure, not only unlinking: ``secure_delete`` overwrites the freed cells and pages,
        and the journal keeps no old image of them (see :meth:`_erase`).
        """
        self._refuse_writes("delete")
        self._erase(_delete, self._key(session_id))

    def _erase(self, work: Callable[..., T], *arguments: Any) -> T:
        """Run an erasing transaction, then leave no copy of the erased bytes in the journal.

        ``journal_size_limit = 0`` for the transaction makes a ``persist`` journal (which
        keeps the pages' old images after a commit) shrink to nothing when it commits; a
        ``wal_checkpoint(TRUNCATE)`` afterwards copies the WAL into the file and empties it
        (the WAL holds every page's earlier versions). The checkpoint waits up to
        ``timeout`` for other connections' reads; if one still reads, the old frames stay
        in the WAL until the next checkpoint that completes.
        """
        if self.in_memory:
            return self._write(work, *arguments)
        self._pragma("journal_size_limit", "0")
        try:
            result = self._write(work, *arguments)
        finally:
            self._pragma("journal_size_limit", "-1")
        handle = self._handle()
        with handle.lock, self._faults.mapped():
            handle.connection.execute(pragma("wal_checkpoint", "TRUNCATE")).fetchall()
        return result

    def _pragma(self, name: str, value: str) -> None:
        self._check_open()
        handle = self._handle()
        with handle.lock, self._faults.mapped():
            handle.connection.execute(pragma(name, value)).fetchall()

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        """Yield live session ids in code-point order, lazily, ``_LIST_PAGE`` per query.

        ``prefix`` matches literally (``%`` and ``_`` are ordinary characters) and
        case-sensitively. Each page is its own query, so no read transaction stays open
        between items and the iterator may be resumed from any thread.
        """
        tenant = self._tenant
        bounds = self._key_range(prefix)
        if bounds is None:
            return
        lower, upper = bounds
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

    def _key_range(self, prefix: str | None) -> tuple[str, str | None] | None:
        """The stored keys (tenant + session id) that ``prefix`` selects, as ``(lower,
        upper)`` (``upper`` exclusive, ``None``: no bound); ``None`` when no valid session
        id can start with ``prefix`` (a lone surrogate)."""
        lower = self._tenant + (prefix or "")
        if prefix:
            try:
                prefix.encode("utf-8")
            except UnicodeEncodeError:
                return None
        return lower, prefix_successor(lower) if lower else None

    def _list_page(self, lower: str, inclusive: bool, upper: str | None) -> list[str]:
        self._check_open()
        sql = _LIST_SQL[inclusive, upper is not None]
        now = self._clock()
        parameters = (lower, now, _LIST_PAGE) if upper is None else (lower, upper, now, _LIST_PAGE)
        handle = self._handle()
        with handle.lock, self._faults.mapped():
            if self._no_tables and self._tables_missing(handle.connection):
                return []
            return [row[0] for row in handle.connection.execute(sql, parameters)]

    def recent_sessions(
        self, prefix: str | None, before: tuple[float, str] | None, limit: int
    ) -> list[tuple[str, float]]:
        """Up to ``limit`` live sessions (id, last append time) newest first, ties by id
        descending, after the keyset cursor ``before`` (the ``recent`` capability).

        One backward walk of the ``(updated_at, session_id)`` index per query, from the
        cursor: the cost is that of the sessions returned (plus, in the default namespace,
        the named tenants' newer sessions it steps over, and with ``prefix``, the newer
        sessions outside it). ``updated_at`` is the :func:`time.time` (or ``clock``) of the
        session's last append that stored a record.
        """
        tenant = self._tenant
        bounds = self._key_range(prefix)
        if bounds is None:
            return []
        lower, upper = bounds
        cursor = (float("inf"), "") if before is None else (before[0], tenant + before[1])
        found: list[tuple[str, float]] = []
        while len(found) < limit:
            want = limit - len(found)
            page = self._recent_page(cursor, lower, upper, want, not prefix)
            for key, updated in page:
                if tenant or "\x00" not in key:  # the default namespace: skip tenants' keys
                    found.append((key[len(tenant) :], updated))
            if len(page) < want:
                break
            cursor = (page[-1][1], page[-1][0])
        return found

    def _recent_page(
        self,
        cursor: tuple[float, str],
        lower: str,
        upper: str | None,
        limit: int,
        walk: bool,
    ) -> list[tuple[str, float]]:
        self._check_open()
        sql = _RECENT_SQL[upper is not None, walk]
        parameters = (*cursor, lower, upper, self._clock(), limit)
        handle = self._handle()
        with handle.lock, self._faults.mapped():
            if self._no_tables and self._tables_missing(handle.connection):
                return []
            return [(row[0], row[1]) for row in handle.connection.execute(sql, parameters)]

    def purge_expired(self) -> int:
        """Erase every expired session now and return how many there were.

        Expired sessions already read as empty and are erased lazily by appends; call this
        (from a scheduled job, say) to reclaim their space sooner.
        """
        self._refuse_writes("purge_expired")
        total = 0
        while True:
            purged = self._erase(_purge, self._clock(), _PURGE_BATCH)
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
        if handles and self._moved() is not None:
            # SQLite keeps the WAL of a moved file on close (it cannot tell whose it is now):
            # fold it into the file this store opened first, wherever that file is now.
            with handles[0].lock:
                _salvage(handles[0].connection)
        for handle in handles:
            with handle.lock:
                handle.connection.close()
        if self.read_only and not self.in_memory:
            _tidy_wal(self._file)
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
        self._writers = _writers_of(self._identity)  # a parent's thread may hold the old one


# The child process of SQLiteStore.chatkeep_storage_contains: is stdin in one of the files?
_SEARCH_FILES = """
import sys
data = sys.stdin.buffer.read()
found = False
for name in sys.argv[1:]:
    try:
        with open(name, "rb") as file:
            found = found or data in file.read()
    except FileNotFoundError:
        pass
sys.stdout.write("1" if found else "0")
"""


def _cannot_share_memory(error: BaseException | None) -> bool:
    """Whether reading a WAL file read-only failed for want of its ``-shm`` file."""
    if not isinstance(error, sqlite3.OperationalError):
        return False
    name = getattr(error, "sqlite_errorname", "")  # Python 3.11+
    if name:
        return name in ("SQLITE_READONLY_DIRECTORY", "SQLITE_CANTOPEN", "SQLITE_READONLY_CANTINIT")
    message = str(error)
    return "readonly database" in message or "unable to open" in message


def _identity(status: os.stat_result) -> tuple[int, int]:
    return status.st_dev, status.st_ino


def _salvage(connection: sqlite3.Connection) -> None:
    """Copy a moved or deleted file's WAL into the file itself (through the connection's own
    descriptors) and empty it, so acknowledged appends stay with the file and a WAL left at
    the old name cannot be applied to whatever file appears there. A no-op without WAL."""
    with contextlib.suppress(sqlite3.Error):
        connection.execute(pragma("wal_checkpoint", "TRUNCATE")).fetchall()


# -- transaction bodies (run inside SQLiteStore._write) -----------------------------------------


def _append(
    connection: sqlite3.Connection,
    session_id: str,
    records: list[Record],
    now: float,
    expires_at: float | None,
) -> int | None:
    """The append of a turn's few records to a live session in two statements: reserve
    their positions (the session's row, with its new length, time and expiry), then insert
    them. Anything else (a new or expired session, a big batch, an id met before) takes
    :func:`_append_checked`, which looks before it writes.

    Returns the row id of the batch's first record when the whole batch was stored in
    consecutive rows from there (the full-text index writes its words without looking
    them up), else ``None`` (a retry: some or all ids were stored already)."""
    count = len(records)
    if count <= _INSERT_ROWS_MAX:
        reserved = connection.execute(
            _RESERVE_POSITIONS, (count, expires_at, now, session_id)
        ).fetchall()
        if reserved:
            ((session, end),) = reserved
            if end > MAX_RECORDS:
                raise StoreFull(
                    f"session {label(session_id)!r} would exceed {MAX_RECORDS:,} records"
                )
            base: int = (session << SEQ_BITS) + end - count
            parameters: list[Any] = []
            for offset, record in enumerate(records):
                parameters += (base + offset, session, record.id, record.data)
            if connection.execute(_INSERT_RECORDS[count], parameters).rowcount == count:
                return base
            # An id stored already (a retry) or a stray row in the way: OR IGNORE left holes
            # and the session row was moved on. Start over in a new transaction and look
            # first (a retry that stores nothing must keep the session's time).
            connection.execute("ROLLBACK")
            connection.execute("BEGIN IMMEDIATE")
    return _append_checked(connection, session_id, records, now, expires_at)


def _append_checked(
    connection: sqlite3.Connection,
    session_id: str,
    records: list[Record],
    now: float,
    expires_at: float | None,
) -> int | None:
    """:func:`_append` looking first; returns as it does."""
    row = connection.execute(_SELECT_SESSION, (session_id,)).fetchone()
    count = len(records)
    if row is None:
        session: int = connection.execute(
            _INSERT_SESSION, (session_id, count, expires_at, now)
        ).lastrowid  # type: ignore[assignment]  # an INSERT always sets it
        if session > MAX_SESSIONS:
            raise StoreFull(f"the SQLite store holds its maximum of {MAX_SESSIONS:,} sessions")
        length = 0
    else:
        session, length, old_expiry = row
        if old_expiry is not None and old_expiry <= now:
            # Expired but not purged yet: the session starts over, its old ids forgotten.
            connection.execute(_DELETE_RECORDS, session_range(session))
            delete_words(connection, session)
            length = 0
    if length + count > MAX_RECORDS:
        raise StoreFull(f"session {label(session_id)!r} would exceed {MAX_RECORDS:,} records")
    base = (session << SEQ_BITS) + length
    if count <= _INSERT_ROWS_MAX:  # the usual batch (a turn's few messages): one statement
        parameters: list[Any] = []
        for offset, record in enumerate(records):
            parameters += (base + offset, session, record.id, record.data)
        inserted = connection.execute(_INSERT_RECORDS[count], parameters).rowcount
    else:
        inserted = connection.executemany(
            _INSERT_RECORD,
            [(base + offset, session, rec.id, rec.data) for offset, rec in enumerate(records)],
        ).rowcount
    first: int | None = base
    if inserted != count:
        # Some ids were stored already (a retried batch): OR IGNORE left holes in seq. An id
        # stored with other data refuses the whole batch (the transaction rolls back).
        _check_stored(connection, session_id, session, length, records)
        inserted = _insert_skipping_stored(connection, session, length, records)
        first = None
    elif row is None:
        return first  # the new session row was inserted with its final length
    updated_at = now if inserted else None  # a retry that stored nothing keeps its time
    connection.execute(_UPDATE_SESSION, (length + inserted, expires_at, updated_at, session))
    return first


def _append_if(
    connection: sqlite3.Connection,
    session_id: str,
    records: list[Record],
    now: float,
    expires_at: float | None,
    *,
    after: str | None,
) -> int | None:
    """:func:`_append` when ``after`` is the session's last record id; returns as it does."""
    row = connection.execute(_SELECT_SESSION, (session_id,)).fetchone()
    last = None
    if row is not None:
        session, length, expiry = row
        if length and (expiry is None or expiry > now):
            if _check_stored(connection, session_id, session, length, records) == len(records):
                return None  # an exact retry of a call that was stored: a no-op
            last = connection.execute(
                _SELECT_RECORD_ID, ((session << SEQ_BITS) + length - 1,)
            ).fetchone()[0]
    if last != after:
        raise AppendConflict(label(session_id), after)
    return _append(connection, session_id, records, now, expires_at)


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
    below = (session << SEQ_BITS) + length
    stored = 0
    for record in records:
        row = connection.execute(_SELECT_STORED, (session, record.id, below)).fetchone()
        if row is not None:
            if bytes(row[0]) != record.data:
                raise RecordConflict(label(session_id), record.id)
            stored += 1
    return stored


def _insert_skipping_stored(
    connection: sqlite3.Connection, session: int, length: int, records: list[Record]
) -> int:
    """Re-insert a batch with contiguous seq numbers, skipping ids already stored."""
    base = session << SEQ_BITS
    connection.execute(_DELETE_RECORDS, (base + length, base + MAX_RECORDS))
    seq = length
    for record in records:
        cursor = connection.execute(_INSERT_RECORD, (base + seq, session, record.id, record.data))
        seq += cursor.rowcount
    return seq - length


def _delete(connection: sqlite3.Connection, session_id: str) -> None:
    row = connection.execute(_SELECT_SESSION_ID, (session_id,)).fetchone()
    if row is not None:
        connection.execute(_DELETE_RECORDS, session_range(row[0]))
        connection.execute(_DELETE_SESSION, row)
        delete_words(connection, row[0])


def _purge(connection: sqlite3.Connection, now: float, limit: int) -> int:
    expired = connection.execute(_SELECT_EXPIRED, (now, limit)).fetchall()
    connection.executemany(_DELETE_RECORDS, [session_range(row[0]) for row in expired])
    connection.executemany(_DELETE_SESSION, expired)
    for (session,) in expired:
        delete_words(connection, session)
    return len(expired)


# -- fork safety ---------------------------------------------------------------------------

_open_stores: weakref.WeakSet[SQLiteStore] = weakref.WeakSet()
_inherited: list[_Handle] = []  # parents' connections, kept unclosed in forked children


def _after_fork_in_child() -> None:
    global _writers_guard, _writers_by_file
    _writers_guard = threading.Lock()
    _writers_by_file = weakref.WeakValueDictionary()
    for store in list(_open_stores):
        store._forget_connections()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _tidy_wal(file: str) -> None:
    """After a ``mode=ro`` handle closed: remove the empty ``-wal``/``-shm`` files its
    reads made, as a writer's last close does.

    A read-only connection cannot delete them; a read-write connection that reads once and
    closes can, and SQLite does it only when that connection is the last one on the file
    (an empty log checkpoints without writing to the database). A file this process cannot
    write keeps them, as before.
    """
    wal = file + "-wal"
    try:
        if os.path.getsize(wal) != 0:
            return  # a writer's log: its own last close folds and removes it
    except OSError:
        return
    try:
        connection = sqlite3.connect(f"{Path(file).as_uri()}?mode=rw", uri=True, timeout=0)
    except sqlite3.Error:
        return
    try:
        connection.execute("PRAGMA query_only = ON")
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error:
        pass
    finally:
        connection.close()
