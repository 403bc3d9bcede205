"""The PostgreSQL backend: :class:`PostgresStore`, with native sync and async paths.

Each hook is one round trip: ``append`` calls the server-side ``append`` function (lock the
session row, skip stored ids, insert the batch at consecutive positions, bump the length, in
one transaction); ``read`` is one statement that turns the slice into a position range using
the session's length and reads it through the primary key, so a tail read costs O(k), and
whose header row says how many records the slice must hold (a missing row raises
:class:`~chatkeep.core.CorruptRecord`). Connection-level failures are retried a bounded
number of times (safe: every hook is idempotent), then surface as
:class:`~chatkeep.core.StoreUnavailable`; every other driver error goes through the one
table of :mod:`chatkeep.postgres.faults`. With ``mode=ro`` the handle never writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import struct
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import timedelta
from functools import partial
from typing import Any, ClassVar, NoReturn

import psycopg
from psycopg.rows import RowMaker, tuple_row
from psycopg.types.numeric import Int8
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from chatkeep.core.backend import (
    CorruptRecord,
    Record,
    StoreUnavailable,
    prefix_upper_bound,
    redact_url,
)

from . import sql as pgsql
from .arrays import ByteaArray, TextArray, register
from .config import PostgresOptions, parse_url, password_forms, with_server_options
from .faults import RETRYABLE, Call, Faults, ReadOnlyStore, backoff, is_retryable
from .fulltext import FulltextHooks
from .layout import Names
from .migrate import ensure_schema, readable_version
from .plugin import CAPABILITIES
from .sql import Queries

__all__ = ["PostgresStore"]

#: Statement parameters: positional or named.
Params = Sequence[Any] | dict[str, Any]

#: Reads before giving up on a session whose log changes between a short read and the check
#: of its positions (only a concurrent repair or delete does that).
_READ_ATTEMPTS = 3

#: The statement of each kind of ``chatkeep_damage``.
_DAMAGE = {
    "garbage": "damage_garbage",
    "truncated": "damage_truncated",
    "missing": "damage_missing",
}


#: Builds a :class:`Record` from a ``(record_id, data)`` row in C: ``Record._make`` is a
#: Python-level classmethod, a quarter of a read's client time at 50 rows.
_make_record = partial(tuple.__new__, Record)


def _record_rows(cursor: Any) -> RowMaker[Record]:
    """psycopg row factory building :class:`Record` straight from ``(record_id, data)``."""
    return _make_record


def _complete(rows: list[Record]) -> list[Record] | None:
    """The records of a read's reply, or ``None`` when a position of the slice is missing.

    The reply is a header row (``data``: the slice's first position and end) followed by
    the records; none at all for an unknown or expired session.
    """
    if not rows:
        return []
    low, high = struct.unpack(pgsql.READ_HEADER_FORMAT, rows[0].data)
    del rows[0]
    return rows if len(rows) == max(high - low, 0) else None


def _raise_gap(session_id: str, rows: list[tuple[int, int, int | None]]) -> None:
    """Raise :class:`CorruptRecord` for the first position of ``rows`` (``low, high, seq``
    of every record of the slice) that has no record; return if none is missing."""
    if not rows:
        return
    low, high = rows[0][0], rows[0][1]
    present = {row[2] for row in rows}
    for position in range(low, high):
        if position not in present:
            raise CorruptRecord(
                session_id,
                position,
                "the record's row is missing from the table (a gap in the log)",
            )


def _raise_unsettled(session_id: str) -> NoReturn:
    raise StoreUnavailable(
        f"session {session_id!r} changed between {_READ_ATTEMPTS} reads and the check of "
        "their positions; retry the read"
    )


class PostgresStore(FulltextHooks):
    """Session logs in PostgreSQL tables (see the package README for the layout).

    Open it through chatkeep (``open_store("postgresql://user@host/db?schema=chat")``) or
    directly::

        store = PostgresStore("postgresql://app@db.internal/app", namespace="tenant-7")
        store.append("s1", [Record("m1", b"{}")])
        store.read("s1", start=-50)

    Every option of :class:`~chatkeep.postgres.config.PostgresOptions` may be given as a
    keyword or as a URL query parameter. Nothing connects until the first call; that call
    applies pending schema migrations (once, under an advisory lock).
    """

    capabilities: ClassVar[frozenset[str]] = frozenset(CAPABILITIES)

    def __init__(self, url: str, **options: Any) -> None:
        params, settings = parse_url(url, options)
        self.options: PostgresOptions = settings
        #: The URL with its password replaced by ``***`` (safe to log).
        self.url: str = redact_url(url)
        # Connection parameters hold the password: never printed, never in an error.
        # Setup (migrations, the read-only check) runs without statement_timeout: waiting on
        # the migration lock while another process migrates must not time out.
        self._params = with_server_options(
            params, statement_timeout=None, read_only=settings.read_only
        )
        self._pool_params: dict[str, Any] = {
            **with_server_options(
                params,
                statement_timeout=settings.statement_timeout,
                read_only=settings.read_only,
            ),
            "autocommit": True,
            "prepare_threshold": settings.prepare_threshold,
        }
        password = str(params.get("password") or "")
        self._secrets: tuple[str, ...] = tuple({*password_forms(url), password} - {""})
        self._faults = Faults(self.url, self._secrets)
        self._names = Names(settings.schema, settings.table_prefix)
        self._namespace = settings.namespace or ""
        self._ttl = None if settings.ttl is None else timedelta(seconds=settings.ttl)
        self._lock = threading.Lock()
        self._queries: Queries | None = None
        self._pool: ConnectionPool | None = None
        self._apool: AsyncConnectionPool | None = None
        self._apool_loop: asyncio.AbstractEventLoop | None = None
        self._apool_guard: asyncio.Task[None] | None = None
        # Every guard task still running, strongly held: the event loop keeps only weak
        # references to tasks, and a guard replaced by another loop's would be collected
        # while pending (its pool then closed from whatever loop runs the collector).
        self._guards: set[asyncio.Task[None]] = set()
        self._closed = False

    @classmethod
    def from_url(cls, url: str, **options: Any) -> PostgresStore:
        """Open ``postgresql://...`` or ``postgres://...`` (what ``open_store`` calls)."""
        return cls(url, **options)

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> PostgresStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return (
            f"<PostgresStore {self.url} schema={self.options.schema!r} "
            f"table_prefix={self.options.table_prefix!r} namespace={self._namespace!r}"
            f"{' mode=ro' if self.options.read_only else ''}>"
        )

    # -- failure handling -----------------------------------------------------------------

    def _raise_closed(self) -> NoReturn:
        raise StoreUnavailable(f"the PostgreSQL store {self.url} is closed; open a new one")

    def _writable(self, action: str) -> None:
        """Refuse ``action`` on a read-only handle, before anything reaches the server."""
        if self.options.read_only:
            raise ReadOnlyStore(action)

    # -- setup: migrations, statements, pools ---------------------------------------------

    def _prepare(self) -> Queries | None:
        """Apply pending migrations (if allowed) and render the statements, once.

        ``None`` only for a read-only handle on a database without chatkeep's tables (it
        reads as empty, and checks again on its next call).
        """
        if self._queries is None:
            self._migrate(allow=self.options.migrate)
        return self._queries

    def _migrate(self, *, allow: bool) -> int:
        call = Call("connecting")
        while True:
            with self._faults.mapped(call):
                try:
                    with psycopg.connect(**self._params, autocommit=True) as conn:
                        if self.options.read_only:  # never creates or migrates anything
                            if readable_version(conn, self._names) == 0:
                                return 0
                            applied = 0
                        else:
                            applied = ensure_schema(conn, self._names, migrate=allow)
                        self._queries = Queries.render(self._names, conn)
                    return applied
                except RETRYABLE as exc:
                    if not is_retryable(exc) or call.attempts > self.options.retries:
                        raise
            time.sleep(backoff(call.attempts))
            call = call._replace(attempts=call.attempts + 1)

    def migrate(self) -> int:
        """Apply pending schema migrations now and return how many this call applied.

        Normally unnecessary: the first operation migrates (unless ``migrate=False``). Useful
        in a deploy step run with a more privileged role. Safe to call from many processes
        at once; migrations are serialized by an advisory lock and applied exactly once.
        """
        self._writable("migrate")
        with self._lock:
            if self._closed:
                self._raise_closed()
            return self._migrate(allow=True)

    def _sync_pool(self) -> tuple[ConnectionPool, Queries] | None:
        pool, queries = self._pool, self._queries
        if pool is not None and queries is not None:
            return pool, queries
        with self._lock:
            if self._closed:
                self._raise_closed()
            queries = self._prepare()
            if queries is None:
                return None  # read-only, and no tables to read: nothing needs a pool
            if self._pool is None:
                pool = ConnectionPool(
                    kwargs=self._pool_params,
                    min_size=self.options.pool_min_size,
                    max_size=self.options.pool_max_size,
                    timeout=self.options.pool_timeout,
                    name="chatkeep-postgres",
                    configure=register,
                    open=False,
                )
                pool.open(wait=False)
                # Wait for the first connection: a request queued before it would make the
                # pool grow, and psycopg_pool hands out idle connections in FIFO order, so
                # a single caller would then alternate between backends (slower). On
                # timeout, requests wait (and retry) for a connection as usual.
                with contextlib.suppress(PoolTimeout):
                    pool.wait(timeout=self.options.pool_timeout)
                self._pool = pool
            return self._pool, queries

    async def _async_pool(self) -> tuple[AsyncConnectionPool, Queries] | None:
        loop = asyncio.get_running_loop()
        pool, queries = self._apool, self._queries
        if pool is not None and queries is not None and self._apool_loop is loop:
            return pool, queries
        if self._closed:
            self._raise_closed()
        if queries is None:
            queries = await asyncio.to_thread(self._prepare_locked)
            if queries is None:
                return None  # read-only, and no tables to read
        # An async pool belongs to one event loop; a new loop (another asyncio.run) gets a
        # new pool, and the guard below closed the old one when its loop shut down.
        fresh = AsyncConnectionPool(
            kwargs=self._pool_params,
            min_size=self.options.pool_min_size,
            max_size=self.options.pool_max_size,
            timeout=self.options.pool_timeout,
            name="chatkeep-postgres-async",
            configure=_aregister,
            open=False,
        )
        await fresh.open(wait=False)
        with contextlib.suppress(PoolTimeout):
            await fresh.wait(timeout=self.options.pool_timeout)  # see _sync_pool
        with self._lock:
            if self._closed:
                winner = None
            elif self._apool is None or self._apool_loop is not loop:
                self._apool, self._apool_loop = fresh, loop
                self._apool_guard = loop.create_task(
                    self._guard(fresh), name="chatkeep-postgres-pool-guard"
                )
                self._guards.add(self._apool_guard)
                self._apool_guard.add_done_callback(self._guards.discard)
                return fresh, queries
            else:
                winner = self._apool  # another task of this loop got there first
        await fresh.close()
        if winner is None:
            self._raise_closed()
        return winner, queries

    async def _guard(self, pool: AsyncConnectionPool) -> None:
        """Close ``pool`` when its event loop shuts down.

        ``asyncio.run`` cancels every remaining task before closing the loop. psycopg_pool's
        workers swallow that cancellation while they are connecting, so a pool left open
        would hang the shutdown forever; this task, cancelled at the same moment, closes the
        pool, which stops those workers. ``aclose``/``close`` cancel it the same way.
        """
        try:
            await asyncio.get_running_loop().create_future()  # until cancelled
        except asyncio.CancelledError:
            pass
        finally:
            with self._lock:
                if self._apool is pool:
                    self._apool = self._apool_loop = self._apool_guard = None
            await pool.close(timeout=5)

    def _prepare_locked(self) -> Queries | None:
        with self._lock:
            if self._closed:
                self._raise_closed()
            return self._prepare()

    # -- one statement, retried -------------------------------------------------------------

    def _run(
        self, call: Call, statement: str, params: Params, row_factory: Any = tuple_row
    ) -> list[Any]:
        """Execute one of the rendered statements and fetch its rows, retrying connection
        failures; every other error leaves through the fault table."""
        while True:
            ready = self._sync_pool()
            if ready is None:
                return []  # read-only handle, no chatkeep tables: every query is empty
            pool, queries = ready
            with self._faults.mapped(call):
                try:
                    with pool.connection() as conn:
                        cursor = conn.cursor(binary=True, row_factory=row_factory)
                        cursor.execute(getattr(queries, statement), params)
                        return cursor.fetchall() if cursor.description else []
                except RETRYABLE as exc:
                    if self._closed:
                        self._raise_closed()
                    if not is_retryable(exc) or call.attempts > self.options.retries:
                        raise
            if call.attempts == 1:
                pool.check()  # drop every idle connection the same outage broke
            time.sleep(backoff(call.attempts))
            call = call._replace(attempts=call.attempts + 1)

    async def _arun(
        self, call: Call, statement: str, params: Params, row_factory: Any = tuple_row
    ) -> list[Any]:
        """Async :meth:`_run`."""
        while True:
            ready = await self._async_pool()
            if ready is None:
                return []
            pool, queries = ready
            with self._faults.mapped(call):
                try:
                    async with pool.connection() as conn:
                        cursor = conn.cursor(binary=True, row_factory=row_factory)
                        await cursor.execute(getattr(queries, statement), params)
                        return await cursor.fetchall() if cursor.description else []
                except RETRYABLE as exc:
                    if self._closed:
                        self._raise_closed()
                    if not is_retryable(exc) or call.attempts > self.options.retries:
                        raise
            if call.attempts == 1:
                await pool.check()
            await asyncio.sleep(backoff(call.attempts))
            call = call._replace(attempts=call.attempts + 1)

    # -- parameters ---------------------------------------------------------------------------

    def _append_params(self, session_id: str, records: list[Record]) -> tuple[Any, ...]:
        # Dumped straight to the binary array format (see chatkeep.postgres.arrays).
        ids = TextArray([record.id for record in records])
        data = ByteaArray([record.data for record in records])
        return (self._namespace, session_id, ids, data, self._ttl)

    def _read_params(self, session_id: str, start: int, stop: int | None) -> dict[str, Any]:
        return {
            "namespace": self._namespace,
            "session_id": session_id,
            "start": Int8(start),
            "stop": None if stop is None else Int8(stop),
        }

    def _list_params(self, prefix: str | None, after: str) -> tuple[str, dict[str, Any]]:
        upper = None if not prefix else prefix_upper_bound(prefix)
        params = {
            "namespace": self._namespace,
            "lower": prefix or "",
            "after": after,
            "upper": upper,
            "limit": self.options.list_page_size,
        }
        return ("list_all" if upper is None else "list_bounded"), params

    def _recent_params(
        self, prefix: str | None, before: tuple[float, str] | None, limit: int
    ) -> tuple[str, dict[str, Any]]:
        upper = None if not prefix else prefix_upper_bound(prefix)
        at, after = (math.inf, "") if before is None else before
        params = {
            "namespace": self._namespace,
            "before_at": float(at),
            "before_id": after,
            "lower": prefix or "",
            "upper": upper,
            "limit": limit,
        }
        return ("recent_all" if upper is None else "recent_bounded"), params

    # -- sync hooks ---------------------------------------------------------------------------

    def append(self, session_id: str, records: list[Record]) -> None:
        """Append ``records`` atomically, skipping ids the session already has."""
        self._writable("append")
        self._run(Call("append", session_id), "append", self._append_params(session_id, records))

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        """Append only if the session still ends at record ``after`` (``None``: empty); else
        raise :class:`~chatkeep.core.AppendConflict`. One round trip: the function locks the
        session row, checks and appends in one transaction."""
        self._writable("append")
        self._run(
            Call("append", session_id, after),
            "append_if",
            (*self._append_params(session_id, records), after),
        )

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        """The records of ``log[start:stop]``, in order ([] for an unknown session).

        One round trip. A position of the slice whose row is missing (removed behind the
        store's back, or a stored length above the rows) raises
        :class:`~chatkeep.core.CorruptRecord` naming the session and the first missing
        position, never a shorter history; the records before it stay readable.
        """
        call, params = Call("read", session_id), self._read_params(session_id, start, stop)
        for _ in range(_READ_ATTEMPTS):
            records = _complete(self._run(call, "read", params, _record_rows))
            if records is not None:
                return records
            _raise_gap(session_id, self._run(call, "read_positions", params))
        _raise_unsettled(session_id)

    def delete(self, session_id: str) -> None:
        """Erase the session: its records and its row (waits for in-flight appends)."""
        self._writable("delete")
        self._run(Call("delete", session_id), "delete", (self._namespace, session_id))

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        """Yield live session ids (in code-point order), fetched a page at a time."""
        after = ""
        while True:
            statement, params = self._list_params(prefix, after)
            rows = self._run(Call("list_sessions"), statement, params)
            for (session_id,) in rows:
                yield session_id
            if len(rows) < self.options.list_page_size:
                return
            after = rows[-1][0]

    def recent_sessions(
        self, prefix: str | None, before: tuple[float, str] | None, limit: int
    ) -> list[tuple[str, float]]:
        """Up to ``limit`` live sessions (id, ``updated_at`` as epoch seconds) newest first,
        ties by id descending, after the cursor ``before`` (the ``recent`` capability): one
        query, a backward walk of the ``(namespace, updated_at, session_id)`` index. The
        time is the server's ``now()`` of the session's last append that stored a record.
        A ``mode=ro`` handle of a schema older than version 4 answers the same query
        without the index (a sort of the namespace's sessions)."""
        statement, params = self._recent_params(prefix, before, limit)
        rows = self._run(Call("recent_sessions"), statement, params)
        return [(session_id, float(at)) for session_id, at in rows]

    def chatkeep_durability(self) -> str:
        """What an acknowledged append survives (a test hook of ``chatkeep.testing``):
        ``"power"`` when the server syncs its WAL at commit (``fsync`` and
        ``synchronous_commit`` on, PostgreSQL's defaults), else ``"server"`` at best."""
        ready = self._sync_pool()
        with (
            ready[0].connection() if ready else psycopg.connect(**self._params, autocommit=True)
        ) as conn:
            fsync = conn.execute(pgsql.SHOW_FSYNC).fetchone()
            commit = conn.execute(pgsql.SHOW_SYNCHRONOUS_COMMIT).fetchone()
        synced = fsync is not None and fsync[0] == "on"
        committed = commit is not None and commit[0] in ("on", "remote_write", "remote_apply")
        return "power" if synced and committed else "server"

    def chatkeep_damage(self, session_id: str, position: int, kind: str) -> None:
        """Damage the record at ``position`` behind the store's back, as an operator with
        SQL could (a test hook of ``chatkeep.testing``): ``"garbage"`` (other bytes),
        ``"truncated"`` (its data cut short) or ``"missing"`` (its row deleted)."""
        statement = _DAMAGE.get(kind)
        if statement is None:
            raise NotImplementedError(kind)
        self._writable("chatkeep_damage")
        params = {
            "namespace": self._namespace,
            "session_id": session_id,
            "position": Int8(position),
        }
        if not self._run(Call("chatkeep_damage", session_id), statement, params):
            raise IndexError(f"session {session_id!r} has no record at position {position}")

    def chatkeep_expiry(self, session_id: str) -> float | None:
        """When the session expires (seconds since the epoch: the ``expires_at`` its last
        append stored, by the server's clock), ``None`` for never or no session (a test hook
        of ``chatkeep.testing``)."""
        params = {"namespace": self._namespace, "session_id": session_id}
        rows = self._run(Call("chatkeep_expiry", session_id), "expiry", params)
        return None if not rows or rows[0][0] is None else float(rows[0][0])

    def chatkeep_set_updated(self, session_id: str, updated: float) -> None:
        """Set the session's ``updated_at`` (the server's time of its last append, which
        ``recent`` orders by) to ``updated`` seconds since the epoch (a test hook of
        ``chatkeep.testing``, so the suite can make ties)."""
        params = {
            "namespace": self._namespace,
            "session_id": session_id,
            "updated": float(updated),
        }
        if not self._run(Call("chatkeep_set_updated", session_id), "set_updated", params):
            raise KeyError(f"no session {session_id!r}")

    def chatkeep_storage_contains(self, data: bytes) -> bool:
        """Whether ``data`` occurs in a live row of the store's tables (a test hook of
        ``chatkeep.testing``): record data, record and session ids, namespaces, of every
        namespace sharing the tables. Row versions already deleted but not yet vacuumed,
        the WAL, replicas and backups are not seen (see the README)."""
        rows = self._run(Call("chatkeep_storage_contains"), "storage_contains", {"needle": data})
        return bool(rows and rows[0][0])

    def purge_expired(self, *, all_namespaces: bool = False, batch_size: int = 1000) -> int:
        """Delete expired sessions (of this namespace, or all) and return how many.

        Expired sessions are already invisible to reads; purging reclaims their space. Run it
        from a scheduler, or in SQL: ``SELECT chatkeep.purge_expired();`` (pg_cron).
        """
        self._writable("purge_expired")
        namespace = None if all_namespaces else self._namespace
        total = 0
        while True:
            rows = self._run(Call("purge_expired"), "purge", (namespace, batch_size))
            purged = int(rows[0][0])
            total += purged
            if purged < batch_size:
                return total

    def close(self) -> None:
        """Close the connection pools. Idempotent; later calls raise StoreUnavailable."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
            loop, guard = self._apool_loop, self._apool_guard
        if pool is not None:
            pool.close()
        if guard is not None and loop is not None and not loop.is_closed():
            try:
                current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
            except RuntimeError:
                current = None
            if current is loop:
                guard.cancel()  # cannot block this loop: the guard closes the pool soon
            elif loop.is_running():
                asyncio.run_coroutine_threadsafe(_stop(guard), loop).result(timeout=10)
            else:  # a paused loop: the guard closes the pool when it runs again
                loop.call_soon_threadsafe(guard.cancel)

    # -- async hooks ----------------------------------------------------------------------------

    async def aappend(self, session_id: str, records: list[Record]) -> None:
        """Async :meth:`append`."""
        self._writable("append")
        params = self._append_params(session_id, records)
        await self._arun(Call("append", session_id), "append", params)

    async def aappend_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        """Async :meth:`append_if`."""
        self._writable("append")
        await self._arun(
            Call("append", session_id, after),
            "append_if",
            (*self._append_params(session_id, records), after),
        )

    async def aread(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        """Async :meth:`read`."""
        call, params = Call("read", session_id), self._read_params(session_id, start, stop)
        for _ in range(_READ_ATTEMPTS):
            records = _complete(await self._arun(call, "read", params, _record_rows))
            if records is not None:
                return records
            _raise_gap(session_id, await self._arun(call, "read_positions", params))
        _raise_unsettled(session_id)

    async def adelete(self, session_id: str) -> None:
        """Async :meth:`delete`."""
        self._writable("delete")
        await self._arun(Call("delete", session_id), "delete", (self._namespace, session_id))

    async def alist_sessions(self, prefix: str | None = None) -> AsyncIterator[str]:
        """Async :meth:`list_sessions`."""
        after = ""
        while True:
            statement, params = self._list_params(prefix, after)
            rows = await self._arun(Call("list_sessions"), statement, params)
            for (session_id,) in rows:
                yield session_id
            if len(rows) < self.options.list_page_size:
                return
            after = rows[-1][0]

    async def arecent_sessions(
        self, prefix: str | None, before: tuple[float, str] | None, limit: int
    ) -> list[tuple[str, float]]:
        """Async :meth:`recent_sessions`."""
        statement, params = self._recent_params(prefix, before, limit)
        rows = await self._arun(Call("recent_sessions"), statement, params)
        return [(session_id, float(at)) for session_id, at in rows]

    async def apurge_expired(self, *, all_namespaces: bool = False, batch_size: int = 1000) -> int:
        """Async :meth:`purge_expired`."""
        self._writable("purge_expired")
        namespace = None if all_namespaces else self._namespace
        total = 0
        while True:
            rows = await self._arun(Call("purge_expired"), "purge", (namespace, batch_size))
            purged = int(rows[0][0])
            total += purged
            if purged < batch_size:
                return total

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
            loop, guard = self._apool_loop, self._apool_guard
        if guard is not None and loop is not None and not loop.is_closed():
            if loop is asyncio.get_running_loop():
                await _stop(guard)
            elif loop.is_running():  # the pool lives on another thread's loop
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_stop(guard), loop))
        if pool is not None:
            await asyncio.to_thread(pool.close)


async def _aregister(connection: psycopg.AsyncConnection[Any]) -> None:
    """The async pool's ``configure``: :func:`~chatkeep.postgres.arrays.register`."""
    register(connection)


async def _stop(guard: asyncio.Task[None]) -> None:
    """Cancel a pool guard and wait until it has closed its pool."""
    guard.cancel()
    await asyncio.gather(guard, return_exceptions=True)
