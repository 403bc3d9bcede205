"""A decoded view of one conversation, held between turns and trusted only after a tail
read shows the log as it was left (DESIGN sections 5 and 9).

An agent, or a framework's per-conversation object (the Agents SDK's session, LangChain's
message history, MAF's provider, LangGraph's saver, ...), loads the same conversation turn
after turn. Decoding it again every turn is most of a turn's cost; a :class:`TailCache`
keeps what was decoded, in the caller's own form (``Message`` objects, SDK items, LangChain
messages: the type parameter), with what the log looked like then:

- the id (and data) of the log's newest record when the items were last checked or built
  (the *anchor*);
- the ids of the records this process appended since (:meth:`TailCache.extend`, one call
  per append, in order).

:meth:`TailCache.acheck` (:meth:`TailCache.check` when blocking) reads only the log's last
``1 + appended`` records and hands the items back when they are exactly the anchor
followed by this process's own records; anything another
handle or process did since (an append, an undo, a compaction checkpoint, an in-place
edit, a fork written into this id, a delete and a new log under the same id, a write
between this turn's load and its save) shows there, and the caller reads the view again.
The log only grows, so an unchanged tail means an unchanged view.

The cache is bounded by the bytes of the records its items were decoded from
(``max_bytes``, default :data:`DEFAULT_CACHE_BYTES`): a view that is larger is not kept.
One cache serves one conversation (``store`` and ``session_id``) and one kind of load
(``key``: a window size, say); it is process-local and is never serialized. Appends that
overlap (two turns of one object at once) can only make the next check miss, never
mislead it: the ids must follow the anchor in the order they were taken in. A framework
adapter holds one per conversation object::

    cache = TailCache()                              # in the per-conversation object
    items = await cache.acheck(store, session_id)    # None: read the view, then...
    if items is None:
        read = await aread_view_with_tail(...)       # however the adapter reads and decodes
        cache.fill(store, session_id, items, tail_id=..., nbytes=...)
        # (or cache.fill_records(store, session_id, records, items) from the records read)
    ...
    await store.aappend(session_id, records)         # the turn's own records
    cache.extend(records, decoded)                   # the cache follows its own append
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from .records import Record
from .store import Store

if TYPE_CHECKING:
    from .messages import Message
    from .views._ops import ViewRead

__all__ = ["DEFAULT_CACHE_BYTES", "TailCache"]

T = TypeVar("T")

#: The default bound of a :class:`TailCache`: 8 MiB of stored records (a conversation of
#: about 25,000 messages of ~300 bytes; the decoded objects take a few times that).
DEFAULT_CACHE_BYTES = 8 * 1024 * 1024
#: The most records of its own a cache takes in between two checks (each check reads them).
_MAX_OWN = 4096


class TailCache(Generic[T]):
    """The decoded items of one conversation's view and the tail of the log they match.

    ``max_bytes``: the most record bytes the items may stand for (a larger view is not
    kept: :meth:`fill` and :meth:`extend` then empty the cache and return ``False``).
    ``id_of``: the record id of an item (``None`` when it has none); with it, :meth:`ids`
    gives the set of the items' ids, kept up to date by :meth:`extend`.
    """

    __slots__ = (
        "_ids",
        "_store",
        "anchor_data",
        "anchor_id",
        "count",
        "id_of",
        "items",
        "key",
        "limit",
        "max_bytes",
        "nbytes",
        "own",
        "own_data",
        "session_id",
    )

    def __init__(
        self,
        max_bytes: int = DEFAULT_CACHE_BYTES,
        *,
        id_of: Callable[[T], str | None] | None = None,
    ) -> None:
        if type(max_bytes) is not int or max_bytes < 0:
            raise ValueError("max_bytes must be a non-negative int")
        self.max_bytes = max_bytes
        self.id_of = id_of
        self._store: Store | None = None
        #: The conversation the items are of (``None``: the cache is empty).
        self.session_id: str | None = None
        #: What kind of load the items are (the caller's: a window size, ``None``...).
        self.key: Hashable = None
        #: The items, oldest first (the cache's own: hand out copies).
        self.items: list[T] = []
        #: The most items kept (a window: :meth:`extend` drops the oldest beyond it).
        self.limit: int | None = None
        #: The bytes of the records the items stand for.
        self.nbytes = 0
        #: The caller's count of the view (the running count), carried along.
        self.count: int | None = None
        #: The id of the log's newest record at the last check or fill (``None``: empty).
        self.anchor_id: str | None = None
        #: That record's data, when known (checked too).
        self.anchor_data: bytes | None = None
        #: The ids of the records this process appended since, in order.
        self.own: list[str] = []
        #: The data of the last of them.
        self.own_data: bytes | None = None
        self._ids: set[str] | None = None

    def __repr__(self) -> str:
        return (
            f"TailCache(session_id={self.session_id!r}, items={len(self.items)}, "
            f"nbytes={self.nbytes}, max_bytes={self.max_bytes})"
        )

    def __len__(self) -> int:
        return len(self.items)

    # -- asking -------------------------------------------------------------------------------

    def holds(self, store: Store, session_id: str, key: Hashable = None) -> bool:
        """Whether the cache holds items of ``session_id`` on ``store`` loaded as ``key``
        (not yet checked against the log: see :meth:`acheck`)."""
        return (
            self.session_id is not None
            and self._store is store
            and self.session_id == session_id
            and self.key == key
        )

    @property
    def tail_id(self) -> str | None:
        """The id of the log's newest record as the items stand (``None``: empty log)."""
        return self.own[-1] if self.own else self.anchor_id

    @property
    def tail_span(self) -> int:
        """How many of the log's newest records :meth:`matches` needs."""
        return len(self.own) + 1

    def matches(self, tail: Sequence[Record]) -> bool:
        """Whether ``tail`` (the log's last :attr:`tail_span` records) is the log the
        items were built on: the anchor, then exactly this process's own records."""
        if self.session_id is None:
            return False
        own = self.own
        expected = len(own) + (self.anchor_id is not None)
        if len(tail) != expected:
            return False
        if not tail:
            return True
        data = self.own_data if own else self.anchor_data
        if data is not None and tail[-1].data != data:
            return False
        start = 0
        if self.anchor_id is not None:
            if tail[0].id != self.anchor_id:
                return False
            start = 1
        return all(record.id == own_id for record, own_id in zip(tail[start:], own, strict=True))

    def _trusted(self, tail: Sequence[Record]) -> None:
        """The check passed: the newest record is the anchor from now on."""
        if tail:
            self.anchor_id, self.anchor_data = tail[-1].id, tail[-1].data
        self.own = []
        self.own_data = None

    def check(self, store: Store, session_id: str, key: Hashable = None) -> list[T] | None:
        """The items, when the cache holds ``session_id`` (as ``key``) and one read of the
        log's last few records shows nothing changed since; else ``None`` (the cache is
        emptied: read the view and :meth:`fill` it). The list is the cache's own."""
        if not self.holds(store, session_id, key):
            return None
        tail = store.read(session_id, -self.tail_span)
        if self.matches(tail):
            self._trusted(tail)
            return self.items
        self.clear()
        return None

    async def acheck(self, store: Store, session_id: str, key: Hashable = None) -> list[T] | None:
        """:meth:`check` through the store's awaited ``aread``."""
        if not self.holds(store, session_id, key):
            return None
        tail = await store.aread(session_id, -self.tail_span)
        if self.matches(tail):
            self._trusted(tail)
            return self.items
        self.clear()
        return None

    def ids(self) -> set[str]:
        """The ids of the items (with ``id_of``; kept up to date by :meth:`extend`): the
        cache's own set, do not change it. Empty without ``id_of``."""
        if self._ids is None:
            id_of = self.id_of
            found: set[str] = set()
            if id_of is not None:
                for item in self.items:
                    item_id = id_of(item)
                    if item_id is not None:
                        found.add(item_id)
            self._ids = found
        return self._ids

    # -- changing -----------------------------------------------------------------------------

    def fill(
        self,
        store: Store,
        session_id: str,
        items: list[T],
        *,
        tail_id: str | None,
        nbytes: int,
        tail_data: bytes | None = None,
        key: Hashable = None,
        limit: int | None = None,
        count: int | None = None,
        ids: set[str] | None = None,
    ) -> bool:
        """Hold ``items`` (a view just read: the cache keeps this list, so give it one
        nobody else changes), built when the log's newest record was ``tail_id`` (with
        ``tail_data``, when known; ``None``: the log was empty), from ``nbytes`` bytes of
        records. ``limit``: the items are a window of at most that many (:meth:`extend`
        keeps it so). ``ids``: the items' ids, if the caller collected them already.
        Returns whether the view is kept (``False``: larger than ``max_bytes``)."""
        self.clear()
        if nbytes > self.max_bytes:
            return False
        self._store, self.session_id, self.key = store, session_id, key
        self.items, self.limit, self.nbytes, self.count = items, limit, nbytes, count
        self.anchor_id, self.anchor_data = tail_id, tail_data
        self._ids = ids
        return True

    def fill_records(
        self,
        store: Store,
        session_id: str,
        records: Sequence[Record],
        items: list[T],
        *,
        key: Hashable = None,
        limit: int | None = None,
        count: int | None = None,
    ) -> bool:
        """:meth:`fill` from the records just read: ``records`` are the log's newest
        records (oldest first, ending with its newest record; empty: the log was empty)
        and ``items`` what they decode to (the records themselves in a ``TailCache[Record]``).
        The anchor is the last record (its id and data), the bound the records' bytes.
        Returns whether the view is kept."""
        tail = records[-1] if records else None
        return self.fill(
            store,
            session_id,
            items,
            tail_id=None if tail is None else tail.id,
            tail_data=None if tail is None else tail.data,
            nbytes=sum(len(record.data) for record in records),
            key=key,
            limit=limit,
            count=count,
        )

    def fill_view(
        self: TailCache[Message],
        store: Store,
        session_id: str,
        read: ViewRead,
        *,
        key: Hashable = None,
        limit: int | None = None,
        ids: set[str] | None = None,
    ) -> bool:
        """:meth:`fill` with a view just read (the core's view read: its messages, the
        log's newest record, the bytes decoded and the count it proved). Returns whether
        the view is kept."""
        return self.fill(
            store,
            session_id,
            read.messages,
            tail_id=read.newest_record_id,
            tail_data=read.newest_record_data,
            nbytes=read.bytes_fed,
            key=key,
            limit=limit,
            count=read.count,
            ids=ids,
        )

    def extend(
        self, records: Sequence[Record], items: Sequence[T], *, count: int | None = None
    ) -> bool:
        """Take in this process's own append: ``records`` were just appended in one call
        (after the check or fill the items came from, and after the appends taken in since,
        in that order), and ``items`` are what they add to the view (decoded as a read
        would decode them). The next check proves that nothing else landed in between.
        Returns whether the cache still holds the view (``False``: it was empty, or the
        view grew past ``max_bytes`` and was let go)."""
        if self.session_id is None:
            return False
        if not records:
            return True
        added = sum(len(record.data) for record in records)
        merged = self.items + list(items)
        nbytes = self.nbytes + added
        if self.limit is not None and len(merged) > self.limit:
            # The window's oldest go; their bytes are taken as the window's average.
            dropped = len(merged) - self.limit
            nbytes -= nbytes * dropped // len(merged)
            merged = merged[dropped:]
            self._ids = None
        elif self._ids is not None and self.id_of is not None:
            for item in items:
                item_id = self.id_of(item)
                if item_id is not None:
                    self._ids.add(item_id)
        if nbytes > self.max_bytes or len(self.own) + len(records) > _MAX_OWN:
            self.clear()
            return False
        self.items, self.nbytes, self.count = merged, nbytes, count
        self.own = self.own + [record.id for record in records]
        self.own_data = records[-1].data
        return True

    def clear(self) -> None:
        """Forget everything (the next check reads the view again)."""
        self._store = None
        self.session_id = None
        self.key = None
        self.items = []
        self.limit = None
        self.nbytes = 0
        self.count = None
        self.anchor_id = self.anchor_data = self.own_data = None
        self.own = []
        self._ids = None
