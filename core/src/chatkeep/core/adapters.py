"""What every framework adapter needs from the core, in one place.

A framework adapter (``chatkeep.openai_agents``, ``chatkeep.langchain``, ...) is a class the
framework calls with its own types; underneath it talks to a chatkeep :class:`Store`. The
parts that do not depend on the framework live here, so each adapter is only its
conversion and its framework's interface:

- :func:`adapter_store`: the ``url=`` / ``store=`` convention every adapter's constructor
  follows (a URL is opened and owned; a store is shared and left open; neither opens
  ``$CHATKEEP_URL``, else the embedded SQLite default).
- :func:`in_thread`, :func:`native`, :func:`settled`: how an adapter's coroutines reach the
  store without tying any event loop to it.
- :func:`session_lock`: a per-session lock for read-then-write operations within a process;
  :func:`async_session_lock` the same for coroutines (held across awaits).
- :func:`id_component`, :func:`id_from_component`: a framework's own ids (app, user,
  thread, conversation) as parts of chatkeep session ids that never meet.
- :func:`plain_tail` / :func:`aplain_tail`: the newest records of a log when they are plain
  message records, so an adapter can decode them straight to its framework's messages.
- :func:`plain_message`: a message in the dict form a record holds, values untagged, for
  the converters that read their framework's object back from a decoded record.
- :func:`stamped_records`: a batch of converted messages as records, stamped with their
  storage time and the running count, as ``HistoryProvider`` writes them.
- :func:`aread_view_kept`: a view read through a :class:`~chatkeep.core.TailCache` of
  messages (a tail check, else the read, kept); :func:`appended_messages`: what message
  records an adapter just appended add to that view, decoded as a read decodes them.

Nothing here imports a framework, a driver or an SDK.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar
from urllib.parse import quote, unquote

from .codec import decode_message
from .errors import EncodeError, InvalidOption
from .history import encode_records
from .messages import (
    Content,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    TextContent,
    UnknownContent,
    UriContent,
)
from .metadata import RunningCount
from .plugins import open_store
from .records import Record
from .store import Store
from .tail_cache import TailCache
from .views._control import _take_stamp, utc_stamp
from .views._ops import view_program
from .views._program import arun

__all__ = [
    "adapter_store",
    "aplain_tail",
    "appended_messages",
    "aread_view_kept",
    "async_session_lock",
    "id_component",
    "id_from_component",
    "in_thread",
    "native",
    "plain_message",
    "plain_tail",
    "session_lock",
    "settled",
    "stamped_records",
]

T = TypeVar("T")


def adapter_store(url: str | None, store: Store | None, *, owner: str) -> tuple[Store, bool]:
    """The store an adapter named ``owner`` works on, and whether the adapter owns it.

    ``url``: a chatkeep store URL, opened here; the adapter owns the handle and closes it
    when it is closed. ``store``: an open :class:`Store` to share between adapters (left
    open). Neither: ``open_store()`` (``$CHATKEEP_URL``, else the embedded SQLite file).
    Giving both, a store that is not a chatkeep :class:`Store`, or a URL that is not a
    string raises :class:`~chatkeep.core.errors.InvalidOption` (a ``TypeError`` and a
    ``ValueError``), naming ``owner``.
    """
    if url is not None and store is not None:
        raise InvalidOption(f"{owner} takes url= or store=, not both")
    if store is not None:
        if not isinstance(store, Store):
            raise InvalidOption(
                f"{owner}: store= must be a chatkeep Store (open_store(url)), "
                f"not {type(store).__name__}"
            )
        return store, False
    if url is not None and not isinstance(url, str):
        raise InvalidOption(f"{owner}: url= must be a str, not {type(url).__name__}")
    return open_store(url), True


# Striped locks serializing read-then-write operations (pop, clear, edit) on one session
# within this process, whichever adapter object they come from; bounded however many
# sessions there are.
_LOCKS = tuple(threading.Lock() for _ in range(64))


def session_lock(store: Store, session_id: str) -> threading.Lock:
    """The lock for ``session_id`` on ``store`` (shared with a few unrelated sessions)."""
    return _LOCKS[hash((id(store), session_id)) % len(_LOCKS)]


# asyncio locks per (event loop, store, session), made on first use and dropped once no
# task holds or waits for them, so none outlives its loop and the table stays small.
_ASYNC_LOCKS: dict[tuple[int, int, str], list[Any]] = {}
_ASYNC_LOCKS_GUARD = threading.Lock()


@asynccontextmanager
async def async_session_lock(store: Store, session_id: str) -> AsyncIterator[None]:
    """Hold the lock of ``session_id`` on ``store`` for the running event loop: coroutines
    doing read-then-write work on one session (appends that check what they last read)
    take turns instead of failing each other's checks. Tasks on other loops (other
    threads) are not serialized by it; a conditional append still keeps them correct.

    ::

        async with async_session_lock(store, "s1"):
            ...  # read, then append_if
    """
    key = (id(asyncio.get_running_loop()), id(store), session_id)
    with _ASYNC_LOCKS_GUARD:
        entry = _ASYNC_LOCKS.get(key)
        if entry is None:
            entry = _ASYNC_LOCKS[key] = [asyncio.Lock(), 0]
        entry[1] += 1
    try:
        async with entry[0]:
            yield
    finally:
        with _ASYNC_LOCKS_GUARD:
            entry[1] -= 1
            if entry[1] == 0:
                del _ASYNC_LOCKS[key]


#: The longest :func:`id_component` kept readable; longer ids are hashed.
MAX_COMPONENT = 120


def id_component(value: str) -> str:
    """``value`` (an id the framework hands in) as one part of a chatkeep session id.

    Percent-encoded with nothing left but ``A-Z a-z 0-9 _ . - ~``, so the part holds no
    ``/`` or ``:`` (the separators an adapter puts between parts) and two distinct ids
    never give the same part; when that is longer than :data:`MAX_COMPONENT` characters,
    ``!`` and the SHA-256 digest of ``value`` instead (65 characters; ``!`` never appears
    in an encoded id), so any number of parts fits a session id. A hashed part cannot be
    read back (:func:`id_from_component` says ``None``): keep such an id in the session's
    data too.
    """
    encoded = quote(value, safe="", errors="surrogatepass")
    if len(encoded) <= MAX_COMPONENT:
        return encoded
    return "!" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def id_from_component(component: str) -> str | None:
    """The id :func:`id_component` made ``component`` from; ``None`` for a hashed one."""
    if component.startswith("!"):
        return None
    return unquote(component, errors="surrogatepass")


def native(store: Store) -> bool:
    """Whether reads and appends may await ``store``'s async hooks on the caller's loop:
    the backend declared them safe on any loop (``Store.loop_safe_async``: Redis, one
    client per loop, closed with it) and does not run those hooks inline anyway."""
    return store.loop_safe_async and not store.inline_hooks


async def settled(operation: Awaitable[T]) -> T:
    """Await ``operation`` to the end even if the caller is cancelled meanwhile, then
    raise the cancellation (or return the result).

    For writes: a caller cancelled while a write is in flight still learns nothing half
    done, and never has to guess whether the write happened.
    """
    task = asyncio.ensure_future(operation)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved: the caller learns of the cancellation instead
        raise cancelled
    return task.result()


async def in_thread(
    store: Store, hooks: tuple[str, ...] | None, function: Callable[..., T], *args: Any
) -> T:
    """``function(*args)`` in a worker thread (the default executor), or right here when
    the only store hooks it calls (``hooks``; ``None``: unknown or others too) are ones
    ``store`` runs inline on an event loop anyway (``Store.inline_hooks``: SQLite, memory),
    since the thread hop would cost more than the call."""
    if hooks is not None and store.inline_hooks.issuperset(hooks):
        return function(*args)
    return await asyncio.to_thread(function, *args)


# How the codec's message records begin; an unlimited plain read first looks this far back.
_MESSAGE_HEAD = b'{"type":"message"'
_FULL_CHUNK = 2048


def _plain(records: list[Record]) -> bool:
    return all(record.data.startswith(_MESSAGE_HEAD) for record in records)


def plain_tail(store: Store, session_id: str, limit: int | None) -> list[Record] | None:
    """The records of the view's newest ``limit`` messages (all with ``None``), when they
    are plain message records that no control record follows; otherwise ``None`` (then
    the view must be walked: retracts, checkpoints, edits or forks are about).

    A retract, a checkpoint or an in-place edit only ever changes what is *before* it, so a
    tail of message records is the tail of the view. One read for a window or a log of up
    to 2,048 records, two for a longer log (the cost of a full load anyway). The records
    are not decoded: an adapter turns them into its framework's messages directly, and
    goes through the view when this returns ``None``.
    """
    size = limit if limit is not None else _FULL_CHUNK
    tail = store.read(session_id, -size)
    if not _plain(tail):
        return None
    if limit is not None or len(tail) < size:
        return tail
    whole = store.read(session_id)
    return whole if _plain(whole) else None


async def aplain_tail(store: Store, session_id: str, limit: int | None) -> list[Record] | None:
    """:func:`plain_tail` through the store's awaited ``aread``."""
    size = limit if limit is not None else _FULL_CHUNK
    tail = await store.aread(session_id, -size)
    if not _plain(tail):
        return None
    if limit is not None or len(tail) < size:
        return tail
    whole = await store.aread(session_id)
    return whole if _plain(whole) else None


