"""AsyncRedisStore: chatkeep's storage contract on ``redis.asyncio`` (the asyncio half).

Native on ``redis.asyncio`` (no worker threads). An asyncio client belongs to the event loop
that made it, so the store keeps one per loop, made on first use there. Each has an
``asyncio.Semaphore`` of ``pool_size`` in front of it: concurrent callers beyond that wait
for a free connection rather than failing (redis-py's asyncio pools either raise when full
or, in some 5.x releases, deadlock when a connection attempt fails).

A cluster client learns the topology (``initialize()``) before each command is routed:
recent redis-py (seen in 8.1) has ``RedisCluster.execute_command`` choose the command's
routing policy *before* it initializes the client, so the first commands of a new client
(all of them, when many tasks start together) go to a random primary instead of their slot's
owner and come back MOVED.

:class:`~chatkeep.redis.store.RedisStore` (blocking) uses one of these for its ``a``-prefixed
methods; on its own, ``AsyncRedisStore`` is an async-only backend (its hooks are
``async def``), which the core's ``Store`` drives from blocking code on a private loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from chatkeep.core.backend import Record
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError

from .base import BACKFILL_SCAN_COUNT, RedisBase
from .clients import AsyncClient, connect_async
from .layout import BadElement, corrupt_record, decode_records, lrange_bounds, prefix_range
from .scripts import APPEND, DELETE, LIST_PAGE, RECENT_BACKFILL, RECENT_PAGE, Script

if TYPE_CHECKING:
    from .config import Settings

__all__ = ["AsyncRedisStore"]


@dataclass
class _Handle:
    """An asyncio client and the semaphore that bounds its concurrent commands."""

    client: AsyncClient
    slots: asyncio.Semaphore
    cluster: bool

    async def execute(self, *args: Any) -> Any:
        """Run one command, holding one of the ``slots`` while it is in flight."""
        async with self.slots:
            return await self.execute_unbounded(*args)

    async def execute_unbounded(self, *args: Any) -> Any:
        """Run one command; the caller holds a slot."""
        # try/except rather than _torn_down_as_connection_error(): this is every command's
        # path, and a generator-based context manager costs more than the rest of it here.
        try:
            if self.cluster:
                # Routes by the key's slot only once initialized (see the module docstring);
                # a no-op once it is, and after a fault it re-learns the topology here, once,
                # under redis-py's lock, instead of each concurrent command guessing.
                await self.client.initialize()
            return await self.client.execute_command(*args)
        except AttributeError as exc:
            if not _torn_down(exc):
                raise
            raise _connection_error(exc) from exc


class AsyncRedisStore(RedisBase):
    """Session logs in Redis, on ``redis.asyncio``: the same keys, scripts and options as
    :class:`~chatkeep.redis.store.RedisStore`, every hook an ``async def``. Example::

        store = AsyncRedisStore("redis://localhost:6379/0", namespace="acme")
        await store.append("s1", [Record("m1", b"hi")])
    """

    def _setup(self, settings: Settings) -> None:
        super()._setup(settings)
        self._handles_lock = threading.Lock()
        self._handles: dict[asyncio.AbstractEventLoop, _Handle] = {}

    @classmethod
    def _sharing(cls, base: RedisBase) -> AsyncRedisStore:
        """An async twin using ``base``'s settings (for the blocking store's a-methods)."""
        twin = cls.__new__(cls)
        twin._setup(base._settings)
        return twin

    def _handle(self) -> _Handle:
        loop = asyncio.get_running_loop()
        handle = self._handles.get(loop)
        if handle is None:
            with self._handles_lock:
                self._check_open()
                # Release the clients of loops that have ended (asyncio.run per call).
                for old in [old for old in self._handles if old.is_closed()]:
                    _abandon(self._handles.pop(old).client)
                handle = self._handles.get(loop)
                if handle is None:
                    handle = _Handle(
                        connect_async(self._settings),
                        asyncio.Semaphore(self._settings.pool_size),
                        self._settings.cluster,
                    )
                    self._handles[loop] = handle
                    _close_with(loop, self)
        return handle

    def _release(self, loop: asyncio.AbstractEventLoop) -> None:
        """Close this loop's client while the loop can still run it (called as the loop
        closes: asyncio.run's end, or a hand-made loop's close())."""
        with self._handles_lock:
            handle = self._handles.pop(loop, None)
        if handle is None or loop.is_closed():
            return
        if loop.is_running():  # close() from inside the loop: asyncio refuses it anyway
            with self._handles_lock:
                self._handles[loop] = handle
            return
        with contextlib.suppress(Exception):
            loop.run_until_complete(_aclose_client(handle.client))

    async def _command(self, *args: Any) -> Any:
        return await self._handle().execute(*args)

    async def _script(self, script: Script, *arguments: Any) -> Any:
        handle = self._handle()
        async with handle.slots:
            try:
                return await handle.execute_unbounded("EVALSHA", script.sha, *arguments)
            except NoScriptError:
                return await handle.execute_unbounded("EVAL", script.source, *arguments)

    # -- the hooks -------------------------------------------------------------------------

    async def append(self, session_id: str, records: list[Record]) -> None:
        """Append ``records`` atomically in one round trip; ids stored with the same data
        are skipped, an id stored with other data raises ``RecordConflict``."""
        self._check_open()
        if not getattr(self, "_marked", False):
            await self._mark_namespace()
        arguments = self._append_command(session_id, records, (b"0", b""))
        reply = await self._policy.arun("append", lambda: self._script(APPEND, *arguments))
        self._check_append(session_id, reply)

    async def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        """Append only if the session's last record is ``after`` (``None``: empty), in the
        same single script as :meth:`append`; else ``AppendConflict``."""
        self._check_open()
        if not getattr(self, "_marked", False):
            await self._mark_namespace()
        arguments = self._append_command(session_id, records, self._condition(after))
        reply = await self._policy.arun("append", lambda: self._script(APPEND, *arguments))
        self._check_append(session_id, reply, after)

    async def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        """``log[start:stop]`` of the session in one LRANGE; an unknown session is ``[]``."""
        self._check_open()
        bounds = lrange_bounds(start, stop)
        if bounds is None:
            return []
        first, last = bounds
        log_key = self._layout.binary_keys(session_id)[0]
        elements = await self._policy.arun(
            "read", lambda: self._command("LRANGE", log_key, first, last)
        )
        try:
            return decode_records(elements, first)
        except BadElement as bad:
            length = None
            if first < 0 and bad.position is None:
                length = await self._policy.arun("read", lambda: self._command("LLEN", log_key))
            raise corrupt_record(session_id, bad, first, length) from None

    async def delete(self, session_id: str) -> None:
        """Erase the session (its log, digests and index entry) in one script."""
        self._check_open()
        arguments = self._delete_command(session_id)
        await self._policy.arun("delete", lambda: self._script(DELETE, *arguments))

    async def list_sessions(self, prefix: str | None = None) -> AsyncIterator[str]:
        """The namespace's session ids (starting with ``prefix``), page by page from its
        index: each id once, memory bounded by a page. On a cluster the per-slot indexes are
        walked node by node, many per call."""
        self._check_open()
        await self._ensure_indexed()
        low, high = prefix_range(prefix)
        handle = self._handle()
        if self.is_cluster:

            async def grouped() -> list[tuple[Any, list[bytes]]]:
                await handle.client.initialize()
                return self._index_groups(handle.client.get_node_from_key)

            groups = await self._policy.arun("list_sessions", grouped)
        else:
            groups = self._index_groups(None)
        for node, keys in groups:
            offset, bound = 0, b""
            while offset < len(keys):
                page = _Page(self, node, self._page_command(keys[offset:], bound, low, high))
                ids, finished, bound = self._read_page(
                    await self._policy.arun("list_sessions", page)
                )
                for session_id in ids:
                    yield session_id
                offset += finished if bound else len(keys) - offset

    async def recent_sessions(
        self, prefix: str | None, before: tuple[float, str] | None, limit: int
    ) -> list[tuple[str, float]]:
        """Up to ``limit`` live sessions newest first after ``before`` (see
        :meth:`chatkeep.redis.RedisStore.recent_sessions`)."""
        self._check_open()
        await self._ensure_recent_indexed()
        cursor = self._recent_cursor(before)
        found: list[tuple[str, float]] = []
        while len(found) < limit:
            arguments = self._recent_command(prefix, cursor, limit - len(found))
            reply = await self._policy.arun(
                "recent_sessions", partial(self._script, RECENT_PAGE, *arguments)
            )
            done, cursor, pairs = self._read_recent(reply)
            found += pairs
            if done:
                break
        return found

    async def _on_node(self, node: Any, script: Script, arguments: list[Any]) -> Any:
        if node is None:
            return await self._script(script, *arguments)
        handle = self._handle()
        async with handle.slots:
            with _torn_down_as_connection_error():
                client = handle.client
                try:
                    return await client.execute_command(
                        "EVALSHA", script.sha, *arguments, target_nodes=node
                    )
                except NoScriptError:
                    return await client.execute_command(
                        "EVAL", script.source, *arguments, target_nodes=node
                    )

    async def _ensure_recent_indexed(self, *, mark: bool = False) -> None:
        """Async ``RedisStore._ensure_recent_indexed``."""
        if getattr(self, "_recent_indexed", False) and not mark:
            return
        await self._ensure_indexed(mark=mark)
        marker = self._layout.recent_marker()
        policy = self._policy
        if not await policy.arun("recent_sessions", lambda: self._command("EXISTS", marker)):
            index = self._layout.index_keys()[0]
            if mark or await policy.arun("recent_sessions", lambda: self._command("ZCARD", index)):
                bound = b"-"
                while bound:
                    arguments = self._backfill_recent_command(bound)
                    bound = await policy.arun(
                        "recent_sessions", partial(self._script, RECENT_BACKFILL, *arguments)
                    )
        self._recent_indexed = True

    async def _ensure_indexed(self, *, mark: bool = False) -> None:
        """Async ``RedisStore._ensure_indexed``."""
        if getattr(self, "_indexed", False) and not mark:
            return
        markers = self._indexed_markers()
        if self.is_cluster:  # the two markers live on different slots
            found = False
            for marker in markers:
                found = found or bool(
                    await self._policy.arun(
                        "list_sessions", partial(self._command, "EXISTS", marker)
                    )
                )
        else:
            found = bool(
                await self._policy.arun("list_sessions", partial(self._command, "EXISTS", *markers))
            )
        if found:
            self._indexed = True
            return
        handle = self._handle()
        nodes: list[Any] = [None]
        if self.is_cluster:

            async def primaries() -> list[Any]:
                await handle.client.initialize()
                return list(handle.client.get_primaries())

            nodes = await self._policy.arun("list_sessions", primaries)
        pattern = self._layout.every_namespace_scan_pattern()
        count = max(BACKFILL_SCAN_COUNT, self._settings.scan_count)
        wrote = False
        for node in nodes:
            cursor = 0
            while True:
                page = _AsyncScanPage(handle, node, cursor, pattern, count)
                cursor, keys = await self._policy.arun("list_sessions", page)
                for command in self._backfill_commands(keys):
                    scores = await self._policy.arun(
                        "list_sessions",
                        partial(self._command, "ZMSCORE", command[1], *command[3::2]),
                    )
                    command = self._only_missing(command, scores)
                    if command:
                        await self._policy.arun("list_sessions", partial(self._command, *command))
                        wrote = True
                if cursor == 0:
                    break
        if wrote or mark:
            for marker in markers:
                await self._policy.arun(
                    "list_sessions", partial(self._command, "SET", marker, b"1")
                )
        self._indexed = True

    async def _mark_namespace(self) -> None:
        """Async ``RedisStore._mark_namespace``."""
        if self._layout.recent_key() is None:
            await self._ensure_indexed(mark=True)
        else:
            await self._ensure_recent_indexed(mark=True)
        self._marked = True

    async def close(self) -> None:
        """Close this loop's client here, then every other loop's. Idempotent."""
        self._closed = True
        with self._handles_lock:
            mine = self._handles.pop(asyncio.get_running_loop(), None)
        try:
            if mine is not None:
                await _aclose_client(mine.client)
        finally:
            self._close_all()

    def _close_all(self) -> None:
        """Close every loop's client from blocking code (best effort for ended loops)."""
        self._closed = True
        with self._handles_lock:
            leftovers = list(self._handles.items())
            self._handles.clear()
        for loop, handle in leftovers:
            _close_from_sync(loop, handle.client)

    # The blocking store's damage hook reaches the same keys; nothing async is needed.


