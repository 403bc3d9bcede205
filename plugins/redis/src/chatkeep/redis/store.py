"""RedisStore: chatkeep's storage contract on Redis and Redis Cluster.

Costs (round trips to the server):

- ``append`` / ``append_if``: one (EVALSHA of the append script; once per server after a
  restart or failover, a NOSCRIPT reply costs a second one, EVAL, which caches it again).
- ``read``: one LRANGE, or none for a slice that is empty whatever the log's length. A tail
  read (``start=-k``) costs O(k) on the server.
- ``delete``: one script (the session's keys and its index entry).
- ``list_sessions``: one script per page of the namespace's index (a single server), or one
  pipeline of index pages per node and batch of slots (a cluster); the first listing of a
  namespace also SCANs once for sessions written before the index existed.

The asyncio twins (``aappend``, ...) run on :class:`~chatkeep.redis.store_async.AsyncRedisStore`;
the keys and element format are in :mod:`chatkeep.redis.layout`, the scripts in
:mod:`chatkeep.redis.scripts`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from functools import partial
from typing import Any

from chatkeep.core.backend import InvalidOption, Record
from redis.exceptions import NoScriptError

from .base import BACKFILL_SCAN_COUNT, RedisBase
from .clients import SyncClient, connect_sync
from .config import DEFAULT_URL, Settings
from .layout import BadElement, corrupt_record, decode_records, lrange_bounds, prefix_range
from .scripts import APPEND, DELETE, LIST_PAGE, RECENT_BACKFILL, RECENT_PAGE, Script
from .store_async import AsyncRedisStore

__all__ = ["RedisStore"]

_DAMAGE = ("missing", "truncated", "garbage")
#: How the names of the marker keys end (see :class:`~chatkeep.redis.layout.Layout`).
_MARKER_SUFFIXES = (b"}:indexed", b"}:recent-indexed")


class RedisStore(RedisBase):
    """Session logs in Redis: a list and a digest hash per session, and an index of the
    sessions, under a key prefix and an optional namespace.

    Open it through chatkeep (``open_store("redis://localhost:6379/0?namespace=acme")``) or
    directly::

        store = RedisStore("redis://:secret@localhost:6379/0", namespace="tenant-a", ttl=3600)

    Options (keywords, or URL query parameters; keywords win):

    - ``namespace`` (none): the tenant; handles of different namespaces never see each
      other's sessions, nested ones (``acme`` and ``acme/eu``) included.
    - ``key_prefix`` (``"chatkeep:"``): the raw prefix of every key. Must not contain
      ``{`` or ``}``.
    - ``ttl`` (``None``): seconds (or a ``timedelta``) of inactivity after which a session
      expires. Sliding: every append renews it for all of the session's keys.
    - ``pool_size`` (50): connections per server and per event loop; a blocking caller
      waits up to ``pool_timeout`` (20 s) for a free one, an async caller until one is free.
    - ``socket_timeout`` / ``socket_connect_timeout`` (5 s each).
    - ``retries`` (3), ``retry_backoff`` (0.1 s), ``retry_backoff_max`` (2 s): an operation
      that fails on the connection is tried again up to ``retries`` times, waiting an
      exponentially growing, jittered delay; then :class:`~chatkeep.core.StoreUnavailable`.
    - ``scan_count`` (1000): the page size of ``list_sessions``.
    - any keyword redis-py's clients accept (``client_name``, ``ssl_ca_certs``, ...) goes to
      redis-py; anything else raises :class:`~chatkeep.core.InvalidOption`.

    Every method has a native asyncio twin (``aappend``, ``aread``, ...) on
    ``redis.asyncio``; nothing runs in a thread. Thread-safe.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        namespace: str | None = None,
        key_prefix: str | None = None,
        ttl: float | timedelta | None = None,
        pool_size: int | None = None,
        pool_timeout: float | None = None,
        socket_timeout: float | None = None,
        socket_connect_timeout: float | None = None,
        retries: int | None = None,
        retry_backoff: float | None = None,
        retry_backoff_max: float | None = None,
        scan_count: int | None = None,
        **redis_options: Any,
    ) -> None:
        super().__init__(
            url,
            namespace=namespace,
            key_prefix=key_prefix,
            ttl=ttl,
            pool_size=pool_size,
            pool_timeout=pool_timeout,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_connect_timeout,
            retries=retries,
            retry_backoff=retry_backoff,
            retry_backoff_max=retry_backoff_max,
            scan_count=scan_count,
            **redis_options,
        )

    def _setup(self, settings: Settings) -> None:
        super()._setup(settings)
        # The blocking client is made on first use: a cluster client connects as it is
        # made, and that must fail (and be retried) like any command, not in open_store.
        self._client: SyncClient | None = None
        self._client_lock = threading.Lock()
        self._indexed = False
        self._recent_indexed = False
        self._marked = False
        self._async = AsyncRedisStore._sharing(self)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisStore:
        """Open the store a ``redis://``, ``rediss://`` or ``redis+cluster://`` URL names."""
        return cls(url, **options)

    @property
    def client(self) -> SyncClient:
        """The underlying blocking redis-py client (for operations chatkeep lacks)."""
        return self._policy.run("connect", self._sync_client)

    def _sync_client(self) -> SyncClient:
        client = self._client
        if client is None:
            with self._client_lock:
                self._check_open()
                client = self._client
                if client is None:
                    client = self._client = connect_sync(self._settings)
        return client

    def _script(self, script: Script, *arguments: Any) -> Any:
        client = self._sync_client()
        try:
            return client.execute_command("EVALSHA", script.sha, *arguments)
        except NoScriptError:
            return client.execute_command("EVAL", script.source, *arguments)

    # -- the hooks -------------------------------------------------------------------------

    def append(self, session_id: str, records: list[Record]) -> None:
        """Append ``records`` atomically in one round trip; ids stored with the same data
        are skipped, an id stored with other data raises ``RecordConflict``."""
        self._check_open()
        if not self._marked:
            self._mark_namespace()
        arguments = self._append_command(session_id, records, (b"0", b""))
        reply = self._policy.run("append", lambda: self._script(APPEND, *arguments))
        self._check_append(session_id, reply)

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        """Append only if the session's last record is ``after`` (``None``: empty), in the
        same single script as :meth:`append`; else ``AppendConflict``."""
        self._check_open()
        if not self._marked:
            self._mark_namespace()
        arguments = self._append_command(session_id, records, self._condition(after))
        reply = self._policy.run("append", lambda: self._script(APPEND, *arguments))
        self._check_append(session_id, reply, after)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        """``log[start:stop]`` of the session in one LRANGE; an unknown session is ``[]``."""
        self._check_open()
        bounds = lrange_bounds(start, stop)
        if bounds is None:
            return []
        first, last = bounds
        log_key = self._layout.binary_keys(session_id)[0]
        elements = self._policy.run(
            "read", lambda: self._sync_client().execute_command("LRANGE", log_key, first, last)
        )
        try:
            return decode_records(elements, first)
        except BadElement as bad:
            # Error path only: a tail read needs the length to name the position.
            length = None
            if first < 0 and bad.position is None:
                length = self._policy.run(
                    "read", lambda: self._sync_client().execute_command("LLEN", log_key)
                )
            raise corrupt_record(session_id, bad, first, length) from None

    def delete(self, session_id: str) -> None:
        """Erase the session (its log, digests and index entry) in one script."""
        self._check_open()
        arguments = self._delete_command(session_id)
        self._policy.run("delete", lambda: self._script(DELETE, *arguments))

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        """The namespace's session ids (starting with ``prefix``), page by page from its
        index: each id once, memory bounded by a page. Lazy: no connection is held between
        pages. On a cluster the per-slot indexes are walked node by node, many per call."""
        self._check_open()
        self._ensure_indexed()
        low, high = prefix_range(prefix)
        client = self._policy.run("list_sessions", self._sync_client)
        groups = (
            self._policy.run("list_sessions", lambda: self._index_groups(client.get_node_from_key))
            if self.is_cluster
            else self._index_groups(None)
        )
        for node, keys in groups:
            offset, bound = 0, b""
            while offset < len(keys):
                page = _Page(self, node, self._page_command(keys[offset:], bound, low, high))
                ids, finished, bound = self._read_page(self._policy.run("list_sessions", page))
                yield from ids
                offset += finished if bound else len(keys) - offset

    def recent_sessions(
        self, prefix: str | None, before: tuple[float, str] | None, limit: int
    ) -> list[tuple[str, float]]:
        """Up to ``limit`` live sessions (id, last append time by the server's clock) newest
        first, ties by id descending, after the cursor ``before`` (the ``recent``
        capability): one script per page over the namespace's ``{}:recent`` sorted set,
        which drops the members whose log expired as it meets them."""
        self._check_open()
        self._ensure_recent_indexed()
        cursor = self._recent_cursor(before)
        found: list[tuple[str, float]] = []
        while len(found) < limit:
            page = partial(
                self._script, RECENT_PAGE, *self._recent_command(prefix, cursor, limit - len(found))
            )
            done, cursor, pairs = self._read_recent(self._policy.run("recent_sessions", page))
            found += pairs
            if done:
                break
        return found

    def _ensure_recent_indexed(self, *, mark: bool = False) -> None:
        """Put sessions appended to before ``{}:recent`` existed into it (scored 0), once
        per namespace: a walk of the sessions index, then a marker key. A read writes
        nothing in a namespace without sessions; ``mark`` (before a write) sets the marker
        there too."""
        if self._recent_indexed and not mark:
            return
        self._ensure_indexed(mark=mark)
        marker = self._layout.recent_marker()
        client = self._sync_client
        if not self._policy.run("recent_sessions", lambda: client().exists(marker)):
            index = self._layout.index_keys()[0]
            if mark or self._policy.run("recent_sessions", lambda: client().zcard(index)):
                bound = b"-"
                while bound:
                    command = self._backfill_recent_command(bound)
                    page = partial(self._script, RECENT_BACKFILL, *command)
                    bound = self._policy.run("recent_sessions", page)
        self._recent_indexed = True

    def _on_node(self, node: Any, script: Script, arguments: list[Any]) -> Any:
        if node is None:
            return self._script(script, *arguments)
        client = self._sync_client()
        try:
            return client.execute_command("EVALSHA", script.sha, *arguments, target_nodes=node)
        except NoScriptError:
            return client.execute_command("EVAL", script.source, *arguments, target_nodes=node)

    def _ensure_indexed(self, *, mark: bool = False) -> None:
        """Add sessions written before the index existed (chatkeep-redis 0.1), once per
        key prefix: a SCAN of the database, then marker keys. A read writes only when it
        finds such sessions; ``mark`` (before a write) sets the markers in any case."""
        if self._indexed and not mark:
            return
        policy = self._policy
        client = policy.run("list_sessions", self._sync_client)
        markers = self._indexed_markers()
        if self.is_cluster:  # the two markers live on different slots
            found = any(policy.run("list_sessions", partial(client.exists, m)) for m in markers)
        else:
            found = bool(policy.run("list_sessions", lambda: client.exists(*markers)))
        if found:
            self._indexed = True
            return
        nodes: list[Any] = (
            policy.run("list_sessions", client.get_primaries) if self.is_cluster else [None]
        )
        pattern = self._layout.every_namespace_scan_pattern()
        count = max(BACKFILL_SCAN_COUNT, self._settings.scan_count)
        wrote = False
        for node in nodes:
            cursor = 0
            while True:
                cursor, keys = policy.run(
                    "list_sessions", _ScanPage(client, node, cursor, pattern, count)
                )
                for command in self._backfill_commands(keys):
                    scores = policy.run(
                        "list_sessions",
                        partial(client.execute_command, "ZMSCORE", command[1], *command[3::2]),
                    )
                    command = self._only_missing(command, scores)
                    if command:
                        policy.run("list_sessions", partial(client.execute_command, *command))
                        wrote = True
                if cursor == 0:
                    break
        if wrote or mark:
            for marker in markers:
                policy.run("list_sessions", partial(client.set, marker, b"1"))
        self._indexed = True

    def _mark_namespace(self) -> None:
        """Before this handle's first write: the marker keys exist (one or two EXISTS when
        they do), so that listings need not SCAN the database."""
        if self._layout.recent_key() is None:
            self._ensure_indexed(mark=True)
        else:
            self._ensure_recent_indexed(mark=True)
        self._marked = True

    def close(self) -> None:
        """Close the connection pools (the blocking one and any asyncio ones). Idempotent."""
        with self._client_lock:
            self._closed = True
            client, self._client = self._client, None
        if client is not None:
            _close_sync_client(client, self.is_cluster)
        self._async._close_all()

    # -- asyncio twins (on redis.asyncio, no threads) --------------------------------------

    async def aappend(self, session_id: str, records: list[Record]) -> None:
        """Async :meth:`append`."""
        self._check_open()
        await self._async.append(session_id, records)

    async def aappend_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        """Async :meth:`append_if`."""
        self._check_open()
        await self._async.append_if(session_id, records, after)

    async def aread(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        """Async :meth:`read`."""
        self._check_open()
        return await self._async.read(session_id, start, stop)

    async def adelete(self, session_id: str) -> None:
        """Async :meth:`delete`."""
        self._check_open()
        await self._async.delete(session_id)

    async def alist_sessions(self, prefix: str | None = None) -> AsyncIterator[str]:
        """Async :meth:`list_sessions`."""
        self._check_open()
        async for session_id in self._async.list_sessions(prefix):
            yield session_id

    async def arecent_sessions(
        self, prefix: str | None, before: tuple[float, str] | None, limit: int
    ) -> list[tuple[str, float]]:
        """Async :meth:`recent_sessions`."""
        self._check_open()
        return await self._async.recent_sessions(prefix, before, limit)

    async def aclose(self) -> None:
        """Async :meth:`close`: closes this loop's client here, then everything else."""
        try:
            await self._async.close()
        finally:
            self.close()

    # -- the conformance suite's test hooks (chatkeep.testing.hooks) ------------------------

    def _prefix_keys(self) -> Iterator[bytes]:
        """Every key under the key prefix, any namespace (a SCAN of each primary)."""
        client = self._sync_client()
        nodes: list[Any] = client.get_primaries() if self.is_cluster else [None]
        pattern = _escape(self._settings.key_prefix) + "*"
        for node in nodes:
            cursor = 0
            while True:
                cursor, keys = _ScanPage(client, node, cursor, pattern, 1000)()
                yield from keys
                if cursor == 0:
                    break

    def chatkeep_storage_contains(self, data: bytes) -> bool:
        """Whether ``data`` occurs in any key or value under this store's prefix (the whole
        keyspace chatkeep writes; what the server keeps in its AOF or RDB files until it
        rewrites them is the server's, out of a client's reach)."""
        client = self._sync_client()
        return any(
            data in key or any(data in value for value in _values(client, key))
            for key in self._prefix_keys()
        )

    def chatkeep_tidy(self) -> None:
        """Remove the marker keys that outlive the sessions (a test hook of
        ``chatkeep.testing``, which calls it after deleting what a test wrote): one SCAN of
        the key prefix; a namespace holding nothing but markers loses them (on a cluster
        ``delete`` cannot know cheaply that a namespace emptied, its index being one key
        per slot), and the key prefix's own marker goes once no namespace holds anything
        else. Markers only spare a SCAN, so removing one while other handles write is
        safe: the next listing looks for 0.1-era sessions once more and finds them indexed.
        """
        self._check_open()
        every = self._layout.every_namespace_marker()
        markers: list[tuple[str, bytes]] = []
        busy: set[str] = set()
        for key in self._prefix_keys():
            namespace = self._layout.namespace_of(key)
            if namespace is None or key == every:
                continue
            if key.endswith(_MARKER_SUFFIXES):
                markers.append((namespace, key))
            else:
                busy.add(namespace)
        client = self._sync_client()
        for namespace, key in markers:
            if namespace not in busy:
                client.delete(key)
        if not busy:
            client.delete(every)

    def chatkeep_expiry(self, session_id: str) -> float | None:
        """When the session expires (seconds since the epoch: this machine's clock plus the
        log key's ``PTTL``), ``None`` for never or no session (a test hook of
        ``chatkeep.testing``)."""
        self._check_open()
        log_key = self._layout.binary_keys(session_id)[0]
        left = int(self._sync_client().pttl(log_key))
        return None if left < 0 else time.time() + left / 1000

    def chatkeep_set_updated(self, session_id: str, updated: float) -> None:
        """Set the session's score in ``{}:recent`` (the server's time of its last append)
        to ``updated`` (a test hook of ``chatkeep.testing``, so the suite can make ties;
        single server only, as a cluster keeps no ``{}:recent``)."""
        self._check_open()
        recent = self._layout.recent_key()
        if recent is None:
            raise NotImplementedError("a cluster keeps no last-append index")
        member = self._layout.binary_keys(session_id)[4]
        client = self._sync_client()
        if client.zscore(recent, member) is None:
            raise KeyError(f"no session {session_id!r}")
        client.zadd(recent, {member: float(updated)}, xx=True)

    def chatkeep_damage(self, session_id: str, position: int, kind: str) -> None:
        """Damage the record at ``position`` behind the store's back, as a failing disk or
        a stray client would: ``"missing"`` removes it from the list, ``"truncated"`` cuts
        its element short, ``"garbage"`` overwrites it with bytes that are no record."""
        if kind not in _DAMAGE:
            raise InvalidOption(f"kind must be one of {', '.join(_DAMAGE)}, not {kind!r}")
        client = self._sync_client()
        log_key = self._layout.binary_keys(session_id)[0]
        element = client.lindex(log_key, position)
        if element is None:
            raise IndexError(f"session {session_id!r} has no record at position {position}")
        if kind == "truncated":
            client.lset(log_key, position, element[: max(len(element) - 3, 1)])
        elif kind == "garbage":
            client.lset(log_key, position, b"\xfe" + bytes(range(32)))
        else:
            marker = b"\x00chatkeep-damage\x00"
            client.lset(log_key, position, marker)
            client.lrem(log_key, 1, marker)


class _Page:
    """One listing call (a callable, so a retry repeats the same page)."""

    def __init__(self, store: RedisStore, node: Any, arguments: list[Any]) -> None:
        self.store, self.node, self.arguments = store, node, arguments

    def __call__(self) -> Any:
        return self.store._on_node(self.node, LIST_PAGE, self.arguments)


class _ScanPage:
    """One SCAN call (a callable, so a retry repeats the same cursor)."""

    def __init__(self, client: SyncClient, node: Any, cursor: int, pattern: str, count: int):
        self.client, self.node, self.cursor = client, node, cursor
        self.pattern, self.count = pattern, count

    def __call__(self) -> tuple[int, list[bytes]]:
        if self.node is None:
            cursor, keys = self.client.scan(self.cursor, match=self.pattern, count=self.count)
            return int(cursor), list(keys)
        # On a cluster, scan() answers {node name: cursor} and that one node's keys.
        cursors, keys = self.client.scan(
            self.cursor, match=self.pattern, count=self.count, target_nodes=self.node
        )
        return int(next(iter(cursors.values()))), list(keys)


def _escape(text: str) -> str:
    return "".join("\\" + char if char in "*?[]\\" else char for char in text)


def _values(client: SyncClient, key: bytes) -> list[bytes]:
    """Every value stored at ``key``, whatever its type."""
    kind = client.type(key)
    if kind == b"list":
        return list(client.lrange(key, 0, -1))
    if kind == b"hash":
        return [item for pair in client.hgetall(key).items() for item in pair]
    if kind == b"set":
        return list(client.smembers(key))
    if kind == b"zset":
        return list(client.zrange(key, 0, -1))
    if kind == b"string":
        value = client.get(key)
        return [] if value is None else [value]
    return []


def _close_sync_client(client: SyncClient, cluster: bool) -> None:
    # Disconnect the pools explicitly: redis-py's close() leaves pools it did not create
    # (ours, and the per-node pools of a cluster client) to the garbage collector.
    if cluster:
        nodes = client.get_nodes()
        pools = [node.redis_connection.connection_pool for node in nodes if node.redis_connection]
    else:
        pools = [client.connection_pool]
    client.close()
    for pool in pools:
        pool.disconnect()