def _plain_content(content: Content) -> dict[str, Any]:
    if isinstance(content, UnknownContent):
        return content.raw
    out: dict[str, Any]
    if isinstance(content, TextContent):
        out = {"type": "text", "text": content.text}
    elif isinstance(content, FunctionCallContent):
        out = {"type": "function_call", "call_id": content.call_id, "name": content.name}
        out["arguments"] = content.arguments
    elif isinstance(content, FunctionResultContent):
        out = {"type": "function_result", "call_id": content.call_id, "result": content.result}
    elif isinstance(content, DataContent):
        encoded = base64.b64encode(content.data).decode("ascii")
        out = {"type": "data", "uri": f"data:{content.media_type};base64,{encoded}"}
        out["media_type"] = content.media_type
    elif isinstance(content, UriContent):
        out = {"type": "uri", "uri": content.uri, "media_type": content.media_type}
    else:
        out = {"type": "text_reasoning", "text": content.text}
        out["protected_data"] = content.protected_data
    out["additional_properties"] = content.additional_properties
    return out


def plain_message(message: Message) -> dict[str, Any]:
    """``message`` in the codec's dict form (what its record holds once decoded), its values
    left as they are (not tagged): what a converter that reads a framework's object back
    from a decoded record (``additional_properties`` and contents) can also be handed for a
    message in memory, without encoding it."""
    return {
        "type": "message",
        "role": message.role,
        "contents": [_plain_content(content) for content in message.contents],
        "author_name": message.author_name,
        "additional_properties": message.additional_properties,
    }