class _Page:
    """One listing call (a callable, so a retry repeats the same page)."""

    def __init__(self, store: AsyncRedisStore, node: Any, arguments: list[Any]) -> None:
        self.store, self.node, self.arguments = store, node, arguments

    async def __call__(self) -> Any:
        return await self.store._on_node(self.node, LIST_PAGE, self.arguments)


class _AsyncScanPage:
    """One SCAN call (a callable, so a retry repeats the same cursor)."""

    def __init__(self, handle: _Handle, node: Any, cursor: int, pattern: str, count: int):
        self.handle, self.node, self.cursor = handle, node, cursor
        self.pattern, self.count = pattern, count

    async def __call__(self) -> tuple[int, list[bytes]]:
        client = self.handle.client
        async with self.handle.slots:
            with _torn_down_as_connection_error():
                if self.node is None:
                    cursor, keys = await client.scan(
                        self.cursor, match=self.pattern, count=self.count
                    )
                    return int(cursor), list(keys)
                cursors, keys = await client.scan(
                    self.cursor, match=self.pattern, count=self.count, target_nodes=self.node
                )
                return int(next(iter(cursors.values()))), list(keys)


@contextlib.contextmanager
def _torn_down_as_connection_error() -> Iterator[None]:
    """Turn redis-py's use of a connection disconnected under it into a ConnectionError."""
    try:
        yield
    except AttributeError as exc:
        if not _torn_down(exc):
            raise
        raise _connection_error(exc) from exc


