"""The chatkeep plugin that registers the ``redis`` backend (entry point ``redis``).

The one place the backend's capabilities are declared. Nothing here imports redis-py: the
factory is a lazy ``"module:attribute"`` string, loaded when a Redis store is opened.
"""

from __future__ import annotations

from chatkeep.core.backend import (
    CLOSE,
    CONDITIONAL,
    DELETE,
    DURABLE,
    LIST_SESSIONS,
    NAMESPACE,
    RECENT,
    SHARED,
    TTL,
    RegisterBackend,
    hookimpl,
)

__all__ = ["CAPABILITIES", "CLUSTER_CAPABILITIES", "SCHEMES", "chatkeep_register_backends"]

#: What the Redis backend offers (declared once: the store class reads it from here).
CAPABILITIES: frozenset[str] = frozenset(
    {DELETE, LIST_SESSIONS, CLOSE, TTL, SHARED, DURABLE, CONDITIONAL, NAMESPACE, RECENT}
)
#: What a store on a Redis Cluster offers: no ``recent`` (no one last-append index).
CLUSTER_CAPABILITIES: frozenset[str] = CAPABILITIES - {RECENT}
#: The URL schemes that select it.
SCHEMES = ("redis", "rediss", "redis+cluster", "rediss+cluster")


@hookimpl
def chatkeep_register_backends(register: RegisterBackend) -> None:
    """Register ``redis`` for redis://, rediss://, redis+cluster:// and rediss+cluster://."""
    register(
        "redis",
        "chatkeep.redis.store:RedisStore",
        schemes=SCHEMES,
        capabilities=CAPABILITIES,
        description="Redis and Redis Cluster (redis-py; sync and asyncio)",
    )
