"""``ChatkeepChatStore``: LlamaIndex's ``BaseChatStore`` on any chatkeep store."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

from llama_index.core.llms import ChatMessage
from llama_index.core.storage.chat_store.base import BaseChatStore
from pydantic import PrivateAttr

from chatkeep.core import (
    AppendConflict,
    EditOutOfRange,
    Message,
    Record,
    Store,
    check_session_id,
    encode_records,
    new_id,
)
from chatkeep.core.adapters import (
    adapter_store,
    aplain_tail,
    in_thread,
    native,
    plain_tail,
    session_lock,
    settled,
)
from chatkeep.core.codec import MARKER, parse_json
from chatkeep.core.metadata import utc_stamp
from chatkeep.core.views import (
    Spliced,
    adelete_session,
    aedit_delete,
    aedit_insert,
    aedit_set,
    aedit_splice_known,
    alist_conversations,
    aread_view,
    delete_session,
    edit_delete,
    edit_insert,
    edit_set,
    edit_splice_known,
    list_conversations,
    read_view,
)

from .kept import KeptViews, fresh
from .messages import chat_message_from_record, chat_message_to_message, message_to_chat_message

__all__ = ["ChatkeepChatStore"]

#: What :meth:`KeptViews.current` hands an edit: the log's newest record, the messages.
_Known = tuple[str | None, list[ChatMessage]]


class _Lost(enum.Enum):
    """An edit on the kept conversation lost a race (nothing written): edit the usual way."""

    LOST = "lost"


_LOST = _Lost.LOST
#: What an edit on the kept conversation removed (``None``: no such message), or ``_LOST``.
_Deleted = ChatMessage | Literal[_Lost.LOST] | None

T = TypeVar("T")


def _chat_messages(messages: Sequence[Message]) -> list[ChatMessage]:
    return [message_to_chat_message(message) for message in messages]


_TAGGED = f'"{MARKER}"'.encode()


def _from_records(records: Sequence[Record] | None) -> list[ChatMessage] | None:
    """The ChatMessages of a plain tail (:func:`~chatkeep.core.adapters.plain_tail`), each
    built from the record's JSON in one validation; ``None`` when there is no plain tail or
    one of its records needs the codec (tagged values) or holds more than text."""
    if records is None:
        return None
    out = []
    for record in records:
        if _TAGGED in record.data:
            return None
        try:
            raw = parse_json(record.data)
        except (ValueError, RecursionError):
            return None
        if not isinstance(raw, dict) or raw.get("message_id") not in (None, record.id):
            return None
        chat_message = chat_message_from_record(raw)
        if chat_message is None:
            return None
        out.append(chat_message)
    return out


def _messages(chat_messages: Sequence[ChatMessage]) -> list[Message]:
    return [chat_message_to_message(chat_message) for chat_message in chat_messages]


def _added(records: Sequence[Record], message: Message) -> list[ChatMessage]:
    """What appending ``records`` (``message``'s) adds to the conversation, as a read
    would decode it."""
    return _from_records(records) or [message_to_chat_message(message)]


def _pop(kept: list[ChatMessage], index: int, removed: ChatMessage) -> None:
    """``kept.pop(index)``, which must be the message the edit removed."""
    if kept[index] != removed:
        raise ValueError("the kept view is not the one the edit was computed on")
    kept.pop(index)


def _estimate(chat_messages: Sequence[ChatMessage]) -> int:
    """About the bytes of the records a view's messages were read from (for the bound)."""
    return sum(256 + len(message.content or "") for message in chat_messages)


class ChatkeepChatStore(BaseChatStore):
    """A LlamaIndex chat store kept in a chatkeep store, a drop-in for ``SimpleChatStore``,
    ``RedisChatStore`` or ``PostgresChatStore``::

        from llama_index.core.memory import ChatMemoryBuffer
        from chatkeep.llama_index import ChatkeepChatStore

        chat_store = ChatkeepChatStore(url="postgresql://app@db/app")
        memory = ChatMemoryBuffer.from_defaults(chat_store=chat_store, chat_store_key="user-42")

    ``url``: a chatkeep store URL, opened for this chat store (closed by :meth:`close`);
    ``store``: an open :class:`~chatkeep.core.Store` to share (left open); neither:
    ``$CHATKEEP_URL``, else the embedded SQLite file.

    A key is a chatkeep session id, and its messages are the session's *view*: adding a
    message appends a record; inserting or deleting at an index, deleting the last
    message and ``set_messages`` are in-place edits (``chatkeep.core.views.edit_*``): one
    control record each, the log keeping everything (``chatkeep sessions show --raw``).
    ``delete_messages`` erases the session where the store can ``delete`` (else empties
    its view). Every ``ChatMessage`` comes back equal to the one added.

    Each conversation read or written is kept decoded (:mod:`chatkeep.llama_index.kept`)
    and trusted only after a read of the log's last few records shows it as this object
    left it, so a turn reads a few records, not the conversation. The messages returned
    are fresh copies (their own blocks and ``additional_kwargs`` dict, see
    :func:`chatkeep.llama_index.kept.fresh`)."""

    _store: Store = PrivateAttr()
    _owns_store: bool = PrivateAttr(default=False)
    _kept: KeptViews = PrivateAttr()

    def __init__(self, *, url: str | None = None, store: Store | None = None) -> None:
        super().__init__()
        self._store, self._owns_store = adapter_store(url, store, owner="ChatkeepChatStore")
        self._kept = KeptViews()

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serializes this store under."""
        return "ChatkeepChatStore"

    @property
    def store(self) -> Store:
        """The chatkeep store holding the conversations."""
        return self._store

    def __repr__(self) -> str:
        return f"ChatkeepChatStore(store={self._store!r})"

    def close(self) -> None:
        """Close the chatkeep store if this chat store opened it (``url=``). Idempotent."""
        if self._owns_store:
            self._owns_store = False
            self._store.close()

    # -- reads (one place, so a cache can be put in front of them) ----------------------------

    def _read(self, key: str) -> list[ChatMessage]:
        span = self._kept.span(key)
        if span:
            kept = self._kept.messages(key, self._store.read(key, -span))
            if kept is not None:
                return kept
        # The fast path: plain message records turned straight into ChatMessages; anything
        # else (edits, undo, forks, tagged values, other blocks, damage) goes through the
        # view, which reports damage with its position.
        records = plain_tail(self._store, key, None)
        chat_messages = _from_records(records)
        if chat_messages is not None:
            self._kept.keep(key, chat_messages, records)
            return chat_messages
        before = self._store.read(key, -1)
        chat_messages = _chat_messages(read_view(self._store, key))
        after = self._store.read(key, -1)
        if [r.id for r in before] == [r.id for r in after]:  # the view is of that log
            anchor = after[0].id if after else None
            self._kept.keep_read(key, chat_messages, anchor, _estimate(chat_messages))
        return chat_messages

    async def _aread(self, key: str) -> list[ChatMessage]:
        if not native(self._store):
            return await in_thread(self._store, ("read",), self._read, key)
        span = self._kept.span(key)
        if span:
            kept = self._kept.messages(key, await self._store.aread(key, -span))
            if kept is not None:
                return kept
        records = await aplain_tail(self._store, key, None)
        chat_messages = _from_records(records)
        if chat_messages is not None:
            self._kept.keep(key, chat_messages, records)
            return chat_messages
        before = await self._store.aread(key, -1)
        chat_messages = _chat_messages(await aread_view(self._store, key))
        after = await self._store.aread(key, -1)
        if [r.id for r in before] == [r.id for r in after]:
            anchor = after[0].id if after else None
            self._kept.keep_read(key, chat_messages, anchor, _estimate(chat_messages))
        return chat_messages

    # -- the sync interface ------------------------------------------------------------------

    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        """Make the conversation exactly ``messages`` (only what differs is written: the
        same list plus new messages appends them)."""
        new = _messages(messages)
        with session_lock(self._store, check_session_id(key)):
            self._kept.forget(key)
            edit_set(self._store, key, new)

    def get_messages(self, key: str) -> list[ChatMessage]:
        """The conversation, oldest first (``[]`` for an unknown key)."""
        return self._read(check_session_id(key))

    def add_message(self, key: str, message: ChatMessage, idx: int | None = None) -> None:
        """Append ``message``, or insert it before position ``idx`` (``list.insert``
        rules, as ``SimpleChatStore``)."""
        converted = chat_message_to_message(message)
        key = check_session_id(key)
        if idx is None:
            records = self._records(converted)
            proven = self._proven(key)
            if proven is not None:  # appended after the kept log, or not at all
                try:
                    self._store.append_if(key, records, after=proven[0])
                except AppendConflict:
                    self._kept.forget(key)
                else:
                    self._appended_after(key, proven, records, converted)
                    return
            self._store.append(key, records)
            self._kept.appended(key, records, _added(records, converted))
            return
        with session_lock(self._store, key):
            known = self._proven(key) or self._known(key, self._tail(key))
            if known is not None and self._insert_known(key, known, idx, converted):
                return
            span = self._kept.span(key)
            edit_insert(self._store, key, idx, converted)
            if span:
                added = message_to_chat_message(converted)
                self._kept.edited(
                    key, self._store.read(key, -span - 1), lambda kept: kept.insert(idx, added)
                )

    def delete_messages(self, key: str) -> list[ChatMessage] | None:
        """Remove the conversation and return its messages (``None`` for an unknown key)."""
        key = check_session_id(key)
        with session_lock(self._store, key):
            self._kept.forget(key)
            if not self._store.read(key, 0, 1):
                return None
            removed = read_view(self._store, key)
            if self._store.supports("delete"):
                delete_session(self._store, key)
            else:
                edit_set(self._store, key, [])
        return _chat_messages(removed)

    def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        """Remove the message at ``idx`` and return it; ``None`` when there is none (an
        unknown key, or ``idx`` past either end)."""
        key = check_session_id(key)
        with session_lock(self._store, key):
            known = self._proven(key) or self._known(key, self._tail(key))
            if known is not None:
                done = self._delete_known(key, known, idx)
                if done is not _LOST:
                    return done
            span = self._kept.span(key)
            try:
                removed = message_to_chat_message(edit_delete(self._store, key, idx))
            except EditOutOfRange:
                return None  # nothing written: what is kept still holds
            if span:
                tail = self._store.read(key, -span - 1)
                self._kept.edited(key, tail, lambda kept: _pop(kept, idx, removed))
            return removed

    def delete_last_message(self, key: str) -> ChatMessage | None:
        """Remove the newest message and return it (``None`` when there is none). Two
        processes doing this at once remove two different messages."""
        return self.delete_message(key, -1)

    def get_keys(self) -> list[str]:
        """Every conversation of the store (needs the ``list_sessions`` capability)."""
        return list(list_conversations(self._store))

    # -- the async interface -----------------------------------------------------------------

    async def aset_messages(self, key: str, messages: list[ChatMessage]) -> None:
        """Async :meth:`set_messages`."""
        new = _messages(messages)
        key = check_session_id(key)
        self._kept.forget(key)
        await self._write(
            lambda: aedit_set(self._store, key, new), self.set_messages, key, messages
        )

    async def aget_messages(self, key: str) -> list[ChatMessage]:
        """Async :meth:`get_messages`."""
        return await self._aread(check_session_id(key))

    async def async_add_message(
        self, key: str, message: ChatMessage, idx: int | None = None
    ) -> None:
        """Async :meth:`add_message`."""
        converted = chat_message_to_message(message)
        key = check_session_id(key)
        if idx is None:
            records = self._records(converted)
            proven = self._proven(key) if native(self._store) else None
            if proven is not None:
                try:
                    await settled(self._store.aappend_if(key, records, after=proven[0]))
                except AppendConflict:
                    self._kept.forget(key)
                else:
                    self._appended_after(key, proven, records, converted)
                    return
            if native(self._store):
                await settled(self._store.aappend(key, records))
            else:
                await settled(in_thread(self._store, ("append",), self._store.append, key, records))
            self._kept.appended(key, records, _added(records, converted))
            return
        if not native(self._store):  # the blocking method keeps what is kept up to date
            await settled(in_thread(self._store, None, self.add_message, key, message, idx))
            return
        known = self._proven(key) or self._known(key, await self._atail(key))
        if known is not None and await settled(self._ainsert_known(key, known, idx, converted)):
            return
        self._kept.forget(key)
        await settled(aedit_insert(self._store, key, idx, converted))

    async def adelete_messages(self, key: str) -> list[ChatMessage] | None:
        """Async :meth:`delete_messages`."""
        key = check_session_id(key)
        self._kept.forget(key)
        if not native(self._store):
            return await settled(in_thread(self._store, None, self.delete_messages, key))
        if not await self._store.aread(key, 0, 1):
            return None
        removed = await aread_view(self._store, key)
        if self._store.supports("delete"):
            await settled(adelete_session(self._store, key))
        else:
            await settled(aedit_set(self._store, key, []))
        return _chat_messages(removed)

    async def adelete_message(self, key: str, idx: int) -> ChatMessage | None:
        """Async :meth:`delete_message`."""
        key = check_session_id(key)
        if not native(self._store):
            return await settled(in_thread(self._store, None, self.delete_message, key, idx))
        known = self._proven(key) or self._known(key, await self._atail(key))
        if known is not None:
            done = await settled(self._adelete_known(key, known, idx))
            if done is not _LOST:
                return done
        span = self._kept.span(key)
        try:
            removed = message_to_chat_message(await settled(aedit_delete(self._store, key, idx)))
        except EditOutOfRange:
            return None
        if span:
            tail = await self._store.aread(key, -span - 1)
            self._kept.edited(key, tail, lambda kept: _pop(kept, idx, removed))
        return removed

    async def adelete_last_message(self, key: str) -> ChatMessage | None:
        """Async :meth:`delete_last_message`."""
        return await self.adelete_message(key, -1)

    async def aget_keys(self) -> list[str]:
        """Async :meth:`get_keys`."""
        if not native(self._store):
            return await in_thread(self._store, ("list_sessions",), self.get_keys)
        return [key async for key in alist_conversations(self._store)]

    # -- edits on the kept conversation ---------------------------------------------------------
    #
    # When this object keeps the conversation and a read of the log's end shows it current,
    # an edit is computed on the kept messages and written as one conditional record after
    # the log's newest record (``edit_splice_known``): nothing of the conversation is read
    # or decoded again. A lost race (another writer got in) writes nothing, and the edit is
    # made the usual way. Only on stores with ``conditional`` (elsewhere the edit reads).

    def _proven(self, key: str) -> _Known | None:
        """The kept conversation with nothing appended since its last check (no read: the
        ``AppendIf`` after its newest record is the check), on a store with
        ``conditional``."""
        if not self._store.supports("conditional"):
            return None
        return self._kept.proven(key)

    def _appended_after(
        self, key: str, proven: _Known, records: list[Record], message: Message
    ) -> None:
        """``records`` (``message``'s) were appended with ``AppendIf`` right after the kept
        log: the kept conversation is the log again, with nothing left to check."""
        newest, view = proven
        done = Spliced(len(view), len(view), records[-1].id, sum(len(r.data) for r in records))
        self._kept.spliced(key, newest, done, _added(records, message))

    def _tail(self, key: str) -> list[Record] | None:
        span = self._kept.span(key)
        if not span or not self._store.supports("conditional"):
            return None
        return self._store.read(key, -span)

    async def _atail(self, key: str) -> list[Record] | None:
        span = self._kept.span(key)
        if not span or not self._store.supports("conditional"):
            return None
        return await self._store.aread(key, -span)

    def _known(self, key: str, tail: list[Record] | None) -> _Known | None:
        return None if tail is None else self._kept.current(key, tail)

    def _insert_known(self, key: str, known: _Known, idx: int, message: Message) -> bool:
        newest, view = known
        done = edit_splice_known(
            self._store, key, idx, idx, [message], newest_record_id=newest, length=len(view)
        )
        return self._spliced(key, newest, done, [message_to_chat_message(message)])

    async def _ainsert_known(self, key: str, known: _Known, idx: int, message: Message) -> bool:
        newest, view = known
        done = await aedit_splice_known(
            self._store, key, idx, idx, [message], newest_record_id=newest, length=len(view)
        )
        return self._spliced(key, newest, done, [message_to_chat_message(message)])

    def _delete_known(self, key: str, known: _Known, idx: int) -> _Deleted:
        newest, view = known
        if not -len(view) <= idx < len(view):
            return None  # nothing written: what is kept still holds
        at = idx % len(view)
        removed = fresh(view[at])
        done = edit_splice_known(
            self._store, key, at, at + 1, newest_record_id=newest, length=len(view)
        )
        return removed if self._spliced(key, newest, done, []) else _LOST

    async def _adelete_known(self, key: str, known: _Known, idx: int) -> _Deleted:
        newest, view = known
        if not -len(view) <= idx < len(view):
            return None
        at = idx % len(view)
        removed = fresh(view[at])
        done = await aedit_splice_known(
            self._store, key, at, at + 1, newest_record_id=newest, length=len(view)
        )
        return removed if self._spliced(key, newest, done, []) else _LOST

    def _spliced(
        self, key: str, newest: str | None, done: Spliced | None, added: list[ChatMessage]
    ) -> bool:
        if done is None:
            self._kept.forget(key)
            return False
        self._kept.spliced(key, newest, done, added)
        return True

    # -- helpers -------------------------------------------------------------------------------

    @staticmethod
    def _records(message: Message) -> list[Record]:
        message.message_id = new_id()
        return encode_records([message], stored_at=utc_stamp())

    async def _write(
        self, awaited: Callable[[], Any], blocking: Callable[..., T], *args: Any
    ) -> None:
        """An edit: awaited on the caller's loop where the store allows it, else the
        blocking method in a worker thread; finished even if the caller is cancelled."""
        if native(self._store):
            await settled(awaited())
        else:
            await settled(in_thread(self._store, None, blocking, *args))
