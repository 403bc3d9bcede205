"""The PostgreSQL backend: :class:`PostgresStore`, with native sync and async paths.

Each hook is one round trip: ``append`` calls the server-side ``append`` function (lock the
session row, skip stored ids, insert the batch at consecutive positions, bump the length, in
one transaction); ``read`` is one statement that turns the slice into a position range using
the session's length and reads it through the primary key, so a tail read costs O(k).
Connection-level failures are retried a bounded number of times (safe: every hook is
idempotent), then surface as :class:`~chatkeep.core.StoreUnavailable`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import timedelta
from typing import Any, ClassVar, NoReturn

import psycopg
from psycopg.rows import RowMaker, tuple_row
from psycopg.types.numeric import Int8
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from chatkeep.core.backend import Record, StoreUnavailable, prefix_upper_bound, redact_url

from . import sql as pgsql
from .config import PostgresOptions, parse_url, password_forms, with_statement_timeout
from .faults import RETRYABLE, Call, Faults, backoff, is_retryable
from .layout import Names
from .migrate import ensure_schema
from .plugin import CAPABILITIES
from .sql import Queries

__all__ = ["PostgresStore"]

#: Statement parameters: positional or named.
Params = Sequence[Any] | dict[str, Any]


def _record_rows(cursor: Any) -> RowMaker[Record]:
    """psycopg row factory building :class:`Record` straight from ``(record_id, data)``."""
    return Record._make


class PostgresStore:
    """Session logs in PostgreSQL tables (see the package README for the layout).

    Open it through chatkeep (``open_store("postgresql://user@host/db?schema=chat")``) or
    directly::

        store = PostgresStore("postgresql://app@db.internal/app", namespace="tenant-7")
        store.append("s1", [Record("m1", b"{}")])
        store.read("s1", start=-50)

    Every option of :class:`~chatkeep.postgres.options.PostgresOptions` may be given as a
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
        self._params = params
        self._pool_params: dict[str, Any] = {
            **with_statement_timeout(params, settings.statement_timeout),
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
            f"table_prefix={self.options.table_prefix!r} namespace={self._namespace!r}>"
        )

    # -- failure handling -----------------------------------------------------------------

    def _raise_closed(self) -> NoReturn:
        raise StoreUnavailable(f"the PostgreSQL store {self.url} is closed; open a new one")

    # -- setup: migrations, statements, pools ---------------------------------------------

    def _prepare(self) -> Queries:
        """Apply pending migrations (if allowed) and render the statements, once."""
        if self._queries is None:
            self._migrate(allow=self.options.migrate)
        assert self._queries is not None
        return self._queries

    def _migrate(self, *, allow: bool) -> int:
        call = Call("connecting")
        while True:
            with self._faults.mapped(call):
                try:
                    # A plain connection without statement_timeout: waiting on the migration
                    # lock while another process migrates must not time out.
                    with psycopg.connect(**self._params, autocommit=True) as conn:
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
        with self._lock:
            if self._closed:
                self._raise_closed()
            return self._migrate(allow=True)

    def _sync_pool(self) -> tuple[ConnectionPool, Queries]:
        pool, queries = self._pool, self._queries
        if pool is not None and queries is not None:
            return pool, queries
        with self._lock:
            if self._closed:
                self._raise_closed()
            queries = self._prepare()
            if self._pool is None:
                pool = ConnectionPool(
                    kwargs=self._pool_params,
                    min_size=self.options.pool_min_size,
                    max_size=self.options.pool_max_size,
                    timeout=self.options.pool_timeout,
                    name="chatkeep-postgres",
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

    async def _async_pool(self) -> tuple[AsyncConnectionPool, Queries]:
        loop = asyncio.get_running_loop()
        pool, queries = self._apool, self._queries
        if pool is not None and queries is not None and self._apool_loop is loop:
            return pool, queries
        if self._closed:
            self._raise_closed()
        if queries is None:
            queries = await asyncio.to_thread(self._prepare_locked)
        # An async pool belongs to one event loop; a new loop (another asyncio.run) gets a
        # new pool, and the guard below closed the old one when its loop shut down.
        fresh = AsyncConnectionPool(
            kwargs=self._pool_params,
            min_size=self.options.pool_min_size,
            max_size=self.options.pool_max_size,
            timeout=self.options.pool_timeout,
            name="chatkeep-postgres-async",
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

    def _prepare_locked(self) -> Queries:
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
            pool, queries = self._sync_pool()
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
            pool, queries = await self._async_pool()
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
        ids = [record.id for record in records]
        data = [record.data for record in records]
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

    # -- sync hooks ---------------------------------------------------------------------------

    def append(self, session_id: str, records: list[Record]) -> None:
        """Append ``records`` atomically, skipping ids the session already has."""
        self._run(Call("append", session_id), "append", self._append_params(session_id, records))

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        """Append only if the session still ends at record ``after`` (``None``: empty); else
        raise :class:`~chatkeep.core.AppendConflict`. One round trip: the function locks the
        session row, checks and appends in one transaction."""
        self._run(
            Call("append", session_id, after),
            "append_if",
            (*self._append_params(session_id, records), after),
        )

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        """The records of ``log[start:stop]``, in order ([] for an unknown session)."""
        return self._run(
            Call("read", session_id),
            "read",
            self._read_params(session_id, start, stop),
            _record_rows,
        )

    def delete(self, session_id: str) -> None:
        """Erase the session: its records and its row (waits for in-flight appends)."""
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

    def chatkeep_durability(self) -> str:
        """What an acknowledged append survives (a test hook of ``chatkeep.testing``):
        ``"power"`` when the server syncs its WAL at commit (``fsync`` and
        ``synchronous_commit`` on, PostgreSQL's defaults), else ``"server"`` at best."""
        pool, _ = self._sync_pool()
        with pool.connection() as conn:
            fsync = conn.execute(pgsql.SHOW_FSYNC).fetchone()
            commit = conn.execute(pgsql.SHOW_SYNCHRONOUS_COMMIT).fetchone()
        synced = fsync is not None and fsync[0] == "on"
        committed = commit is not None and commit[0] in ("on", "remote_write", "remote_apply")
        return "power" if synced and committed else "server"

    def purge_expired(self, *, all_namespaces: bool = False, batch_size: int = 1000) -> int:
        """Delete expired sessions (of this namespace, or all) and return how many.

        Expired sessions are already invisible to reads; purging reclaims their space. Run it
        from a scheduler, or in SQL: ``SELECT chatkeep.purge_expired();`` (pg_cron).
        """
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
        params = self._append_params(session_id, records)
        await self._arun(Call("append", session_id), "append", params)

    async def aappend_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        """Async :meth:`append_if`."""
        await self._arun(
            Call("append", session_id, after),
            "append_if",
            (*self._append_params(session_id, records), after),
        )

    async def aread(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        """Async :meth:`read`."""
        return await self._arun(
            Call("read", session_id),
            "read",
            self._read_params(session_id, start, stop),
            _record_rows,
        )

    async def adelete(self, session_id: str) -> None:
        """Async :meth:`delete`."""
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

    async def apurge_expired(self, *, all_namespaces: bool = False, batch_size: int = 1000) -> int:
        """Async :meth:`purge_expired`."""
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


async def _stop(guard: asyncio.Task[None]) -> None:
    """Cancel a pool guard and wait until it has closed its pool."""
    guard.cancel()
    await asyncio.gather(guard, return_exceptions=True)
