"""Building redis-py clients (sync and asyncio, single server and cluster) from Settings.

The driver's own retries are switched off (zero retries, no backoff): chatkeep's
:class:`~chatkeep.redis.retrying.RetryPolicy` is the one place that decides how often to try
again, so a dead server fails after a bounded, configurable time. Responses stay binary
(``decode_responses=False``): records are bytes.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.retry
import redis.cluster
from redis.backoff import NoBackoff
from redis.retry import Retry

from .config import Settings

__all__ = ["AsyncClient", "SyncClient", "connect_async", "connect_sync"]

SyncClient = Any  # redis.Redis | redis.cluster.RedisCluster (untyped in older redis-py)
AsyncClient = Any  # redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster


def _common(settings: Settings) -> dict[str, Any]:
    options: dict[str, Any] = {
        "socket_timeout": settings.socket_timeout,
        "socket_connect_timeout": settings.socket_connect_timeout,
        "decode_responses": False,
    }
    options.update(settings.driver_options)
    return options


def connect_sync(settings: Settings) -> SyncClient:
    """A blocking client. Connections are opened lazily, on the first command."""
    options = _common(settings)
    no_retries = Retry(NoBackoff(), 0)
    if settings.cluster:
        return redis.cluster.RedisCluster.from_url(
            settings.driver_url,
            startup_nodes=[
                redis.cluster.ClusterNode(host, port)  # type: ignore[no-untyped-call]
                for host, port in settings.seeds
            ],
            max_connections=settings.pool_size,
            # A blocking pool waits for a free connection instead of failing when every
            # connection to a node is busy.
            connection_pool_class=redis.BlockingConnectionPool,
            retry=no_retries,
            **options,
        )
    pool = redis.BlockingConnectionPool.from_url(
        settings.driver_url,
        max_connections=settings.pool_size,
        timeout=settings.pool_timeout,
        retry=no_retries,
        **options,
    )
    return redis.Redis(connection_pool=pool)


def connect_async(settings: Settings) -> AsyncClient:
    """An asyncio client, bound to the event loop that first uses it. The caller keeps at
    most ``pool_size`` commands in flight on it."""
    options = _common(settings)
    no_retries = redis.asyncio.retry.Retry(NoBackoff(), 0)
    if settings.cluster:
        return redis.asyncio.cluster.RedisCluster.from_url(
            settings.driver_url,
            startup_nodes=[
                redis.asyncio.cluster.ClusterNode(host, port) for host, port in settings.seeds
            ],
            max_connections=settings.pool_size,
            retry=no_retries,
            # On every fifth MOVED reply redis-py's asyncio cluster client re-learns the
            # topology by calling its own aclose(), which disconnects every connection,
            # including those that other tasks are sending on or reading from at that
            # moment (they fail with "Connection closed by server", "Connection lost" or
            # an AttributeError on a connection whose writer was just set to None). With
            # 0 a MOVED only patches the moved slot (redis-py's documented meaning); a
            # real topology change still refreshes everything through the connection or
            # CLUSTERDOWN errors it causes, and chatkeep's retries repeat the operation.
            reinitialize_steps=0,
            **options,
        )
    # Not a BlockingConnectionPool: the store bounds concurrency with a semaphore (some
    # redis-py 5.x releases deadlock that pool when a connection attempt fails).
    pool = redis.asyncio.ConnectionPool.from_url(
        settings.driver_url, max_connections=settings.pool_size, retry=no_retries, **options
    )
    return redis.asyncio.Redis(connection_pool=pool)
