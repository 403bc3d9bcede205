"""The store contract (DESIGN section 3) and :class:`Store`, the one adapter the core calls.

A *backend* is any object with two methods::

    append(session_id: str, records: list[Record]) -> None
    read(session_id: str, start: int = 0, stop: int | None = None) -> list[Record]

Either may be a plain function or a coroutine function; a backend that has both kinds names
the async twin with an ``a`` prefix (``aappend``, ``aread``). Optional methods, declared in
the backend's ``capabilities`` class attribute, are ``delete(session_id)``,
``list_sessions(prefix=None)`` (an iterator, or an async iterator, of ids), ``close()`` and
``append_if(session_id, records, after)`` (``conditional``) and
``recent_sessions(prefix, before, limit)`` (``recent``, see :data:`RECENT`); ``ttl`` and
``namespace`` are capabilities a backend declares when it honours a ``ttl=`` or
``namespace=`` option.

:class:`Store` wraps a backend: it validates session ids and batches before the backend
sees them, and lets sync and async callers use sync and async backends alike (a sync
backend runs in a worker thread under ``await``; an async backend runs on a private loop
thread under a blocking call).

*Inline hooks*: a thread hop costs 50-150 µs, more than a local database's whole read of
a window. A sync backend whose ``read``/``append``/``append_if`` are that short (local
I/O only, no network; waits bounded by other writers' short transactions) names them in
an ``inline_hooks`` class attribute, and ``await store.aread(...)`` then calls them
directly on the event loop. The embedded SQLite and memory backends do. Set
:attr:`Store.inline_hooks` to ``frozenset()`` to send every call to a worker thread
instead (e.g. a SQLite file on a network filesystem, or an application whose loop must
never wait for another process's write lock).

*Loop-safe async hooks*: an async backend (or a sync one with ``a``-prefixed twins) whose
coroutines may be awaited on any event loop, including loops that open and close one after
another (``asyncio.run`` per call, a loop per thread), and that releases what it holds for
a loop when that loop closes, says so with a ``loop_safe_async = True`` class attribute,
read as :attr:`Store.loop_safe_async`. Callers that otherwise keep away from the caller's
loop (a worker thread per call, as the Agents SDK adapter does) may then await
``aread``/``aappend``/``aappend_if`` directly. Redis declares it (one client per loop,
closed with the loop); a backend whose async pool outlives its loop must not.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from datetime import datetime, timezone
from typing import Any, Final, Protocol, runtime_checkable

from ._loop import LoopThread
from .errors import CapabilityMissing, StoreClosed
from .records import Record, check_records, check_session_id
from .urls import redact_url

__all__ = [
    "CAPABILITIES",
    "CLOSE",
    "CONDITIONAL",
    "DELETE",
    "DURABLE",
    "FULLTEXT",
    "LIST_SESSIONS",
    "NAMESPACE",
    "RECENT",
    "RECENT_PAGE",
    "SHARED",
    "TTL",
    "Backend",
    "Store",
]

#: ``delete(session_id)`` erases one session on every read path.
DELETE: Final = "delete"
#: ``list_sessions(prefix=None)`` enumerates session ids lazily, optionally by prefix.
LIST_SESSIONS: Final = "list_sessions"
#: ``close()`` releases connections and files.
CLOSE: Final = "close"
#: A ``ttl=`` option is honoured: sessions expire after that long without an append.
TTL: Final = "ttl"
#: Data is shared between handles and processes (files, servers).
SHARED: Final = "shared"
#: Data survives close and reopen.
DURABLE: Final = "durable"
#: ``append_if(session_id, records, after)``: append only if the log still ends at ``after``.
CONDITIONAL: Final = "conditional"
#: A ``namespace=`` option isolates tenants of one store (nested namespaces included).
NAMESPACE: Final = "namespace"

#: ``recent_sessions(prefix, before, limit)``: the most recently updated sessions, from an
#: index the backend keeps of each session's last append (no read of any session). The hook
#: returns up to ``limit`` ``(session_id, updated)`` pairs, ``updated`` the time (seconds
#: since the epoch, by the store's clock) of the session's last append that stored a record
#: (an append whose records were all stored already does not move it), newest first, ties
#: by session id descending; only pairs after the keyset cursor ``before`` (an earlier
#: page's last pair; ``None``: from the newest); only live sessions (deleted and expired
#: ones never); ``prefix`` filters ids as ``list_sessions`` does. Read through
#: :meth:`Store.recent_sessions`. A backend that declares ``recent`` without the hook (a
#: wrapper copying its inner store's capabilities, say) is opened without it: the index
#: only speeds up a listing that works without it, so such a store lists by the fallback.
RECENT: Final = "recent"

#: The backend keeps a full-text index of the words the core hands it with each record
#: (``fulltext_append``, and ``fulltext_append_if`` with ``conditional``: an append that
#: also indexes, in the same transaction), answers ``fulltext_sessions(groups, prefix,
#: before, limit)`` in ``recent``'s order and paging, and fills the index for records
#: stored before it existed (``fulltext_pending``, ``fulltext_backlog``,
#: ``fulltext_backfill``). See core/BACKENDS.md and :mod:`chatkeep.core.search`. Needs
#: ``recent``. A store declaring it without its hooks is opened without it.
FULLTEXT: Final = "fulltext"

#: Every optional capability a backend may declare.
CAPABILITIES: frozenset[str] = frozenset(
    {DELETE, LIST_SESSIONS, CLOSE, TTL, SHARED, DURABLE, CONDITIONAL, NAMESPACE, RECENT, FULLTEXT}
)

#: The hooks a backend declaring :data:`FULLTEXT` must have (sync or async).
FULLTEXT_HOOKS: Final = (
    "fulltext_append",
    "fulltext_sessions",
    "fulltext_pending",
    "fulltext_backlog",
    "fulltext_backfill",
)

#: How many ``(session_id, updated)`` pairs :meth:`Store.recent_sessions` asks the backend
#: for per call (fewer when its ``limit`` needs fewer).
RECENT_PAGE: Final = 500

_SENTINEL: Any = object()


@runtime_checkable
class Backend(Protocol):
    """What a backend provides at minimum: the two storage hooks.

    Methods may be sync or ``async def``. See the module docstring for the optional ones.
    """

    def append(self, session_id: str, records: list[Record], /) -> Any:
        """Store ``records`` at the end of the session's log, atomically (sync or async)."""
        ...

    def read(self, session_id: str, start: int = 0, stop: int | None = None, /) -> Any:
        """The session's records ``[start:stop]`` in append order (sync or async)."""
        ...


