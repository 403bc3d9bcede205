"""The chatkeep plugin that registers the ``redis`` backend (entry point ``redis``).

The driver is imported only when a Redis store is opened: the factory is a lazy
``"module:attribute"`` string.
"""

from __future__ import annotations

from chatkeep.core import hookimpl
from chatkeep.core.hookspecs import RegisterBackend

__all__ = ["chatkeep_register_backends"]


@hookimpl
def chatkeep_register_backends(register: RegisterBackend) -> None:
    """Register ``redis`` for redis://, rediss://, redis+cluster:// and rediss+cluster://."""
    register(
        "redis",
        "chatkeep.redis.store:RedisStore",
        schemes=["redis", "rediss", "redis+cluster", "rediss+cluster"],
        capabilities=["delete", "list_sessions", "close", "ttl", "shared", "durable"],
        description="Redis and Redis Cluster (redis-py; sync and asyncio)",
    )
