"""RedisStore: chatkeep's storage contract on Redis and Redis Cluster (the blocking half).

Costs (round trips to the server):

- ``append``: one (EVALSHA of the append script; once per server after a restart or
  failover, a NOSCRIPT reply costs a second one, EVAL, which caches the script again).
- ``read``: one LRANGE, or none for a slice that is empty whatever the log's length. A tail
  read (``start=-k``) costs O(k) on the server.
- ``delete``: one UNLINK of the session's two keys.
- ``list_sessions``: one SCAN per page of ``scan_count`` keys examined, on every primary.

The asyncio twins live in :mod:`chatkeep.redis.asynchronous`; the keys and element format
in :mod:`chatkeep.redis.layout`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any, ClassVar

from chatkeep.core import Record, StoreUnavailable
from redis.exceptions import NoScriptError

from .asynchronous import AsyncHooks
from .clients import SyncClient, connect_sync
from .config import DEFAULT_URL, parse_settings
from .layout import (
    APPEND_SCRIPT,
    APPEND_SCRIPT_SHA,
    BadElement,
    Layout,
    corrupt_record,
    decode_records,
    lrange_bounds,
    script_arguments,
)
from .retrying import RetryPolicy

__all__ = ["RedisStore"]


class RedisStore(AsyncHooks):
    """Session logs in Redis: one list and one id set per session, under a namespace.

    Open it through chatkeep (``open_store("redis://localhost:6379/0?namespace=app:")``) or
    directly::

        store = RedisStore("redis://:secret@localhost:6379/0", namespace="tenant-a:", ttl=3600)

    Options (keywords, or URL query parameters; keywords win):

    - ``namespace`` (``"chatkeep:"``): prefix of every key; stores with different
      namespaces never see each other's sessions. Must not contain ``{`` or ``}``.
    - ``ttl`` (``None``): seconds (or a ``timedelta``) of inactivity after which a session
      expires. Sliding: every append renews it for all of the session's keys.
    - ``pool_size`` (50): connections per server and per event loop; a blocking caller
      waits up to ``pool_timeout`` (20 s) for a free one, an async caller until one is free.
    - ``socket_timeout`` / ``socket_connect_timeout`` (5 s each).
    - ``retries`` (3), ``retry_backoff`` (0.1 s), ``retry_backoff_max`` (2 s): an operation
      that fails on the connection is tried again up to ``retries`` times, waiting an
      exponentially growing, jittered delay; then :class:`~chatkeep.core.StoreUnavailable`.
    - ``scan_count`` (1000): the COUNT hint of each SCAN page in ``list_sessions``.
    - any other keyword goes to redis-py (``client_name``, ``ssl_ca_certs``, ...).

    Every method has a native asyncio twin (``aappend``, ``aread``, ...) on
    ``redis.asyncio``; nothing runs in a thread. Thread-safe.
    """

    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"delete", "list_sessions", "close", "ttl", "shared", "durable"}
    )

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        namespace: str | None = None,
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
        given = {
            "namespace": namespace,
            "ttl": ttl,
            "pool_size": pool_size,
            "pool_timeout": pool_timeout,
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": socket_connect_timeout,
            "retries": retries,
            "retry_backoff": retry_backoff,
            "retry_backoff_max": retry_backoff_max,
            "scan_count": scan_count,
        }
        options = {name: value for name, value in given.items() if value is not None}
        settings = parse_settings(url, **options, **redis_options)
        self._settings = settings
        self._layout = Layout(settings.namespace)
        self._policy = RetryPolicy(
            retries=settings.retries,
            backoff=settings.retry_backoff,
            backoff_max=settings.retry_backoff_max,
            describe=settings.redacted_url,
            secrets=settings.secrets,
        )
        self._ttl_arg = str(settings.ttl_ms or 0).encode()
        self._closed = False
        # The blocking client is made on first use: a cluster client connects as it is
        # made, and that must fail (and be retried) like any command, not in open_store.
        self._client: SyncClient | None = None
        self._client_lock = threading.Lock()
        super().__init__()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisStore:
        """Open the store a ``redis://``, ``rediss://`` or ``redis+cluster://`` URL names."""
        return cls(url, **options)

    # -- introspection ---------------------------------------------------------------------

    @property
    def namespace(self) -> str:
        """The key prefix of this store's sessions."""
        return self._settings.namespace

    @property
    def ttl(self) -> timedelta | None:
        """How long a session lives after its last append (``None``: forever)."""
        ttl_ms = self._settings.ttl_ms
        return None if ttl_ms is None else timedelta(milliseconds=ttl_ms)

    @property
    def is_cluster(self) -> bool:
        """Whether this store talks to a Redis Cluster."""
        return self._settings.cluster

    @property
    def client(self) -> SyncClient:
        """The underlying blocking redis-py client (for operations chatkeep lacks)."""
        return self._policy.run("connect", self._sync_client)

    def keys(self, session_id: str) -> tuple[str, str]:
        """The (log, ids) key names of a session, e.g. for inspection in ``redis-cli``."""
        return self._layout.keys(session_id)

    def __repr__(self) -> str:
        # Only the redacted URL: the real one carries the password.
        return (
            f"<RedisStore url={self._settings.redacted_url!r} "
            f"namespace={self._settings.namespace!r}>"
        )

    def _check_open(self) -> None:
        if self._closed:
            raise StoreUnavailable("this RedisStore is closed; open a new one")

    def _sync_client(self) -> SyncClient:
        client = self._client
        if client is None:
            with self._client_lock:
                self._check_open()
                client = self._client
                if client is None:
                    client = self._client = connect_sync(self._settings)
        return client

    # -- the hooks -------------------------------------------------------------------------

    def append(self, session_id: str, records: list[Record]) -> None:
        """Append ``records`` atomically in one round trip; already stored ids are skipped."""
        self._check_open()
        log_key, ids_key = self._layout.binary_keys(session_id)
        args = script_arguments(self._ttl_arg, records)

        def call() -> Any:
            client = self._sync_client()
            try:
                return client.execute_command(
                    "EVALSHA", APPEND_SCRIPT_SHA, 2, log_key, ids_key, *args
                )
            except NoScriptError:
                return client.execute_command("EVAL", APPEND_SCRIPT, 2, log_key, ids_key, *args)

        self._policy.run("append", call)

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
            return decode_records(elements)
        except BadElement as bad:
            # Error path only: a tail read needs the length to name the position.
            length = None
            if first < 0:
                length = self._policy.run(
                    "read", lambda: self._sync_client().execute_command("LLEN", log_key)
                )
            raise corrupt_record(session_id, bad, first, length) from None

    def delete(self, session_id: str) -> None:
        """Erase the session (its log and its id set) in one UNLINK."""
        self._check_open()
        log_key, ids_key = self._layout.binary_keys(session_id)
        self._policy.run(
            "delete", lambda: self._sync_client().execute_command("UNLINK", log_key, ids_key)
        )

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        """Yield the ids of stored sessions (starting with ``prefix``), one SCAN page at a time.

        Lazy: no connection is held between pages. Each id comes out once, although SCAN
        may report a key twice; sessions created or deleted meanwhile may or may not appear.
        """
        self._check_open()
        policy = self._policy
        client = policy.run("list_sessions", self._sync_client)
        pattern = self._layout.scan_pattern(prefix)
        count = self._settings.scan_count
        # A cluster is scanned primary by primary: each holds its own slots' keys.
        nodes: list[Any] = (
            policy.run("list_sessions", client.get_primaries) if self.is_cluster else [None]
        )
        seen: set[str] = set()
        for node in nodes:
            cursor = 0
            while True:
                cursor, keys = policy.run(
                    "list_sessions", _ScanPage(client, node, cursor, pattern, count)
                )
                yield from self._layout.sessions_in(keys, prefix, seen)
                if cursor == 0:
                    break

    def close(self) -> None:
        """Close the connection pools (the blocking one and any asyncio ones). Idempotent."""
        with self._client_lock:
            self._closed = True
            client, self._client = self._client, None
        if client is not None:
            _close_sync_client(client, self.is_cluster)
        self._close_async_clients()


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
