"""History providers: load a session's messages before a model call, store the new ones
after it (DESIGN section 5).

:class:`HistoryProvider` is a template method. ``invoking`` loads history, applies the
reducer, applies the output filter, tags each loaded message (a copy) as ``CHAT_HISTORY``
and returns history followed by the request. ``invoked`` stores nothing when the model
call raised; otherwise it keeps the request messages the request filter lets through
(by default: not ``CHAT_HISTORY``, not ``CONTEXT_PROVIDER`` unless asked), adds the
response messages the response filter lets through, drops any message already stored,
strips tags, and appends the lot in one call. Subclasses override :meth:`load` and
:meth:`save` to keep history somewhere other than a :class:`~chatkeep.core.store.Store`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from .codec import decode_message, encode_message, message_from_dict, message_to_dict
from .errors import CorruptRecord
from .ids import new_id
from .messages import Message, MessageSource
from .plugins import open_store
from .records import Record
from .session import AgentSession, ProviderSessionState
from .store import Store

__all__ = [
    "HistoryProvider",
    "InMemoryHistoryProvider",
    "MessageFilter",
    "Reducer",
    "decode_records",
    "encode_records",
    "read_messages",
]

MessageFilter = Callable[[Sequence[Message]], list[Message]]
#: A reducer turns a history into a shorter one (sync or async).
Reducer = Callable[[list[Message]], list[Message] | Awaitable[list[Message]]]


def decode_records(
    session_id: str, records: Sequence[Record], first_position: int = 0
) -> list[Message]:
    """Decode stored records into messages.

    Raises :class:`CorruptRecord` naming the session and position (``first_position`` is
    the position of ``records[0]``; negative positions count from the end of the log).
    """
    messages: list[Message] = []
    for offset, record in enumerate(records):
        try:
            message = decode_message(record.data)
        except ValueError as exc:
            raise CorruptRecord(session_id, first_position + offset, str(exc), record.id) from exc
        if message.message_id is None:
            message.message_id = record.id
        elif message.message_id != record.id:
            raise CorruptRecord(
                session_id,
                first_position + offset,
                f"message id {message.message_id!r} does not match its record",
                record.id,
            )
        messages.append(message)
    return messages


def encode_records(messages: Iterable[Message]) -> list[Record]:
    """Encode messages as records (each must already have a ``message_id``)."""
    records = []
    for message in messages:
        if message.message_id is None:
            raise ValueError("a message needs a message_id before it is stored")
        records.append(Record(message.message_id, encode_message(message)))
    return records


def read_messages(
    store: Store, session_id: str, start: int = 0, stop: int | None = None
) -> list[Message]:
    """The messages of a session (sliced like ``store.read``), decoded."""
    return decode_records(session_id, store.read(session_id, start, stop), start)


def _keep_request(store_context_messages: bool) -> MessageFilter:
    def keep(messages: Sequence[Message]) -> list[Message]:
        kept = []
        for message in messages:
            source = message.source
            if source is MessageSource.CHAT_HISTORY:
                continue
            if source is MessageSource.CONTEXT_PROVIDER and not store_context_messages:
                continue
            kept.append(message)
        return kept

    return keep


def _keep_all(messages: Sequence[Message]) -> list[Message]:
    return list(messages)


class HistoryProvider:
    """Keeps a session's history in a store.

    ``store``: a :class:`Store`, a URL for :func:`open_store`, or ``None`` for
    ``CHATKEEP_URL`` (default: the embedded SQLite file).
    ``max_messages``: load only the last N messages (a tail read: cost does not grow with
    the log). ``reducer``: applied to the loaded history before the model sees it (the
    stored transcript is never changed). The three filters default to MAF's behaviour:
    ``output_filter`` (loaded history, default: all), ``request_filter`` (request messages
    to store, default: not history, not context unless ``store_context_messages``) and
    ``response_filter`` (response messages to store, default: all).
    """

    DEFAULT_SOURCE_ID = "chat_history"

    def __init__(
        self,
        store: Store | str | None = None,
        *,
        source_id: str | None = None,
        load_messages: bool = True,
        store_inputs: bool = True,
        store_outputs: bool = True,
        store_context_messages: bool = False,
        max_messages: int | None = None,
        reducer: Reducer | None = None,
        output_filter: MessageFilter | None = None,
        request_filter: MessageFilter | None = None,
        response_filter: MessageFilter | None = None,
    ) -> None:
        if max_messages is not None and (type(max_messages) is not int or max_messages < 1):
            raise ValueError("max_messages must be a positive int or None")
        self._store_arg = store
        self._store: Store | None = store if isinstance(store, Store) else None
        self.source_id = source_id or self.DEFAULT_SOURCE_ID
        self.load_messages = load_messages
        self.store_inputs = store_inputs
        self.store_outputs = store_outputs
        self.store_context_messages = store_context_messages
        self.max_messages = max_messages
        self.reducer = reducer
        self.output_filter = output_filter or _keep_all
        self.request_filter = request_filter or _keep_request(store_context_messages)
        self.response_filter = response_filter or _keep_all
        # The ids loaded for the run in progress live in the session, not in this object.
        self._loaded = ProviderSessionState[list[str]](
            f"{self.source_id}.loaded_ids", lambda _session: []
        )

    @property
    def store(self) -> Store:
        """The store (opened on first use when given as a URL)."""
        if self._store is None:
            url = self._store_arg if isinstance(self._store_arg, str) else None
            self._store = open_store(url)
        return self._store

    def __repr__(self) -> str:
        return f"{type(self).__name__}(source_id={self.source_id!r})"

    # -- storage steps (override to keep history elsewhere) --------------------------------

    async def load(self, session: AgentSession) -> list[Message]:
        """Read the session's history (the last ``max_messages`` if set)."""
        start = -self.max_messages if self.max_messages else 0
        records = await self.store.aread(session.session_id, start)
        return decode_records(session.session_id, records, start)

    async def save(self, session: AgentSession, messages: list[Message]) -> None:
        """Append ``messages`` to the session's log in one call."""
        await self.store.aappend(session.session_id, encode_records(messages))

    # -- the lifecycle ----------------------------------------------------------------------

    async def invoking(
        self, session: AgentSession, request_messages: Sequence[Message]
    ) -> list[Message]:
        """History (tagged ``CHAT_HISTORY``) followed by ``request_messages``."""
        if not self.load_messages:
            self._loaded.clear(session)
            return list(request_messages)
        history = await self.load(session)
        self._loaded.save(session, [m.message_id for m in history if m.message_id])
        if self.reducer is not None:
            reduced = self.reducer(history)
            history = await reduced if inspect.isawaitable(reduced) else reduced
        history = self.output_filter(history)
        tagged = [m.tagged(MessageSource.CHAT_HISTORY, self.source_id) for m in history]
        return tagged + list(request_messages)

    async def invoked(
        self,
        session: AgentSession,
        request_messages: Sequence[Message],
        response_messages: Sequence[Message] = (),
        *,
        error: BaseException | None = None,
    ) -> None:
        """Store the turn's new messages, unless the model call raised (``error``)."""
        loaded = set(self._loaded.get_or_initialize(session))
        self._loaded.clear(session)
        if error is not None:
            return
        candidates: list[Message] = []
        if self.store_inputs:
            candidates.extend(self.request_filter(request_messages))
        if self.store_outputs:
            candidates.extend(self.response_filter(response_messages))
        to_store: list[Message] = []
        seen = loaded
        for message in candidates:
            if message.message_id is not None and message.message_id in seen:
                continue
            message = message.untagged()
            if message.message_id is None:
                message = replace(message, message_id=new_id())
            assert message.message_id is not None
            seen.add(message.message_id)
            to_store.append(message)
        if to_store:
            await self.save(session, to_store)

    async def messages(self, session: AgentSession | str) -> list[Message]:
        """Every stored message of a session, untagged (for display and export)."""
        if isinstance(session, str):
            session = AgentSession(session)
        return await self.load(session)


class InMemoryHistoryProvider(HistoryProvider):
    """Keeps history in the session's state bag, so it travels with the serialized session.

    The agent creates one on the first run that shows the model service keeps no history
    and no provider was configured.
    """

    DEFAULT_SOURCE_ID = "in_memory"

    def __init__(self, *, source_id: str | None = None, **options: Any) -> None:
        super().__init__(store=None, source_id=source_id, **options)
        self._messages = ProviderSessionState[list[dict[str, Any]]](
            f"{self.source_id}.messages", lambda _session: []
        )

    async def load(self, session: AgentSession) -> list[Message]:
        stored = session.state.try_get(self._messages.state_key, list) or []
        if self.max_messages:
            stored = stored[-self.max_messages :]
        return [message_from_dict(raw) for raw in stored]

    async def save(self, session: AgentSession, messages: list[Message]) -> None:
        stored = self._messages.get_or_initialize(session)
        stored.extend(message_to_dict(message) for message in messages)
        self._messages.save(session, stored)
