"""chatkeep-redis: chatkeep's session-log store on Redis and Redis Cluster.

Installed, it registers the ``redis`` backend for ``redis://``, ``rediss://``,
``redis+cluster://`` and ``rediss+cluster://`` URLs::

    from chatkeep.core import open_store, Record

    store = open_store("redis://localhost:6379/0?namespace=acme&ttl=86400")
    store.append("session-1", [Record("m1", b"hello")])
    store.read("session-1", start=-50)   # the last fifty records, one round trip

Importing this package does not import redis-py; the stores load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chatkeep.core.backend import InvalidOption

if TYPE_CHECKING:
    from .store import RedisStore
    from .store_async import AsyncRedisStore

__all__ = ["AsyncRedisStore", "InvalidOption", "RedisStore"]


def __getattr__(name: str) -> Any:
    if name == "RedisStore":
        from .store import RedisStore

        return RedisStore
    if name == "AsyncRedisStore":
        from .store_async import AsyncRedisStore

        return AsyncRedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
