"""``ChatkeepChatMessageHistory``: LangChain's ``BaseChatMessageHistory`` on any chatkeep
store."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from chatkeep.core import (
    AppendConflict,
    Record,
    Store,
    TailCache,
    ViewError,
    check_session_id,
    delete_session,
    new_id,
    read_view,
)
from chatkeep.core.adapters import adapter_store, plain_tail, stamped_records
from chatkeep.core.codec import MARKER
from chatkeep.core.metadata import (
    CountMark,
    RunningCount,
    read_view_counted,
    tail_running_count,
)
from chatkeep.core.views import Checkpoint

from .convert import from_chatkeep, from_dict, to_chatkeep

__all__ = ["ChatkeepChatMessageHistory"]

_RETRIES = 64


class ChatkeepChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat message history kept in a chatkeep store, a drop-in for
    ``SQLChatMessageHistory``, ``RedisChatMessageHistory`` or
    ``PostgresChatMessageHistory``::

        from chatkeep.langchain import ChatkeepChatMessageHistory

        history = ChatkeepChatMessageHistory("user-42", url="redis://localhost:6379/0")
        history.add_messages([HumanMessage("hi"), AIMessage("hello")])
        history.messages  # [HumanMessage(content='hi'), AIMessage(content='hello')]

    ``url``: a chatkeep store URL, opened for this history (closed by :meth:`close`);
    ``store``: an open :class:`~chatkeep.core.Store` to share (left open); neither:
    ``$CHATKEEP_URL``, else the embedded SQLite file. ``max_messages``: :attr:`messages`
    returns only the newest N, read from the end of the log (the cost then follows N, not
    the length of the conversation); a tool result whose call was cut off may lead.

    Messages come back equal (LangChain's ``==``) to what was added: tool calls,
    ``ToolMessage`` with ``status`` and ``artifact``, images, reasoning blocks, ``id``,
    metadata. They are stored as chatkeep messages, so ``chatkeep.core.read_view`` and every
    other chatkeep reader see the same conversation. Every method has a native async twin
    (``aget_messages``, ``aadd_messages``, ``aclear``), which runs the store's blocking
    API in a worker thread, so no event loop is ever tied to the store.
    """

    def __init__(
        self,
        session_id: str,
        *,
        url: str | None = None,
        store: Store | None = None,
        max_messages: int | None = None,
    ) -> None:
        super().__init__()
        if max_messages is not None and (type(max_messages) is not int or max_messages < 1):
            raise ValueError("max_messages must be a positive int or None")
        self.session_id: str = check_session_id(session_id)
        self.max_messages = max_messages
        self._store, self._owns_store = adapter_store(
            url, store, owner="ChatkeepChatMessageHistory"
        )
        # The running count the last read proved (chatkeep.core.metadata), for the mark the
        # next add_messages writes; None when nothing proved it.
        self._count: RunningCount | None = None
        # The plain records the last read took (and those appended since), trusted after a
        # tail read shows the log still ends with them (chatkeep.core.TailCache): the next
        # read parses them again instead of reading the history. Records, not messages, so
        # what a caller does to the messages it gets never reaches the cache.
        self._cache: TailCache[Record] = TailCache()

    @property
    def store(self) -> Store:
        """The chatkeep store holding this history."""
        return self._store

    def __repr__(self) -> str:
        return f"ChatkeepChatMessageHistory({self.session_id!r}, store={self._store!r})"

    # -- reading ---------------------------------------------------------------------------

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The conversation, oldest first (the newest ``max_messages`` when set)."""
        # The fast path: plain message records decoded straight to LangChain messages;
        # anything else (control records, tagged values, messages other chatkeep code
        # wrote, damage) goes through the view, which reports damage with its position.
        limit = self.max_messages
        records = self._cache.check(self._store, self.session_id, limit)
        cached = records is not None
        if records is None:
            records = plain_tail(self._store, self.session_id, limit)
        if records is not None:
            out = []
            for record in records:
                message = _from_record(record)
                if message is None:
                    break
                out.append(message)
            else:
                whole = limit is None or len(records) < limit
                self._count = tail_running_count(records, whole=whole)
                if not cached:
                    self._cache.fill_records(
                        self._store, self.session_id, records, records, key=limit, limit=limit
                    )
                return out
        self._cache.clear()
        view, self._count = read_view_counted(self._store, self.session_id, limit=limit)
        return [from_chatkeep(message) for message in view]

    async def aget_messages(self) -> list[BaseMessage]:
        """Async :attr:`messages`."""
        return await asyncio.to_thread(lambda: self.messages)

    # -- writing ---------------------------------------------------------------------------

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` in one atomic store append (``[]``: nothing). A message that
        cannot be stored (a non-JSON ``artifact``, say) raises ``EncodeError`` and nothing
        of the batch is stored."""
        count, self._count = self._count, None
        records = self._records(messages, count)
        if records:
            self._store.append(self.session_id, records)
            self._count = None if count is None else count.extended(records)
            self._took(records)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Async :meth:`add_messages`."""
        count, self._count = self._count, None
        records = self._records(messages, count)
        if records:
            await asyncio.to_thread(self._store.append, self.session_id, records)
            self._count = None if count is None else count.extended(records)
            self._took(records)

    def _took(self, records: list[Record]) -> None:
        """The cache follows this object's own append (a record that is not plain, and
        the next read takes the view)."""
        if any(_TAGGED in record.data for record in records):
            self._cache.clear()
        else:
            self._cache.extend(records, records)

    def _records(
        self, messages: Sequence[BaseMessage], count: RunningCount | None = None
    ) -> list[Record]:
        """The batch's records (:func:`~chatkeep.core.adapters.stamped_records`)."""
        converted = [to_chatkeep(message, message_id=new_id()) for message in messages]
        return stamped_records(converted, count, noun="message")

    # -- clearing and closing ----------------------------------------------------------------

    def clear(self) -> None:
        """Remove every message: erased from the store where it can ``delete`` (forks of
        the session keep their history), otherwise hidden from the view (the log keeps
        it)."""
        self._count = None
        self._cache.clear()
        if self._store.supports("delete"):
            delete_session(self._store, self.session_id)
        else:
            _hide(self._store, self.session_id)

    async def aclear(self) -> None:
        """Async :meth:`clear`."""
        await asyncio.to_thread(self.clear)

    def close(self) -> None:
        """Close the store if this history opened it (``url=``). Idempotent."""
        if self._owns_store:
            self._store.close()

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        if self._owns_store:
            await self._store.aclose()


