"""``ChatkeepHistoryProvider``: Microsoft Agent Framework's ``HistoryProvider`` on any
chatkeep store."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any, ClassVar

from agent_framework import HistoryProvider
from agent_framework import Message as MafMessage

from chatkeep.core import (
    DEFAULT_CACHE_BYTES,
    InvalidOption,
    Message,
    Store,
    TailCache,
    adelete_session,
    encode_records,
    new_id,
)
from chatkeep.core.adapters import adapter_store, appended_messages, aread_view_kept
from chatkeep.core.metadata import RunningCount, aread_view_counted, utc_stamp
from chatkeep.core.reducers import drop_orphan_results

from .convert import FRAMEWORK_MESSAGE_ID, from_maf, to_maf
from .tail import KEPT, SESSIONS, KnownTail, TailMemory

__all__ = ["ChatkeepHistoryProvider"]


class ChatkeepHistoryProvider(HistoryProvider):
    """Keeps a Microsoft Agent Framework agent's conversation history in a chatkeep store.

    A drop-in for MAF's ``InMemoryHistoryProvider``, ``FileHistoryProvider`` or
    ``RedisHistoryProvider``::

        from agent_framework import Agent
        from chatkeep.agent_framework import ChatkeepHistoryProvider

        history = ChatkeepHistoryProvider(url="sqlite:///chats.db")
        agent = Agent(client, context_providers=[history])

    ``url``: a chatkeep store URL (``sqlite:///chats.db``, ``redis://...``,
    ``postgresql://...``, ``s3://...``, ...); ``store``: an open
    :class:`~chatkeep.core.Store` instead (borrowed: :meth:`aclose` leaves it open). With
    neither, ``CHATKEEP_URL`` or the embedded SQLite default. One session of the store per
    MAF session id (``session_id=None`` is the session ``"default"``, as in MAF's file
    store).

    ``get_messages`` returns the session's *view* (undo, forks and compaction checkpoints
    applied), the last ``max_messages`` of it when set (a tail read: its cost does not grow
    with the session; a tool result whose call fell outside the window is left out).
    ``max_messages`` never deletes anything (unlike ``RedisHistoryProvider``'s, which trims
    the stored list). ``save_messages`` drops what MAF's own providers drop as already
    stored (a replayed transcript) and appends the rest in one call. The flags are MAF's.

    The provider keeps each session's decoded view between turns (a
    :class:`~chatkeep.core.TailCache` per session, for the last 512 sessions, each bounded by
    ``cache_bytes`` of stored records, default 8 MiB; ``0`` keeps none): the next
    ``get_messages`` reads only the log's last records and, when they are what this
    provider left there, skips reading and decoding the history again. Anything another
    writer did in between (an append, undo, fork, compaction, a delete and re-create) shows
    in those records and the view is read again.
    """

    DEFAULT_SOURCE_ID: ClassVar[str] = "chatkeep"
    #: The chatkeep session that ``session_id=None`` reads and writes.
    DEFAULT_SESSION_ID: ClassVar[str] = "default"

    def __init__(
        self,
        *,
        url: str | None = None,
        store: Store | None = None,
        source_id: str = DEFAULT_SOURCE_ID,
        load_messages: bool = True,
        store_inputs: bool = True,
        store_context_messages: bool = False,
        store_context_from: set[str] | None = None,
        store_outputs: bool = True,
        max_messages: int | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        if not isinstance(source_id, str) or not source_id:
            raise InvalidOption("source_id must be a non-empty str")
        if max_messages is not None and (type(max_messages) is not int or max_messages < 1):
            raise InvalidOption(
                f"max_messages must be a positive int or None, not {max_messages!r}"
            )
        super().__init__(
            source_id,
            load_messages=load_messages,
            store_inputs=store_inputs,
            store_context_messages=store_context_messages,
            store_context_from=store_context_from,
            store_outputs=store_outputs,
        )
        if type(cache_bytes) is not int or cache_bytes < 0:
            raise InvalidOption(f"cache_bytes must be a non-negative int, not {cache_bytes!r}")
        self.max_messages = max_messages
        self.cache_bytes = cache_bytes
        self._tails = TailMemory()
        self._views: OrderedDict[str, TailCache[Message]] = OrderedDict()
        self._views_lock = threading.Lock()
        self.store: Store
        self.store, self._owns_store = adapter_store(url, store, owner="ChatkeepHistoryProvider")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(source_id={self.source_id!r}, store={self.store!r})"

    def _session(self, session_id: str | None) -> str:
        return session_id or self.DEFAULT_SESSION_ID

    # -- MAF's HistoryProvider ------------------------------------------------------------

    async def get_messages(
        self, session_id: str | None, *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[MafMessage]:
        """The session's view as MAF messages, oldest first (the last ``max_messages``)."""
        session = self._session(session_id)
        limit = self.max_messages
        view, count = await self._read_view(session, limit)
        shown = view if limit is None else drop_orphan_results(view)
        loaded = [to_maf(message) for message in shown]
        # Remember the session's end for the save after the model call (see tail.py).
        if len(shown) == len(view) and all(a is b for a, b in zip(shown, view, strict=True)):
            pairs = list(zip(loaded[-KEPT:], map(_assigned_id, shown[-KEPT:]), strict=True))
        else:  # the window dropped a result: remember what is stored, not what is shown
            pairs = [(to_maf(message), _assigned_id(message)) for message in view[-KEPT:]]
        whole = (limit is None or len(view) < limit) and len(view) <= KEPT
        self._tails.put(session, KnownTail.of(pairs, whole=whole, count=count))
        return loaded

    async def save_messages(
        self,
        session_id: str | None,
        messages: Sequence[MafMessage],
        *,
        state: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Append the messages not stored yet, in one call (``[]`` is a no-op).

        What is "stored yet" is MAF's rule (``filter_new_messages``: a caller that replays
        the whole transcript adds only its new tail), checked against the last
        ``len(messages)`` messages of the session, which is all the rule can look at: as
        ``get_messages`` last saw them in this process, else read from the store.
        """
        if not messages:
            return
        session = self._session(session_id)
        incoming = list(messages)
        tail, version = self._tails.get(session)
        if tail is None or not tail.covers(len(incoming)):
            view, count = await aread_view_counted(self.store, session, limit=len(incoming))
            pairs = [(to_maf(message), _assigned_id(message)) for message in view]
            tail = KnownTail.of(pairs, whole=len(view) < len(incoming), count=count)
        incoming = tail.new_messages(incoming)
        if not incoming:
            return
        converted = [from_maf(message, new_id()) for message in incoming]
        if tail.count is not None:  # the running count, as HistoryProvider writes it
            converted = tail.count.mark(converted)
        # When they were stored, for chatkeep.core.metadata.
        records = encode_records(converted, stored_at=utc_stamp())
        cache = self._view_cache(session)
        follows = cache is not None and cache.holds(self.store, session, self.max_messages)
        try:
            await self.store.aappend(session, records)
        except BaseException:
            self._tails.forget(session)
            if cache is not None:
                cache.clear()
            raise
        if cache is not None and follows:
            # The view's cache follows this append; the next load's tail check proves that
            # nothing landed before it.
            after = None if tail.count is None else tail.count.extended(records).n
            cache.extend(records, appended_messages(records), count=after)
        elif cache is not None:
            cache.clear()
        saved = [
            (message, record.id if message.message_id is None else None)
            for message, record in zip(incoming, records, strict=True)
        ]
        count = None if tail.count is None else tail.count.extended(records)
        self._tails.put(session, replace(tail.extended(saved), count=count), version=version)

    # -- the kept views ---------------------------------------------------------------------

    def _view_cache(self, session: str, *, create: bool = False) -> TailCache[Message] | None:
        """The session's view cache (made with ``create``; the least recently used of more
        than :data:`~chatkeep.agent_framework.tail.SESSIONS` go)."""
        with self._views_lock:
            cache = self._views.get(session)
            if cache is not None:
                self._views.move_to_end(session)
            elif create and self.cache_bytes:
                cache = self._views[session] = TailCache(self.cache_bytes)
                while len(self._views) > SESSIONS:
                    self._views.popitem(last=False)
            return cache

    async def _read_view(
        self, session: str, limit: int | None
    ) -> tuple[list[Message], RunningCount | None]:
        """The session's view (its newest ``limit`` messages) and the running count the read
        proves: from the kept view when a tail read shows the log as this provider left it,
        else read (and kept). The list is the cache's own: convert, never change it."""
        cache = self._view_cache(session, create=True)
        if cache is None:
            return await aread_view_counted(self.store, session, limit=limit)
        return await aread_view_kept(self.store, session, cache, limit=limit)

    # -- beyond MAF's interface -----------------------------------------------------------

    async def clear(self, session_id: str | None) -> None:
        """Erase the session's history (its forks keep their own copy of what they share).
        Needs a store with the ``delete`` capability."""
        session = self._session(session_id)
        self._tails.forget(session)
        with self._views_lock:
            self._views.pop(session, None)
        await adelete_session(self.store, session)

    async def list_sessions(self, prefix: str | None = None) -> list[str]:
        """The ids of the store's sessions (starting with ``prefix``), in the store's order.
        Needs the ``list_sessions`` capability."""
        return [session async for session in self.store.alist_sessions(prefix)]

    def close(self) -> None:
        """Close the store if this provider opened it (``url=`` or the default). Idempotent."""
        if self._owns_store:
            self.store.close()

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        if self._owns_store:
            await self.store.aclose()

    async def __aenter__(self) -> ChatkeepHistoryProvider:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


def _assigned_id(message: Message) -> str | None:
    """The chatkeep id a stored message is handed to MAF with, if MAF gave it none."""
    return None if FRAMEWORK_MESSAGE_ID in message.extra else message.message_id
