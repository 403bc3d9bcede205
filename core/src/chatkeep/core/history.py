"""History providers: load a session's messages before a model call, store the new ones
after it (DESIGN section 5).

:class:`HistoryProvider` is a template method. ``invoking`` loads history (the session's
*view*: undo, forks and compaction checkpoints applied, see :mod:`chatkeep.core.views`),
applies the reducer when its trigger is ``BEFORE_RETRIEVAL``, applies the output filter,
tags each loaded message (a copy) as ``CHAT_HISTORY`` and returns history followed by the
request. ``invoked`` stores nothing when the model call raised; otherwise it keeps the
request messages the request filter lets through (by default: not ``CHAT_HISTORY``, not
``CONTEXT_PROVIDER`` unless asked), adds the response messages the response filter lets
through, drops any message already stored, strips tags, and appends the lot in one call
(with a compaction checkpoint when the trigger is ``AFTER_MESSAGE_ADDED`` and the reducer
changed the view). Subclasses override :meth:`load` and :meth:`save` to keep history
somewhere other than a :class:`~chatkeep.core.store.Store`.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from .codec import decode_message, encode_message_adding, message_to_dict
from .errors import CorruptRecord, RecordConflict
from .ids import new_id
from .messages import ATTRIBUTION_KEY, Message, MessageSource
from .plugins import open_store
from .records import Record
from .reducers import Reducer, ReducerTrigger, apply_reducer, drop_orphan_results, max_window
from .session import AgentSession, ProviderSessionState
from .store import Store
from .tail_cache import DEFAULT_CACHE_BYTES, TailCache
from .views import CORRUPT, Checkpoint, build_view, decode_log
from .views._control import (
    CONTROL_PREFIX,
    COUNT_KEY,
    STORED_AT_KEY,
    CountMark,
    _take_stamp,
    utc_stamp,
)
from .views._ops import view_program
from .views._program import arun

__all__ = [
    "HistoryProvider",
    "InMemoryHistoryProvider",
    "MessageFilter",
    "Reducer",
    "already_stored",
    "decode_records",
    "encode_records",
    "read_messages",
]

MessageFilter = Callable[[Sequence[Message]], list[Message]]


def decode_records(
    session_id: str, records: Sequence[Record], first_position: int = 0
) -> list[Message]:
    """Decode stored records into messages, as stored: the raw log, not the view.

    Control records (``chatkeep.*``: retracts, checkpoints, fork links) are skipped, so
    retracted messages are still here (the audit trail); use
    :func:`chatkeep.core.views.read_view` for what a conversation looks like now.
    Raises :class:`CorruptRecord` naming the session and position (``first_position`` is
    the position of ``records[0]``; negative positions count from the end of the log),
    also for a control record of a kind this version does not know.
    """
    messages: list[Message] = []
    for entry in decode_log(records, first_position):
        if entry.kind == CORRUPT:
            assert entry.error is not None
            raise CorruptRecord(session_id, entry.position, entry.error, entry.record_id)
        message = entry.message
        if message is None:  # a control record
            continue
        if message.message_id is None:
            message.message_id = entry.record_id
        elif message.message_id != entry.record_id:
            raise CorruptRecord(
                session_id,
                entry.position,
                f"message id {message.message_id!r} does not match its record",
                entry.record_id,
            )
        messages.append(message)
    return messages


#: How far back from a session's end :func:`already_stored` looks for a batch.
RETRY_LOOKBACK = 256


def _without_stamp(data: bytes) -> Any:
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, dict):
        properties = value.get("additional_properties")
        if isinstance(properties, dict) and (
            STORED_AT_KEY in properties or COUNT_KEY in properties
        ):
            value["additional_properties"] = {
                key: item
                for key, item in properties.items()
                if key not in (STORED_AT_KEY, COUNT_KEY)
            }
    return value


async def already_stored(store: Store, session_id: str, records: Sequence[Record]) -> bool:
    """Whether every message record of ``records`` is already among the last
    ``len(records) + RETRY_LOOKBACK`` records of the session with the same data apart from
    the core's storage time and running count (``"chatkeep.stored_at"``,
    ``"chatkeep.count"``).

    This tells a retried save (same messages, a later time stamp, refused with
    :class:`~chatkeep.core.errors.RecordConflict`) from a real id collision. Control
    records (``chatkeep.*`` types: checkpoints and the like, fresh ids on every save) are
    not looked for: a batch is stored whole or not at all, so its messages decide.
    """
    stored = {
        record.id: record.data
        for record in await store.aread(session_id, -(len(records) + RETRY_LOOKBACK))
    }
    matched = False
    for record in records:
        ours = _without_stamp(record.data)
        kind = ours.get("type") if isinstance(ours, dict) else None
        if isinstance(kind, str) and kind.startswith(CONTROL_PREFIX):
            continue
        theirs = stored.get(record.id)
        if theirs is None or _without_stamp(theirs) != ours:
            return False
        matched = True
    return matched


def encode_records(messages: Iterable[Message], *, stored_at: str | None = None) -> list[Record]:
    """Encode messages as records (each must already have a ``message_id``).

    ``stored_at`` (an ISO 8601 time, see :mod:`chatkeep.core.metadata`) goes into each
    record under the reserved ``additional_properties`` key ``"chatkeep.stored_at"``, unless
    the message already has one there; the messages themselves are not changed, and reading
    the records back takes the key out again.
    """
    return _encode(messages, stored_at, None)


def _encode(
    messages: Iterable[Message], stored_at: str | None, count: dict[str, Any] | None
) -> list[Record]:
    """:func:`encode_records`, with ``count`` (a running count's JSON) in the last
    message's properties under :data:`COUNT_KEY` (before the storage time)."""
    stamp = {} if stored_at is None else {STORED_AT_KEY: stored_at}
    records = []
    listed = list(messages)
    last = len(listed) - 1
    for index, message in enumerate(listed):
        record_id = message.message_id
        if record_id is None:
            raise ValueError("a message needs a message_id before it is stored")
        added: dict[str, Any] = {}
        properties = message.additional_properties
        if count is not None and index == last:
            added[COUNT_KEY] = count
        if stamp and STORED_AT_KEY not in properties:
            added.update(stamp)
        records.append(Record(record_id, encode_message_adding(message, added)))
    return records


def read_messages(
    store: Store, session_id: str, start: int = 0, stop: int | None = None
) -> list[Message]:
    """The stored messages of a session's own log (sliced like ``store.read``), decoded:
    the raw transcript, retracted messages included, fork prefixes not followed."""
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


_HISTORY = MessageSource.CHAT_HISTORY.value


def _with_id(message: Message, message_id: str) -> Message:
    """``dataclasses.replace(message, message_id=...)``, cheaper for Message itself."""
    if type(message) is not Message:
        return replace(message, message_id=message_id)
    return Message(
        message.role,
        message.contents,
        message.author_name,
        message_id,
        message.additional_properties,
        message.extra,
    )


def _tag_in_place(messages: list[Message], source_id: str) -> tuple[list[Message], set[str]]:
    """Tag ``messages`` as loaded history, in place, and collect their ids, in one pass:
    only for messages no one else holds (what :meth:`HistoryProvider.invoking` just
    decoded and does not cache). A decoded message's properties dict is its own (the
    decoder makes one per message, and the view builder never hands one message out
    twice), so the tag goes into it: no copy per message. An empty one (the usual case) is
    replaced by a new dict holding just the tag, made in one step: about a third of the
    cost of growing the empty dict by a key."""
    ids: set[str] = set()
    add = ids.add
    for message in messages:
        properties = message.additional_properties
        if properties:
            properties[ATTRIBUTION_KEY] = {"source_id": source_id, "source_type": _HISTORY}
        else:
            message.additional_properties = {
                ATTRIBUTION_KEY: {"source_id": source_id, "source_type": _HISTORY}
            }
        add(message.message_id)  # type: ignore[arg-type]
    ids.discard(None)  # type: ignore[arg-type, unused-ignore]
    return messages, ids


def _tagged_copies(messages: Sequence[Message], source_id: str) -> list[Message]:
    """``[m.tagged(CHAT_HISTORY, source_id) for m in messages]``, cheaper for Message
    itself (the fields were checked when the originals were made)."""
    attribution = {"source_id": source_id, "source_type": _HISTORY}
    new = object.__new__
    out: list[Message] = []
    for message in messages:
        if type(message) is not Message:
            out.append(message.tagged(MessageSource.CHAT_HISTORY, source_id))
            continue
        if message.additional_properties:
            properties = dict(message.additional_properties)
            properties[ATTRIBUTION_KEY] = dict(attribution)
        else:  # the usual case: one new dict, made in one step
            properties = {ATTRIBUTION_KEY: dict(attribution)}
        copy: Message = new(Message)
        copy.role = message.role
        copy.contents = list(message.contents)
        copy.author_name = message.author_name
        copy.message_id = message.message_id
        copy.additional_properties = properties
        copy.extra = message.extra
        out.append(copy)
    return out


def _local_of(session: AgentSession) -> dict[str, Any]:
    """The session object's process-local cache (a session class whose ``__init__`` did
    not run ``AgentSession``'s gets one now, or, where it cannot, a throwaway dict:
    then nothing is cached)."""
    local: dict[str, Any] | None = getattr(session, "_local", None)
    if local is None:
        local = {}
        with contextlib.suppress(AttributeError):  # no slot, no __dict__: nothing cached
            session._local = local
    return local


def _message_id(message: Message) -> str | None:
    return message.message_id


#: A cold load keeps a view of at most this many messages in a new session object at once
#: (copying it is cheap); a longer one is kept from the session object's second load on,
#: so a session object used once (a resumed conversation) never pays for the copy.
_EAGER_CACHE = 256


class HistoryProvider:
    """Keeps a session's history in a store.

    ``store``: a :class:`Store`, a URL for :func:`open_store`, or ``None`` for
    ``CHATKEEP_URL`` (default: the embedded SQLite file).
    ``max_messages``: load only the last N messages of the view (a backward walk: cost does
    not grow with the log). ``reducer`` (see :mod:`chatkeep.core.reducers`): with
    ``reducer_trigger=BEFORE_RETRIEVAL`` (default) applied to the loaded history before the
    model sees it; with ``AFTER_MESSAGE_ADDED`` applied after each stored turn and saved as
    a compaction checkpoint when it changed the view. A reducer with ``max_window`` limits
    what is read, like ``max_messages``. The stored transcript is never changed.
    The three filters default to MAF's behaviour:
    ``output_filter`` (loaded history, default: all), ``request_filter`` (request messages
    to store, default: not history, not context unless ``store_context_messages``) and
    ``response_filter`` (response messages to store, default: all).

    ``cache_view`` (default ``True``): keep the decoded view (the window, or with
    ``max_messages=None`` the whole history) in the :class:`~chatkeep.core.AgentSession`
    object between turns (in this process; never serialized), in a
    :class:`~chatkeep.core.TailCache` bounded by ``cache_bytes`` (default
    :data:`~chatkeep.core.DEFAULT_CACHE_BYTES`, 8 MiB of stored records per session
    object: a larger view is read again each turn). A warm turn then reads only the log's
    last few records to prove nothing changed (another writer's append, undo, compaction,
    edit or delete all show there) and decodes nothing; the turn's own messages extend
    the cache. Used only on the default path (no reducer, no output filter, :meth:`load`
    and :meth:`save` not overridden). The loaded messages are copies either way, but their
    content objects are shared with the cache: replace a content rather than editing it in
    place, or pass ``cache_view=False``.
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
        reducer: Reducer | Callable[..., Any] | None = None,
        reducer_trigger: ReducerTrigger | str = ReducerTrigger.BEFORE_RETRIEVAL,
        output_filter: MessageFilter | None = None,
        request_filter: MessageFilter | None = None,
        response_filter: MessageFilter | None = None,
        cache_view: bool = True,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        if max_messages is not None and (type(max_messages) is not int or max_messages < 1):
            raise ValueError("max_messages must be a positive int or None")
        if type(cache_bytes) is not int or cache_bytes < 0:
            raise ValueError("cache_bytes must be a non-negative int")
        self._store_arg = store
        self._store: Store | None = store if isinstance(store, Store) else None
        self.source_id = source_id or self.DEFAULT_SOURCE_ID
        self.load_messages = load_messages
        self.store_inputs = store_inputs
        self.store_outputs = store_outputs
        self.store_context_messages = store_context_messages
        self.max_messages = max_messages
        self.reducer = reducer
        self.reducer_trigger = ReducerTrigger(reducer_trigger)
        self.output_filter = output_filter or _keep_all
        self.request_filter = request_filter or _keep_request(store_context_messages)
        self.response_filter = response_filter or _keep_all
        self.cache_view = cache_view
        self.cache_bytes = cache_bytes
        # What was loaded for the run in progress lives in the session, not in this object:
        # which messages (to drop them when storing) and, when the reducer runs after
        # messages are added, the view itself (the reducer's input is that view plus the
        # new turn). Which messages: on the cached path ``{"through": id}``, the view as of
        # the log's record ``id`` (its ids are in the session object's cache, or read
        # again); elsewhere, and in sessions written by older versions, a list of ids.
        self._loaded = ProviderSessionState[list[str] | dict[str, Any]](
            f"{self.source_id}.loaded_ids", lambda _session: []
        )
        self._loaded_view = ProviderSessionState[list[Message]](
            f"{self.source_id}.loaded_view", lambda _session: []
        )
        # The view's message count as the last load proved it, and the id of the log's last
        # record then: what save's running count starts from (see _count_mark).
        self._loaded_count = ProviderSessionState[dict[str, Any]](
            f"{self.source_id}.loaded_count", lambda _session: {}
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

    @property
    def load_limit(self) -> int | None:
        """How many messages :meth:`load` reads at most: ``max_messages`` or the reducer's
        ``max_window``, whichever is smaller (``None``: the whole view)."""
        limits = [n for n in (self.max_messages, max_window(self.reducer)) if n is not None]
        return min(limits) if limits else None

    async def load(self, session: AgentSession) -> list[Message]:
        """Read the session's view (the last :attr:`load_limit` messages if set).

        When the read proves the view's message count (it read the whole view, or the log
        ends with a verified running count), that count and the log's last record id are
        kept in the session for :meth:`save`'s running count."""
        limit = self.load_limit
        read = await arun(self.store, view_program(session.session_id, limit))
        self._prove_count(session, read.count, read.newest_record_id)
        messages = read.messages
        return messages if limit is None else drop_orphan_results(messages)

    def _prove_count(self, session: AgentSession, count: int | None, newest: str | None) -> None:
        if count is None:
            self._loaded_count.clear(session)
        else:
            self._loaded_count.save(session, {"n": count, "after": newest})

    @property
    def _cache_key(self) -> str:
        return f"{self.source_id}.window"

    def _caches(self) -> bool:
        """Whether this provider keeps the session's window (see ``cache_view``)."""
        cls = type(self)
        return (
            self.cache_view
            and cls.load is HistoryProvider.load
            and cls.save is HistoryProvider.save
            and self.reducer is None
            and self.output_filter is _keep_all
        )

    @property
    def _loaded_key(self) -> str:
        return f"{self.source_id}.loaded"

    async def _load_cached(
        self, session: AgentSession
    ) -> tuple[list[Message], set[str], str | None]:
        """:meth:`load` through the session object's :class:`TailCache`: the history to
        hand out (tagged, orphan results of a window dropped), the ids of the view's
        messages, and the id of the log's newest record they are the view as of."""
        limit = self.load_limit
        store = self.store
        session_id = session.session_id
        local = _local_of(session)
        cache = local.get(self._cache_key)
        if isinstance(cache, TailCache):
            messages = await cache.acheck(store, session_id, limit)
            if messages is not None:
                self._prove_count(session, cache.count, cache.tail_id)
                shown = messages if limit is None else drop_orphan_results(messages)
                return _tagged_copies(shown, self.source_id), cache.ids(), cache.tail_id
        read = await arun(store, view_program(session_id, limit))
        self._prove_count(session, read.count, read.newest_record_id)
        messages = read.messages
        shown = messages if limit is None else drop_orphan_results(messages)
        kept = isinstance(cache, TailCache)  # this object was loaded before: kept, not resumed
        if not kept:
            cache = local[self._cache_key] = TailCache(self.cache_bytes, id_of=_message_id)
        assert isinstance(cache, TailCache)
        if (kept or len(messages) <= _EAGER_CACHE) and read.bytes_fed <= self.cache_bytes:
            # The cache keeps the decoded messages; what is handed out are tagged copies.
            tagged = _tagged_copies(shown, self.source_id)
            ids = {m.message_id for m in shown if m.message_id is not None}
            cache.fill_view(
                store, session_id, read, key=limit, limit=limit, ids=ids if limit is None else None
            )
            return tagged, ids, read.newest_record_id
        # The messages were decoded for this call and nothing else holds them: tag them.
        cache.clear()
        tagged, ids = _tag_in_place(shown, self.source_id)
        return tagged, ids, read.newest_record_id

    async def _stored_ids(self, session: AgentSession) -> set[str]:
        """The ids of the session's view as the store has it now (when the ids a load
        saw were not kept in this session object: it was copied or deserialized between
        a turn's load and its save)."""
        read = await arun(self.store, view_program(session.session_id))
        return {m.message_id for m in read.messages if m.message_id is not None}

    def _count_mark(self, session: AgentSession, messages: int, records: int) -> CountMark | None:
        """The running count for a batch of ``records`` records (``messages`` of them
        messages) appended now, from what :meth:`load` proved; taken out of the session, so
        it is used once. ``None`` when the load proved nothing."""
        base = session.state.try_get(self._loaded_count.state_key, dict)
        self._loaded_count.clear(session)
        if not base:
            return None
        n, after = base.get("n"), base.get("after")
        if type(n) is not int or n < 0 or not (after is None or isinstance(after, str)):
            return None
        return CountMark(n + messages, after, records)

    async def save(
        self,
        session: AgentSession,
        messages: list[Message],
        *,
        checkpoint: Checkpoint | None = None,
    ) -> None:
        """Append ``messages`` (and ``checkpoint``, right after them) in one call.

        A subclass that overrides this and ``load`` receives ``checkpoint`` only when its
        reducer trigger is ``AFTER_MESSAGE_ADDED``.

        When the last :meth:`load` of this session proved the view's message count, the
        last message's record also carries the running count under the reserved key
        ``"chatkeep.count"`` (with a checkpoint, the checkpoint record carries it in its
        ``count`` field instead: the batch ends with it);
        :func:`chatkeep.core.metadata.describe_session` reads it. Reading takes the key out
        again.
        """
        batch = len(messages) + (checkpoint is not None)
        mark = self._count_mark(session, len(messages), batch)
        count = mark.to_json() if mark is not None and checkpoint is None else None
        records = _encode(messages, utc_stamp(), count)
        if checkpoint is not None:
            # The view after a checkpoint is its messages and the ``keep`` it keeps, so the
            # batch's count is known whatever the count before it; the chain (``after``)
            # still needs the last load's proof that nothing came in between.
            after = None if mark is None else replace(mark, n=checkpoint.view_length)
            records.append(checkpoint.to_record(after))
        cache = _local_of(session).get(self._cache_key)
        follows = (
            isinstance(cache, TailCache)
            and checkpoint is None
            and cache.holds(self.store, session.session_id, self.load_limit)
        )
        try:
            await self.store.aappend(session.session_id, records)
        except RecordConflict:
            # A retry of a save that did land carries a later storage time, so the store
            # sees the same ids with other bytes. That is still an exact retry: a no-op.
            if isinstance(cache, TailCache):
                cache.clear()
            if not await already_stored(self.store, session.session_id, records):
                raise
            return
        except BaseException:
            if isinstance(cache, TailCache):
                cache.clear()
            raise
        if not isinstance(cache, TailCache):
            return
        if follows:
            # Only what this batch adds to the view; the next load checks that it landed
            # right after the cache's tail.
            added = []
            for record in records:
                message = decode_message(record.data)
                _take_stamp(message)
                added.append(message)
            cache.extend(records, added, count=None if mark is None else mark.n)
        else:
            cache.clear()

    # -- the lifecycle ----------------------------------------------------------------------

    async def invoking(
        self, session: AgentSession, request_messages: Sequence[Message]
    ) -> list[Message]:
        """History (tagged ``CHAT_HISTORY``) followed by ``request_messages``."""
        self._loaded_count.clear(session)
        if not self.load_messages:
            self._loaded.clear(session)
            _local_of(session).pop(self._cache_key, None)  # what is saved now extends no window
            return list(request_messages)
        local = _local_of(session)
        if self._caches():
            tagged, ids, through = await self._load_cached(session)
            # "The view as of record ``through``" in the state, its ids in this object.
            self._loaded.save(session, {"through": through})
            local[self._loaded_key] = (through, ids)
            return tagged + list(request_messages)
        local.pop(self._cache_key, None)
        local.pop(self._loaded_key, None)
        history = await self.load(session)
        if (
            type(self).load is HistoryProvider.load
            and self.reducer is None
            and self.output_filter is _keep_all
        ):
            # The messages were decoded for this call and nothing else holds them: the
            # tagged copies would be the only ones anyone sees, so tag these instead.
            tagged, ids = _tag_in_place(history, self.source_id)
            self._loaded.save(session, list(ids))
            return tagged + list(request_messages)
        self._loaded.save(session, [m.message_id for m in history if m.message_id])
        if self.reducer is not None:
            if self.reducer_trigger is ReducerTrigger.BEFORE_RETRIEVAL:
                history = await apply_reducer(self.reducer, history)
            else:
                self._loaded_view.save(session, list(history))
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
        loaded_state = session.state.try_get(self._loaded.state_key)
        self._loaded.clear(session)
        kept = _local_of(session).pop(self._loaded_key, None)
        # None when nothing was loaded (load_messages=False): then the view is unknown and
        # no checkpoint may be written, or it would hide the history.
        view: list[Message] | None = session.state.try_get(self._loaded_view.state_key, list)
        self._loaded_view.clear(session)
        if error is not None:
            self._loaded_count.clear(session)
            return
        candidates: list[Message] = []
        if self.store_inputs:
            candidates.extend(self.request_filter(request_messages))
        if self.store_outputs:
            candidates.extend(self.response_filter(response_messages))
        to_store: list[Message] = []
        loaded: set[str] | None = None  # the loaded ids, found when a candidate has an id
        seen: set[str] = set()
        for message in candidates:
            message_id = message.message_id
            if message_id is not None:
                if loaded is None:
                    loaded = await self._loaded_ids(session, loaded_state, kept)
                if message_id in loaded or message_id in seen:
                    continue
            message = message.untagged()
            if message.message_id is None:
                message = _with_id(message, new_id())
            assert message.message_id is not None
            seen.add(message.message_id)
            to_store.append(message)
        if not to_store:
            self._loaded_count.clear(session)
            return
        checkpoint = await self._checkpoint(view, to_store)
        if checkpoint is None:
            await self.save(session, to_store)
        else:
            await self.save(session, to_store, checkpoint=checkpoint)

    async def _loaded_ids(self, session: AgentSession, state: Any, kept: Any) -> set[str]:
        """The ids the last load saw: ``state`` is what it left in the session's state
        (a list of ids, or ``{"through": id}``), ``kept`` what it left in the session
        object (``(through, ids)``)."""
        if isinstance(state, list):
            return {item for item in state if isinstance(item, str)}
        if not isinstance(state, dict) or "through" not in state:
            return set()
        if isinstance(kept, tuple) and len(kept) == 2 and kept[0] == state["through"]:
            ids: set[str] = kept[1]
            return ids
        return await self._stored_ids(session)

    async def _checkpoint(
        self, view: list[Message] | None, added: list[Message]
    ) -> Checkpoint | None:
        """The checkpoint for the view after ``added`` (``AFTER_MESSAGE_ADDED`` only)."""
        if (
            view is None
            or self.reducer is None
            or self.reducer_trigger is not ReducerTrigger.AFTER_MESSAGE_ADDED
        ):
            return None
        full = [*view, *added]
        try:
            reduced = await apply_reducer(self.reducer, full)
        except Exception as exc:
            # The model call succeeded: store the turn even if compaction fails now.
            warnings.warn(
                f"{self.reducer!r} failed ({type(exc).__name__}: {exc}); the turn is stored "
                "without a compaction checkpoint",
                RuntimeWarning,
                stacklevel=3,
            )
            return None
        covers = added[-1].message_id
        assert covers is not None
        return Checkpoint.between(full, reduced, covers)

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
        """The view of the messages kept in the session's state (checkpoints applied)."""
        stored: list[dict[str, Any]] = session.state.try_get(self._messages.state_key, list) or []
        limit = self.load_limit
        messages = build_view(session.session_id, stored, limit=limit)
        return messages if limit is None else drop_orphan_results(messages)

    async def save(
        self,
        session: AgentSession,
        messages: list[Message],
        *,
        checkpoint: Checkpoint | None = None,
    ) -> None:
        """Add ``messages`` (and ``checkpoint``) to the session's state."""
        stored = self._messages.get_or_initialize(session)
        stored.extend(message_to_dict(message) for message in messages)
        if checkpoint is not None:
            record = checkpoint.to_record()
            stored.append({**json.loads(record.data), "id": record.id})
        self._messages.save(session, stored)
