"""The asyncio half of RedisStore: aappend, aread, adelete, alist_sessions, aclose.

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
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chatkeep.core import Record
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError

from .clients import AsyncClient, connect_async
from .layout import (
    APPEND_SCRIPT,
    APPEND_SCRIPT_SHA,
    BadElement,
    corrupt_record,
    decode_records,
    lrange_bounds,
    script_arguments,
)

if TYPE_CHECKING:
    from .config import Settings
    from .layout import Layout
    from .retrying import RetryPolicy

__all__ = ["AsyncHooks"]


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
        with _torn_down_as_connection_error():
            if self.cluster:
                # Routes by the key's slot only once initialized (see the module docstring);
                # a no-op once it is, and after a fault it re-learns the topology here, once,
                # under redis-py's lock, instead of each concurrent command guessing.
                await self.client.initialize()
            return await self.client.execute_command(*args)


class AsyncHooks:
    """The ``a``-prefixed hooks; mixed into :class:`~chatkeep.redis.store.RedisStore`."""

    # Provided by RedisStore.
    _settings: Settings
    _layout: Layout
    _policy: RetryPolicy
    _ttl_arg: bytes

    def __init__(self) -> None:
        self._handles_lock = threading.Lock()
        self._handles: dict[asyncio.AbstractEventLoop, _Handle] = {}

    if TYPE_CHECKING:

        def _check_open(self) -> None: ...

        def close(self) -> None: ...

        @property
        def is_cluster(self) -> bool: ...

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
        return handle

    async def _command(self, *args: Any) -> Any:
        return await self._handle().execute(*args)

    # -- the hooks -------------------------------------------------------------------------

    async def aappend(self, session_id: str, records: list[Record]) -> None:
        """Async ``append``: one EVALSHA, atomic, already stored ids skipped."""
        self._check_open()
        log_key, ids_key = self._layout.binary_keys(session_id)
        args = script_arguments(self._ttl_arg, records)

        async def call() -> Any:
            handle = self._handle()
            async with handle.slots:
                try:
                    return await handle.execute_unbounded(
                        "EVALSHA", APPEND_SCRIPT_SHA, 2, log_key, ids_key, *args
                    )
                except NoScriptError:
                    return await handle.execute_unbounded(
                        "EVAL", APPEND_SCRIPT, 2, log_key, ids_key, *args
                    )

        await self._policy.arun("append", call)

    async def aread(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        """Async ``read``: one LRANGE."""
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
            return decode_records(elements)
        except BadElement as bad:
            length = None
            if first < 0:
                length = await self._policy.arun("read", lambda: self._command("LLEN", log_key))
            raise corrupt_record(session_id, bad, first, length) from None

    async def adelete(self, session_id: str) -> None:
        """Async ``delete``: one UNLINK."""
        self._check_open()
        log_key, ids_key = self._layout.binary_keys(session_id)
        await self._policy.arun("delete", lambda: self._command("UNLINK", log_key, ids_key))

    async def alist_sessions(self, prefix: str | None = None) -> AsyncIterator[str]:
        """Async ``list_sessions``: SCAN page by page (on every primary of a cluster)."""
        self._check_open()
        handle = self._handle()
        pattern = self._layout.scan_pattern(prefix)
        count = self._settings.scan_count
        nodes: list[Any] = [None]
        if self.is_cluster:

            async def primaries() -> list[Any]:
                await handle.client.initialize()  # learns the topology on first use
                return list(handle.client.get_primaries())

            nodes = await self._policy.arun("list_sessions", primaries)
        seen: set[str] = set()
        for node in nodes:
            cursor = 0
            while True:
                page = _AsyncScanPage(handle, node, cursor, pattern, count)
                cursor, keys = await self._policy.arun("list_sessions", page)
                for session_id in self._layout.sessions_in(keys, prefix, seen):
                    yield session_id
                if cursor == 0:
                    break

    async def aclose(self) -> None:
        """Async ``close``: closes this loop's client here, then everything else."""
        with self._handles_lock:
            mine = self._handles.pop(asyncio.get_running_loop(), None)
        try:
            if mine is not None:
                await _aclose_client(mine.client)
        finally:
            self.close()

    def _close_async_clients(self) -> None:
        with self._handles_lock:
            leftovers = list(self._handles.items())
            self._handles.clear()
        for loop, handle in leftovers:
            _close_from_sync(loop, handle.client)


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
        raise RedisConnectionError(f"connection closed by the driver while in use ({exc})") from exc


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