_TAGGED = f'"{MARKER}"'.encode()


def _from_record(record: Record) -> BaseMessage | None:
    """The LangChain message a record of this adapter holds, without building a chatkeep
    message; ``None`` when that needs the codec or the record is not one of ours."""
    if _TAGGED in record.data:
        return None
    try:
        raw = json.loads(record.data)
    except ValueError:
        return None
    if not isinstance(raw, dict) or raw.get("message_id") not in (None, record.id):
        return None
    try:
        return from_dict(raw)
    except (TypeError, ValueError, KeyError):
        return None


def _hide(store: Store, session_id: str) -> None:
    """Empty the view without deleting: one checkpoint that says "nothing before me",
    appended only if the log still ends where it was read (retried otherwise)."""
    conditional = store.supports("conditional")
    for _attempt in range(_RETRIES):
        last = store.read(session_id, -1)
        if not last or not read_view(store, session_id, limit=1):
            return
        # An empty view: its running count is 0 (chatkeep.core.metadata).
        record = Checkpoint(last[0].id, 0, []).to_record(CountMark(0, last[0].id, 1))
        if conditional:
            try:
                store.append_if(session_id, [record], after=last[0].id)
            except AppendConflict:
                continue
            return
        store.append(session_id, [record])
        # Without a conditional append a writer may have landed in between, and then
        # the checkpoint covers nothing (it is ignored): check, and go again.
        tail = [entry.id for entry in store.read(session_id, -16)]
        if record.id not in tail:
            return
        index = tail.index(record.id)
        if index > 0 and tail[index - 1] == last[0].id:
            return
    raise ViewError(f"session {session_id!r} kept changing while it was being cleared")