def _connection_error(exc: AttributeError) -> RedisConnectionError:
    return RedisConnectionError(f"connection closed by the driver while in use ({exc})")


def _torn_down(exc: AttributeError) -> bool:
    """Whether ``exc`` is redis-py using a connection that another task just disconnected.

    redis-py's asyncio cluster client disconnects connections that other tasks hold: on a
    connection error it disconnects the node's idle connections (``ClusterNode.
    disconnect_free_connections``) while they stay in the idle queue, where a concurrent
    command can take one and start using it, and ``RedisCluster.aclose()`` (on CLUSTERDOWN or
    an uncovered slot) disconnects every connection. ``Connection.disconnect()`` then sets
    the connection's reader and writer to None under the user, which fails with an
    AttributeError on None inside redis.asyncio (``'NoneType' object has no attribute
    'writelines'``) instead of a ConnectionError. The command is as safe to repeat as after
    any lost connection, so it is retried like one. Recognised narrowly: the error must be
    raised on None, in a redis.asyncio frame.
    """
    if getattr(exc, "obj", None) is not None or "'NoneType'" not in str(exc):
        return False
    frame = exc.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    module = frame.tb_frame.f_globals.get("__name__", "") if frame is not None else ""
    return isinstance(module, str) and module.startswith("redis.asyncio.")


