"""A size-bounded LRU of decoded objects, keyed by (key, ETag).

Segments and chunks are written once and never change, so a decoded copy stays correct for
as long as the same key holds the same ETag; keying by both means a key that was deleted
and written again (a session erased and reused) can never serve the old bytes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

__all__ = ["LRUCache"]

V = TypeVar("V")


class LRUCache(Generic[V]):
    """Thread-safe least-recently-used cache holding at most ``capacity`` units of weight."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[tuple[str, str], tuple[V, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def get(self, key: str, etag: str) -> V | None:
        """The cached value, refreshed as most recently used, or ``None``."""
        with self._lock:
            item = self._items.get((key, etag))
            if item is None:
                return None
            self._items.move_to_end((key, etag))
            return item[0]

    def put(self, key: str, etag: str, value: V, weight: int) -> None:
        """Cache ``value``; values heavier than the whole capacity are not kept."""
        if weight > self.capacity or not etag:
            return
        with self._lock:
            old = self._items.pop((key, etag), None)
            if old is not None:
                self._weight -= old[1]
            self._items[(key, etag)] = (value, weight)
            self._weight += weight
            while self._weight > self.capacity:
                _, (_, dropped) = self._items.popitem(last=False)
                self._weight -= dropped

    def discard(self, key: str) -> None:
        """Forget every version of ``key``."""
        with self._lock:
            for item in [item for item in self._items if item[0] == key]:
                self._weight -= self._items.pop(item)[1]

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._items.clear()
            self._weight = 0