_Impl = Callable[..., Any]


def _split(
    backend: object, name: str
) -> tuple[Callable[..., Any] | None, Callable[..., Any] | None]:
    """Return the (sync, async) implementations a backend has for hook ``name``."""
    plain = getattr(backend, name, None)
    twin = getattr(backend, "a" + name, None)
    sync_impl = async_impl = None
    for candidate in (plain, twin):
        if candidate is None or not callable(candidate):
            continue
        if inspect.iscoroutinefunction(candidate) or inspect.isasyncgenfunction(candidate):
            async_impl = async_impl or candidate
        else:
            sync_impl = sync_impl or candidate
    return sync_impl, async_impl


def _check_slice(start: object, stop: object) -> None:
    if type(start) is not int:
        raise TypeError(f"start must be an int, not {type(start).__name__}")
    if stop is not None and type(stop) is not int:
        raise TypeError(f"stop must be an int or None, not {type(stop).__name__}")


class Store:
    """A session log store: the object :func:`chatkeep.core.open_store` returns.

    Every method has an async twin prefixed with ``a``. Example::

        store = open_store("sqlite:///chats.db")
        store.append("s1", [Record("m1", b"hello")])
        store.read("s1", start=-20)   # the last twenty records
    """

    __slots__ = (
        "_aappend",
        "_aappend_if",
        "_append",
        "_append_if",
        "_aread",
        "_backend",
        "_closed",
        "_inline_append",
        "_inline_append_if",
        "_inline_hooks",
        "_inline_read",
        "_loop",
        "_read",
        "capabilities",
        "loop_safe_async",
        "name",
        "url",
    )

    def __init__(
        self,
        backend: object,
        *,
        name: str | None = None,
        capabilities: Iterable[str] | None = None,
        url: str | None = None,
    ) -> None:
        if capabilities is None:
            capabilities = getattr(backend, "capabilities", ())
        self.capabilities: frozenset[str] = frozenset(capabilities)
        if RECENT in self.capabilities and _split(backend, "recent_sessions") == (None, None):
            # See RECENT: declared without its hook, it is dropped, not an error at listing.
            self.capabilities -= {RECENT}
        if FULLTEXT in self.capabilities and (
            RECENT not in self.capabilities
            or any(_split(backend, hook) == (None, None) for hook in FULLTEXT_HOOKS)
            or (
                CONDITIONAL in self.capabilities
                and _split(backend, "fulltext_append_if") == (None, None)
            )
        ):
            # Like recent: an index only makes a search faster; the scan works without it.
            self.capabilities -= {FULLTEXT}
        self.name: str = name or type(backend).__name__
        self.url: str | None = redact_url(url) if url else None
        self._backend = backend
        self._closed = False
        self._loop = LoopThread(self.name)
        self._append, self._aappend = _split(backend, "append")
        self._read, self._aread = _split(backend, "read")
        if not (self._append or self._aappend) or not (self._read or self._aread):
            raise TypeError(
                f"{type(backend).__name__} is not a chatkeep backend: it needs append and read"
            )
        self._append_if, self._aappend_if = _split(backend, "append_if")
        if CONDITIONAL in self.capabilities and not (self._append_if or self._aappend_if):
            raise TypeError(
                f"{type(backend).__name__} declares 'conditional' but has no append_if() method"
            )
        if FULLTEXT in self.capabilities:
            self._index_appends()
        self.inline_hooks = frozenset(getattr(backend, "inline_hooks", ()))
        #: Whether the backend's async hooks may be awaited on any event loop, loops that
        #: open and close included (its ``loop_safe_async`` declaration; see the module
        #: docstring). Assign ``False`` to keep callers that check it on worker threads.
        self.loop_safe_async: bool = getattr(backend, "loop_safe_async", False) is True and (
            self._aread is not None and self._aappend is not None
        )

    def _index_appends(self) -> None:
        """Route appends through the backend's ``fulltext_append`` (and ``_if``) hooks,
        with the words of each record extracted here (the backend never parses one)."""
        from .search_text import record_words  # it imports the views, which import this

        append, aappend = _split(self._backend, "fulltext_append")
        append_if, aappend_if = _split(self._backend, "fulltext_append_if")

        def words(batch: list[Record]) -> list[str]:
            return [record_words(record.data) for record in batch]

        self._append = None if append is None else (lambda s, b: append(s, b, words(b)))
        self._aappend = None if aappend is None else (lambda s, b: aappend(s, b, words(b)))
        if CONDITIONAL in self.capabilities:
            self._append_if = (
                None if append_if is None else (lambda s, b, a: append_if(s, b, a, words(b)))
            )
            self._aappend_if = (
                None if aappend_if is None else (lambda s, b, a: aappend_if(s, b, a, words(b)))
            )

    @property
    def inline_hooks(self) -> frozenset[str]:
        """The sync hooks (of ``read``, ``append``, ``append_if``) that async calls run
        directly on the event loop instead of in a worker thread: the backend's
        ``inline_hooks`` declaration (see the module docstring). Assign
        ``frozenset()`` to run them all in worker threads."""
        return self._inline_hooks

    @inline_hooks.setter
    def inline_hooks(self, hooks: Iterable[str]) -> None:
        hooks = frozenset(hooks)
        unknown = hooks - {"read", "append", "append_if"}
        if unknown:
            raise ValueError(f"only read, append and append_if can run inline, not {unknown}")
        self._inline_hooks = hooks
        # Only a hook the backend has as a plain function runs inline (an async twin is
        # awaited anyway).
        self._inline_read = "read" in hooks and self._aread is None
        self._inline_append = "append" in hooks and self._aappend is None
        self._inline_append_if = "append_if" in hooks and self._aappend_if is None

    # -- introspection -------------------------------------------------------------------

    @property
    def backend(self) -> object:
        """The wrapped backend object (for backend-specific operations)."""
        return self._backend

    def supports(self, capability: str) -> bool:
        """Whether the backend declared ``capability`` (see :data:`CAPABILITIES`)."""
        return capability in self.capabilities

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called; every hook then raises :class:`StoreClosed`."""
        return self._closed

    def _require(self, capability: str) -> None:
        if self._closed:
            raise StoreClosed(self.name)
        if capability not in self.capabilities:
            raise CapabilityMissing(self.name, capability)

    def __repr__(self) -> str:
        # url is already redacted by open_store; never echo backend options here.
        shown = f" url={self.url!r}" if self.url else ""
        return f"<chatkeep Store backend={self.name!r}{shown}>"

    # -- the two hooks --------------------------------------------------------------------

    def append(self, session_id: str, records: Iterable[Record | tuple[str, bytes]]) -> None:
        """Append ``records`` to the session's log, atomically and in order.

        Records whose id is already stored with the same data are skipped (so retrying a
        batch after an error is safe); an id already stored with *different* data refuses
        the whole batch with :class:`~chatkeep.core.errors.RecordConflict`.
        """
        if self._closed:
            raise StoreClosed(self.name)
        session_id = check_session_id(session_id)
        batch = check_records(records)
        if not batch:
            return
        if self._append is not None:
            self._append(session_id, batch)
        else:
            assert self._aappend is not None
            self._loop.run(self._aappend(session_id, batch))

    async def aappend(self, session_id: str, records: Iterable[Record | tuple[str, bytes]]) -> None:
        """Async :meth:`append`."""
        if self._closed:
            raise StoreClosed(self.name)
        session_id = check_session_id(session_id)
        batch = check_records(records)
        if not batch:
            return
        if self._aappend is not None:
            await self._aappend(session_id, batch)
        else:
            assert self._append is not None
            if self._inline_append:
                self._append(session_id, batch)
            else:
                await asyncio.to_thread(self._append, session_id, batch)

    def _conditional(self) -> None:
        if self._closed:
            raise StoreClosed(self.name)
        self._require(CONDITIONAL)

    def append_if(
        self,
        session_id: str,
        records: Iterable[Record | tuple[str, bytes]],
        *,
        after: str | None,
    ) -> None:
        """Append ``records`` only if the session's last record is still ``after``
        (``None``: the session has no records); otherwise raise
        :class:`~chatkeep.core.errors.AppendConflict` and store nothing.

        Records already stored with the same data are dropped first, so an exact retry of
        an acknowledged call succeeds as a no-op whatever the condition. Needs the
        ``conditional`` capability. Example (race-free "replace my last draft")::

            last = store.read("s1", -1)
            store.append_if("s1", [Record("m9", b"...")], after=last[0].id if last else None)
        """
        self._conditional()
        session_id = check_session_id(session_id)
        batch = check_records(records)
        if after is not None and (type(after) is not str or not after):
            raise TypeError("after must be a record id (a non-empty str) or None")
        if not batch:
            return
        if self._append_if is not None:
            self._append_if(session_id, batch, after)
        else:
            assert self._aappend_if is not None
            self._loop.run(self._aappend_if(session_id, batch, after))

    async def aappend_if(
        self,
        session_id: str,
        records: Iterable[Record | tuple[str, bytes]],
        *,
        after: str | None,
    ) -> None:
        """Async :meth:`append_if`."""
        self._conditional()
        session_id = check_session_id(session_id)
        batch = check_records(records)
        if after is not None and (type(after) is not str or not after):
            raise TypeError("after must be a record id (a non-empty str) or None")
        if not batch:
            return
        if self._aappend_if is not None:
            await self._aappend_if(session_id, batch, after)
        else:
            assert self._append_if is not None
            if self._inline_append_if:
                self._append_if(session_id, batch, after)
            else:
                await asyncio.to_thread(self._append_if, session_id, batch, after)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        """Return the session's records in append order, sliced like ``log[start:stop]``.

        An unknown session reads as ``[]``. ``start=-20`` reads the last twenty records at a
        cost proportional to twenty, not to the log's length.
        """
        if self._closed:
            raise StoreClosed(self.name)
        session_id = check_session_id(session_id)
        _check_slice(start, stop)
        if self._read is not None:
            result: list[Record] = self._read(session_id, start, stop)
        else:
            assert self._aread is not None
            result = self._loop.run(self._aread(session_id, start, stop))
        return result

    async def aread(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        """Async :meth:`read`."""
        if self._closed:
            raise StoreClosed(self.name)
        session_id = check_session_id(session_id)
        _check_slice(start, stop)
        if self._aread is not None:
            result: list[Record] = await self._aread(session_id, start, stop)
        else:
            assert self._read is not None
            if self._inline_read:
                result = self._read(session_id, start, stop)
            else:
                result = await asyncio.to_thread(self._read, session_id, start, stop)
        return result

    # -- optional capabilities ------------------------------------------------------------

    def _impls(self, hook: str) -> tuple[_Impl | None, _Impl | None]:
        sync_impl, async_impl = _split(self._backend, hook)
        if sync_impl is None and async_impl is None and hook != "close":
            raise TypeError(f"backend {self.name!r} declares {hook!r} but has no {hook}() method")
        return sync_impl, async_impl

    def _call(self, hook: str, *args: Any) -> Any:
        sync_impl, async_impl = self._impls(hook)
        if sync_impl is not None:
            return sync_impl(*args)
        if async_impl is not None:
            return self._loop.run(async_impl(*args))
        return None

    async def _acall(self, hook: str, *args: Any) -> Any:
        sync_impl, async_impl = self._impls(hook)
        if async_impl is not None:
            return await async_impl(*args)
        if sync_impl is not None:
            return await asyncio.to_thread(sync_impl, *args)
        return None

    def delete(self, session_id: str) -> None:
        """Erase the session: afterwards nothing of it is readable or listed."""
        self._require("delete")
        self._call("delete", check_session_id(session_id))

    async def adelete(self, session_id: str) -> None:
        """Async :meth:`delete`."""
        self._require("delete")
        await self._acall("delete", check_session_id(session_id))

    def _listing(self, prefix: str | None) -> tuple[_Impl | None, _Impl | None]:
        self._require("list_sessions")
        if prefix is not None and type(prefix) is not str:
            raise TypeError(f"prefix must be a str or None, not {type(prefix).__name__}")
        return self._impls("list_sessions")

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        """An iterator over the ids of stored sessions (those starting with ``prefix``),
        fetched lazily. Errors (a missing capability, a bad prefix) raise at the call."""
        return self._iterate_sessions(prefix, *self._listing(prefix))

    def _iterate_sessions(
        self, prefix: str | None, sync_impl: _Impl | None, async_impl: _Impl | None
    ) -> Iterator[str]:
        if sync_impl is not None:
            yield from sync_impl(prefix)
            return
        assert async_impl is not None
        iterator: AsyncIterator[str] = async_impl(prefix).__aiter__()
        while True:
            item = self._loop.run(_anext_or(iterator))
            if item is _SENTINEL:
                return
            yield item

    def alist_sessions(self, prefix: str | None = None) -> AsyncIterator[str]:
        """Async :meth:`list_sessions` (``async for session_id in store.alist_sessions()``)."""
        return self._aiterate_sessions(prefix, *self._listing(prefix))

    async def _aiterate_sessions(
        self, prefix: str | None, sync_impl: _Impl | None, async_impl: _Impl | None
    ) -> AsyncIterator[str]:
        if async_impl is not None:
            inner = async_impl(prefix)
            try:
                async for item in inner:
                    yield item
            finally:
                # Closed early (a caller that stops at the first id), the backend's listing
                # closes now, not when the loop gets round to collecting it.
                aclose = getattr(inner, "aclose", None)
                if aclose is not None:
                    await aclose()
            return
        assert sync_impl is not None
        iterator = iter(await asyncio.to_thread(sync_impl, prefix))
        while True:
            item = await asyncio.to_thread(next, iterator, _SENTINEL)
            if item is _SENTINEL:
                return
            yield item

    def _recent(self, prefix: str | None, limit: int | None) -> tuple[_Impl | None, _Impl | None]:
        self._require(RECENT)
        if prefix is not None and type(prefix) is not str:
            raise TypeError(f"prefix must be a str or None, not {type(prefix).__name__}")
        if limit is not None and type(limit) is not int:
            raise TypeError(f"limit must be an int or None, not {type(limit).__name__}")
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, not {limit}")
        return self._impls("recent_sessions")

    def recent_sessions(
        self, prefix: str | None = None, limit: int | None = None
    ) -> Iterator[tuple[str, datetime]]:
        """The ids of the most recently updated sessions (those starting with ``prefix``),
        newest first, with the time of each one's last append that stored a record (UTC),
        at most ``limit``; ties by id, descending. Needs the ``recent`` capability
        (:data:`RECENT`): the backend answers from its own index, :data:`RECENT_PAGE` pairs
        per query (keyset paging), and reads no session. Deleted and expired sessions are
        not listed. Errors (a missing capability, a bad argument) raise at the call.
        Example::

            for session_id, updated in store.recent_sessions(limit=20):
                print(updated.isoformat(), session_id)
        """
        return self._iterate_recent(prefix, limit, *self._recent(prefix, limit))

    def _iterate_recent(
        self,
        prefix: str | None,
        limit: int | None,
        sync_impl: _Impl | None,
        async_impl: _Impl | None,
    ) -> Iterator[tuple[str, datetime]]:
        before: tuple[float, str] | None = None
        left = limit
        while left is None or left > 0:
            size = RECENT_PAGE if left is None else min(left, RECENT_PAGE)
            if sync_impl is not None:
                page = sync_impl(prefix, before, size)
            else:
                assert async_impl is not None
                page = self._loop.run(async_impl(prefix, before, size))
            yield from _dated(page)
            if len(page) < size:
                return
            if left is not None:
                left -= len(page)
            session_id, updated = page[-1]
            before = (updated, session_id)

    def recent_page(
        self, prefix: str | None, before: tuple[float, str] | None, limit: int
    ) -> list[tuple[str, float]]:
        """One call of the backend's ``recent_sessions`` hook: up to ``limit``
        ``(session_id, updated)`` pairs (``updated`` in seconds since the epoch) after the
        cursor ``before``, exactly as the backend returns them. For wrapper backends that
        pass the ``recent`` capability through (``chatkeep-encrypted``); applications use
        :meth:`recent_sessions`."""
        sync_impl, async_impl = self._recent(prefix, limit)
        _check_cursor(before)
        if sync_impl is not None:
            page: list[tuple[str, float]] = sync_impl(prefix, before, limit)
        else:
            assert async_impl is not None
            page = self._loop.run(async_impl(prefix, before, limit))
        return page

    async def arecent_page(
        self, prefix: str | None, before: tuple[float, str] | None, limit: int
    ) -> list[tuple[str, float]]:
        """Async :meth:`recent_page`."""
        sync_impl, async_impl = self._recent(prefix, limit)
        _check_cursor(before)
        if async_impl is not None:
            page: list[tuple[str, float]] = await async_impl(prefix, before, limit)
        else:
            assert sync_impl is not None
            page = await asyncio.to_thread(sync_impl, prefix, before, limit)
        return page

    def arecent_sessions(
        self, prefix: str | None = None, limit: int | None = None
    ) -> AsyncIterator[tuple[str, datetime]]:
        """Async :meth:`recent_sessions` (``async for session_id, updated in ...``)."""
        return self._aiterate_recent(prefix, limit, *self._recent(prefix, limit))

    async def _aiterate_recent(
        self,
        prefix: str | None,
        limit: int | None,
        sync_impl: _Impl | None,
        async_impl: _Impl | None,
    ) -> AsyncIterator[tuple[str, datetime]]:
        before: tuple[float, str] | None = None
        left = limit
        while left is None or left > 0:
            size = RECENT_PAGE if left is None else min(left, RECENT_PAGE)
            if async_impl is not None:
                page = await async_impl(prefix, before, size)
            else:
                assert sync_impl is not None
                if self._inline_read:  # a local index query costs what a read does
                    page = sync_impl(prefix, before, size)
                else:
                    page = await asyncio.to_thread(sync_impl, prefix, before, size)
            for item in _dated(page):
                yield item
            if len(page) < size:
                return
            if left is not None:
                left -= len(page)
            session_id, updated = page[-1]
            before = (updated, session_id)

    # -- full-text index (FULLTEXT) ------------------------------------------------------

    def fulltext_page(
        self,
        words: list[str],
        prefix: str | None,
        before: tuple[float, str] | None,
        limit: int,
    ) -> list[tuple[str, float]]:
        """One page of the backend's ``fulltext_sessions``: the sessions (as
        :meth:`recent_page` pairs, in its order) holding a record with, for each of
        ``words`` (cut as the index keeps them), a word starting with it, and every session
        holding a record that starts a fork or that the index could not hold whole. For
        :mod:`chatkeep.core.search`; applications call its ``search``."""
        from .search_text import FORK_WORD, UNINDEXED_WORD, index_terms

        self._require(FULLTEXT)
        _check_cursor(before)
        groups = [index_terms(words), [FORK_WORD], [UNINDEXED_WORD]]
        page: list[tuple[str, float]] = self._call(
            "fulltext_sessions", groups, prefix, before, limit
        )
        return page

    async def afulltext_page(
        self,
        words: list[str],
        prefix: str | None,
        before: tuple[float, str] | None,
        limit: int,
    ) -> list[tuple[str, float]]:
        """Async :meth:`fulltext_page`."""
        from .search_text import FORK_WORD, UNINDEXED_WORD, index_terms

        self._require(FULLTEXT)
        _check_cursor(before)
        groups = [index_terms(words), [FORK_WORD], [UNINDEXED_WORD]]
        page: list[tuple[str, float]] = await self._acall(
            "fulltext_sessions", groups, prefix, before, limit
        )
        return page

    def fulltext_pending(self) -> int:
        """How many stored records the full-text index does not cover yet (0: complete;
        ``chatkeep index build`` indexes them)."""
        self._require(FULLTEXT)
        return int(self._call("fulltext_pending"))

    def fulltext_ready(self) -> bool:
        """Whether the store keeps a full-text index that covers every record."""
        return self.supports(FULLTEXT) and self.fulltext_pending() == 0

    async def afulltext_ready(self) -> bool:
        """Async :meth:`fulltext_ready`."""
        if not self.supports(FULLTEXT):
            return False
        return int(await self._acall("fulltext_pending")) == 0

    def fulltext_backlog(self, limit: int) -> list[tuple[Any, str, Record]]:
        """Up to ``limit`` records the index does not cover yet, oldest first, as
        ``(key, session_id, record)``; for :func:`chatkeep.core.search_index.build_index`."""
        self._require(FULLTEXT)
        backlog: list[tuple[Any, str, Record]] = self._call("fulltext_backlog", limit)
        return backlog

    def fulltext_backfill(self, entries: list[tuple[Any, str]]) -> None:
        """Index ``(key, words)`` pairs of records :meth:`fulltext_backlog` returned."""
        self._require(FULLTEXT)
        self._call("fulltext_backfill", entries)

    def close(self) -> None:
        """Release the backend's resources. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._call("close")
        finally:
            self._loop.stop()

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._acall("close")
        finally:
            if self._loop.started:  # joining a thread blocks: keep it off the event loop
                await asyncio.to_thread(self._loop.stop)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _check_cursor(before: object) -> None:
    if before is None:
        return
    if (
        type(before) is not tuple
        or len(before) != 2
        or type(before[0]) not in (int, float)
        or type(before[1]) is not str
    ):
        raise TypeError(f"before must be None or an (updated, session_id) tuple, not {before!r}")


def _dated(page: list[tuple[str, float]]) -> Iterator[tuple[str, datetime]]:
    for session_id, updated in page:
        yield session_id, datetime.fromtimestamp(updated, timezone.utc)


async def _anext_or(iterator: AsyncIterator[str]) -> Any:
    try:
        return await iterator.__anext__()
    except StopAsyncIteration:
        return _SENTINEL
