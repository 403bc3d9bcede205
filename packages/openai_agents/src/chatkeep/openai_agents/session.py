"""``ChatkeepSession``: the Agents SDK ``Session`` protocol on any chatkeep store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from agents.items import TResponseInputItem
from agents.memory import SessionSettings
from agents.memory.session_settings import coerce_session_settings

from chatkeep.core import (
    ChatkeepError,
    Message,
    Record,
    Store,
    TailCache,
    check_session_id,
    delete_session,
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
    stamped_records,
)
from chatkeep.core.codec import MARKER, parse_json
from chatkeep.core.metadata import (
    RunningCount,
    aread_view_counted,
    read_view_counted,
    tail_running_count,
)
from chatkeep.core.views._program import run

from ._log import hide_program, pop_program
from .items import item_of_dict, item_to_message, message_to_items

__all__ = ["ChatkeepSession", "SessionClosed"]


class SessionClosed(ChatkeepError, RuntimeError):
    """The :class:`ChatkeepSession` was closed (a ``RuntimeError``, as the SDK's own
    sessions raise after ``close()``)."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"ChatkeepSession {session_id!r} is closed; make a new one to go on")


_TAGGED = f'"{MARKER}"'.encode()


def _item_of_record(record: Record) -> dict[str, Any] | None:
    """The item a record of this adapter holds, read without building a message; ``None``
    when that takes the codec (tagged values) or the record is not one of ours."""
    if _TAGGED in record.data:
        return None
    try:
        raw = parse_json(record.data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(raw, dict) or raw.get("message_id") not in (None, record.id):
        return None
    return item_of_dict(raw)


def _items_of_records(records: Sequence[Record] | None) -> list[TResponseInputItem] | None:
    """The items of a plain tail (see :func:`_item_of_record`), or ``None`` when there is
    no plain tail or one of its records needs the view."""
    if records is None:
        return None
    items: list[Any] = []
    for record in records:
        item = _item_of_record(record)
        if item is None:
            return None
        items.append(item)
    return cast(list[TResponseInputItem], items)


def _tail_count(records: Sequence[Record], limit: int | None) -> RunningCount | None:
    """The running count a plain tail read for ``limit`` items proves (see
    :func:`chatkeep.core.metadata.tail_running_count`)."""
    return tail_running_count(records, whole=limit is None or len(records) < limit)


def _limit(explicit: int | None, settings: SessionSettings | None) -> int | None:
    """The number of newest items to return; ``None`` for all. As the SDK's
    ``SQLiteSession``: an explicit ``limit`` wins over ``session_settings.limit``; 0 means
    none and a negative limit means all (SQLite's ``LIMIT -1``)."""
    limit = explicit if explicit is not None else (settings.limit if settings else None)
    if limit is None:
        return None
    if type(limit) is not int:
        raise TypeError(f"limit must be an int or None, not {type(limit).__name__}")
    return None if limit < 0 else limit


class ChatkeepSession:
    """An OpenAI Agents SDK session kept in a chatkeep store, a drop-in for
    ``SQLiteSession``, ``RedisSession`` or ``SQLAlchemySession``::

        from agents import Agent, Runner
        from chatkeep.openai_agents import ChatkeepSession

        session = ChatkeepSession("user-42", url="postgresql://app@db/app")
        result = await Runner.run(agent, "Hello", session=session)

    ``url``: a chatkeep store URL, opened for this session (and closed by :meth:`close`);
    ``store``: an open :class:`~chatkeep.core.Store` to share between sessions (left
    open); neither: ``$CHATKEEP_URL``, else the embedded SQLite file. ``session_settings``
    as the SDK's sessions take it (``SessionSettings`` or a dict; its ``limit`` is the
    default for :meth:`get_items`).

    Every item comes back exactly as it was added (ids, string content, reasoning,
    function calls and outputs, item types chatkeep does not model), and is stored as a
    chatkeep message, so ``chatkeep.core.read_view(store, session_id)`` reads the same
    conversation. Record ids are chatkeep's own (an item's ``id`` may repeat). The history
    is the session's *view*: undo, forks and compaction done with ``chatkeep.core`` apply.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        *,
        url: str | None = None,
        store: Store | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        self._store, self._owns_store = adapter_store(url, store, owner="ChatkeepSession")
        self.session_id: str = check_session_id(session_id)
        self.session_settings = (
            SessionSettings()
            if session_settings is None
            else coerce_session_settings(session_settings)
        )
        self._closed = False
        # The running count the last read proved (chatkeep.core.metadata), for the mark the
        # next add_items writes; None when nothing proved it.
        self._count: RunningCount | None = None
        # The plain records the last get_items read (and those add_items appended since),
        # trusted after a tail read shows the log ends with them (chatkeep.core.TailCache):
        # the next get_items reads a few records instead of the history. Records, not
        # items: each read parses them again, so what the SDK does to the items it gets
        # never reaches the cache.
        self._cache: TailCache[Record] = TailCache()

    # -- properties ------------------------------------------------------------------------

    @property
    def store(self) -> Store:
        """The chatkeep store holding this session."""
        return self._store

    def __repr__(self) -> str:
        return f"ChatkeepSession({self.session_id!r}, store={self._store!r})"

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosed(self.session_id)

    # -- the Session protocol --------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The conversation history, oldest first: the newest ``limit`` items (default
        ``session_settings.limit``; ``None``: all), read from the end of the log, so the
        cost follows ``limit``, not the length of the conversation."""
        self._check_open()
        count = _limit(limit, self.session_settings)
        if count == 0:
            return []
        if native(self._store):
            return await self._aread_items(count)
        return await in_thread(self._store, ("read",), self._read_items, count)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` to the history in one atomic store append (``[]``: nothing)."""
        self._check_open()
        if not items:
            return
        count, self._count = self._count, None
        records = self._records(items, count)
        if native(self._store):
            await settled(self._store.aappend(self.session_id, records))
        else:
            await settled(
                in_thread(self._store, ("append",), self._store.append, self.session_id, records)
            )
        self._count = None if count is None else count.extended(records)
        if any(_TAGGED in record.data for record in records):
            self._cache.clear()  # not a plain record: the next read takes the view
        else:
            self._cache.extend(records, records)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the newest item from the history and return it (``None`` if empty).

        The log keeps it (one retract record is appended; chatkeep's audit trail and
        ``store.read`` still show it). On a store with the ``conditional`` capability two
        pops never return the same item, whichever processes they run in.
        """
        self._check_open()
        self._count = None
        self._cache.clear()
        message = await settled(in_thread(self._store, None, self._pop))
        if message is None:
            return None
        items = message_to_items(message)
        return cast(TResponseInputItem, items[-1]) if items else None

    async def clear_session(self) -> None:
        """Remove every item of this session: erased from the store where it can
        ``delete`` (forks of it keep their history), otherwise hidden from the view."""
        self._check_open()
        self._count = None
        self._cache.clear()
        await settled(in_thread(self._store, None, self._clear))

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the session; the store too if the session opened it (``url=``).
        Idempotent. Later calls raise :class:`SessionClosed`."""
        if self._closed:
            return
        self._closed = True
        if self._owns_store:
            self._store.close()

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        if self._closed:
            return
        self._closed = True
        if self._owns_store:
            await self._store.aclose()

    async def __aenter__(self) -> ChatkeepSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __enter__(self) -> ChatkeepSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- chatkeep messages -----------------------------------------------------------------

    async def get_messages(self, limit: int | None = None) -> list[Message]:
        """The same history as chatkeep messages (what ``chatkeep.core.read_view`` reads)."""
        self._check_open()
        if native(self._store):
            messages, self._count = await aread_view_counted(
                self._store, self.session_id, limit=limit
            )
            return messages
        return await in_thread(self._store, ("read",), self._read, limit)

    # -- the work, blocking or awaited --------------------------------------------------------

    def _read(self, count: int | None) -> list[Message]:
        messages, self._count = read_view_counted(self._store, self.session_id, limit=count)
        return messages

    def _read_items(self, count: int | None) -> list[TResponseInputItem]:
        # The fast path: plain message records decoded straight to items (no Message
        # objects), from the cache when the log's tail shows it is still the log's end;
        # anything else (control records, tagged values, messages other chatkeep code
        # wrote, damage) goes through the view, which reports damage.
        records = self._cache.check(self._store, self.session_id, count)
        cached = records is not None
        if records is None:
            records = plain_tail(self._store, self.session_id, count)
        items = self._plain_items(records, count, cached)
        if items is not None:
            return items
        return self._items(self._read(count), count)

    async def _aread_items(self, count: int | None) -> list[TResponseInputItem]:
        # _read_items awaited on the caller's loop (a store with loop-safe async hooks).
        records = await self._cache.acheck(self._store, self.session_id, count)
        cached = records is not None
        if records is None:
            records = await aplain_tail(self._store, self.session_id, count)
        items = self._plain_items(records, count, cached)
        if items is not None:
            return items
        messages, self._count = await aread_view_counted(self._store, self.session_id, limit=count)
        return self._items(messages, count)

    def _plain_items(
        self, records: list[Record] | None, count: int | None, cached: bool
    ) -> list[TResponseInputItem] | None:
        """The items of a plain tail (``cached``, or just read: the cache then holds it),
        or ``None`` (the cache emptied) when the view must be read."""
        items = _items_of_records(records)
        if items is None or records is None:
            self._cache.clear()
            return None
        self._count = _tail_count(records, count)
        if not cached:
            self._cache.fill_records(
                self._store, self.session_id, records, records, key=count, limit=count
            )
        return items

    @staticmethod
    def _items(messages: Sequence[Message], count: int | None) -> list[TResponseInputItem]:
        items: list[Any] = []
        for message in messages:
            items.extend(message_to_items(message))
        if count is not None and len(items) > count:
            del items[:-count]  # a message not made from one item may stand for several
        return cast(list[TResponseInputItem], items)

    def _records(
        self, items: Sequence[TResponseInputItem], count: RunningCount | None = None
    ) -> list[Record]:
        """The batch's records (:func:`~chatkeep.core.adapters.stamped_records`)."""
        messages = [item_to_message(cast(Any, item), message_id=new_id()) for item in items]
        return stamped_records(messages, count, noun="item")

    def _pop(self) -> Message | None:
        with session_lock(self._store, self.session_id):
            return run(self._store, pop_program(self.session_id, conditional=self._conditional))

    def _clear(self) -> None:
        with session_lock(self._store, self.session_id):
            if self._store.supports("delete"):
                delete_session(self._store, self.session_id)
            else:
                run(self._store, hide_program(self.session_id, conditional=self._conditional))

    @property
    def _conditional(self) -> bool:
        return self._store.supports("conditional")