def stamped_records(
    messages: list[Message], count: RunningCount | None = None, *, noun: str = "message"
) -> list[Record]:
    """``messages`` (one framework batch, already converted) as records, each stamped with
    the time it is stored (the reserved ``chatkeep.stored_at`` key, taken out again on
    reading, so what is read back equals what was added and ``chatkeep sessions list`` shows
    when it was); with ``count`` (what the adapter's last read proved), the last one carries
    the running count under ``chatkeep.count``, as ``HistoryProvider`` writes it.

    A message that cannot be encoded raises :class:`EncodeError` naming its position in the
    batch (as the framework's ``noun``: ``"item 2 of the batch"``); nothing is stored then.
    """
    stamp = utc_stamp()
    if count is not None:
        messages = count.mark(messages)
    records = []
    for position, message in enumerate(messages):
        try:
            (record,) = encode_records([message], stored_at=stamp)
        except EncodeError as exc:
            raise EncodeError(
                f"{noun} {position} of the batch cannot be stored: {exc}; nothing was added"
            ) from exc
        records.append(record)
    return records


def appended_messages(records: Sequence[Record]) -> list[Message]:
    """The messages that ``records`` (message records this process just appended, every one
    encoded from a message) add to the view, decoded as a read of the view decodes them:
    the record id as the message id, the storage time and running count taken out. What
    a :class:`~chatkeep.core.TailCache` of messages takes in with ``extend``."""
    out = []
    for record in records:
        message = decode_message(record.data)
        if message.message_id is None:
            message.message_id = record.id
        _take_stamp(message)
        out.append(message)
    return out


async def aread_view_kept(
    store: Store, session_id: str, cache: TailCache[Message], *, limit: int | None = None
) -> tuple[list[Message], RunningCount | None]:
    """The view of ``session_id`` (its newest ``limit`` messages) and the running count the
    read proves, as :func:`~chatkeep.core.metadata.aread_view_counted` gives them, through
    ``cache`` (one per conversation, held across turns): its messages when one read of the
    log's last records shows nothing changed since they were kept, else the view read
    again and kept (when within the cache's bound). The list is the cache's own: convert
    it, never change it. The adapter's own appends follow with
    ``cache.extend(records, appended_messages(records), count=...)``."""
    view = await cache.acheck(store, session_id, limit)
    if view is not None:
        count = None if cache.count is None else RunningCount(cache.count, cache.tail_id)
        return view, count
    read = await arun(store, view_program(session_id, limit))
    cache.fill_view(store, session_id, read, key=limit, limit=limit)
    counted = None if read.count is None else RunningCount(read.count, read.newest_record_id)
    return read.messages, counted
