"""chatkeep-redis: chatkeep's session-log store on Redis and Redis Cluster.

Installed, it registers the ``redis`` backend for ``redis://``, ``rediss://``,
``redis+cluster://`` and ``rediss+cluster://`` URLs::

    from chatkeep.core import open_store, Record

    store = open_store("redis://localhost:6379/0?namespace=myapp:&ttl=86400")
    store.append("session-1", [Record("m1", b"hello")])
    store.read("session-1", start=-50)   # the last fifty records, one round trip

Importing this package does not import redis-py; :class:`RedisStore` loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import InvalidOption

if TYPE_CHECKING:
    from .store import RedisStore

__all__ = ["InvalidOption", "RedisStore"]


def __getattr__(name: str) -> Any:
    if name == "RedisStore":
        from .store import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