async def _aclose_client(client: AsyncClient) -> None:
    closer = getattr(client, "aclose", None) or client.close  # aclose: redis-py >= 5.0.1
    await closer()
    pool = getattr(client, "connection_pool", None)  # a cluster client has none
    if pool is not None:
        await pool.disconnect()


def _close_from_sync(loop: asyncio.AbstractEventLoop, client: AsyncClient) -> None:
    """Best effort: close an asyncio client from blocking code, on its own loop."""
    if loop.is_closed():
        _abandon(client)
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        # Blocking close() called inside the loop: closing can only be scheduled.
        task = loop.create_task(_aclose_client(client))
        _closing.add(task)
        task.add_done_callback(_closing.discard)
        return
    with contextlib.suppress(Exception):  # the loop may be stopping under us
        if loop.is_running():
            asyncio.run_coroutine_threadsafe(_aclose_client(client), loop).result(timeout=5)
        else:
            loop.run_until_complete(_aclose_client(client))


def _close_with(loop: asyncio.AbstractEventLoop, store: AsyncRedisStore) -> None:
    """Have ``loop.close()`` first close ``store``'s client on that loop.

    A client's connections belong to the loop that opened them, and only that loop can close
    them cleanly; once it is closed, their transports can only be left to the garbage
    collector (which warns "loop is closed" and "unclosed transport"). Every way a loop ends
    goes through its ``close()`` (``asyncio.run`` included), so that is where they are closed.
    A loop whose class does not allow it (uvloop's) keeps the old behaviour: the client is
    released when the store notices the loop has ended.
    """
    owner = weakref.ref(store)
    previous = loop.close

    def close() -> None:
        alive = owner()
        if alive is not None:
            alive._release(loop)
        previous()

    with contextlib.suppress(AttributeError, TypeError):
        loop.close = close  # type: ignore[method-assign]


def _abandon(client: AsyncClient) -> None:
    """Release a client whose event loop has ended, so nothing of it can be awaited.

    Its connections drop their streams (the sockets close as the transports are collected)
    and the client is marked closed, as ``aclose()`` would, so redis-py does not report it
    as leaked through the next loop's exception handler. This reaches into redis-py's
    internals, so it is best effort: on any surprise the client is left to the collector.
    """
    with contextlib.suppress(Exception):
        if hasattr(client, "nodes_manager"):  # an asyncio RedisCluster
            manager = client.nodes_manager
            nodes = [*manager.startup_nodes.values(), *manager.nodes_cache.values()]
            connections = [c for node in nodes for c in getattr(node, "_connections", ())]
            client._initialize = True  # what aclose() sets first
        else:
            pool = client.connection_pool
            connections = [*pool._available_connections, *pool._in_use_connections]
        for connection in connections:
            connection._reader = connection._writer = None


# Tasks closing clients in the background, kept referenced until they finish.
_closing: set[asyncio.Task[None]] = set()
