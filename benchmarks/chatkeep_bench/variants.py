"""A *variant* is one way of doing the turn on one backend: chatkeep, the raw driver, or a
peer library. The harness only sees the interface defined here.

Levels (what a turn hands back to the caller, so that like is compared with like):

- ``records``: undecoded ``(id, bytes)`` pairs. chatkeep's ``Store.read``/``append`` against
  the driver returning rows/list elements as they come.
- ``messages``: decoded messages. chatkeep's ``HistoryProvider`` (``Message`` objects,
  views applied) against the driver plus ``json.loads`` to dicts, and the peers (their own
  message objects or dicts).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from chatkeep.core import (
    AgentSession,
    HistoryProvider,
    Record,
    Store,
    aread_view,
    encode_records,
    new_id,
    open_store,
    read_view,
)

from .workload import WINDOW, exchange, kind_of, message, record

__all__ = [
    "AsyncVariant",
    "ChatkeepAsyncStore",
    "ChatkeepBackend",
    "ChatkeepFullLoad",
    "ChatkeepFullLoadAsync",
    "ChatkeepHistoryProvider",
    "ChatkeepStore",
    "ChatkeepSyncMessages",
    "Kind",
    "Level",
    "Unavailable",
    "Variant",
    "batches",
]

Level = Literal["records", "messages", "full"]
Kind = Literal["raw", "chatkeep", "peer"]

#: Records written per call while filling a history (fills are not measured).
FILL_BATCH = 500


def batches(count: int, size: int = FILL_BATCH) -> Iterator[range]:
    """``range(count)`` cut into consecutive ranges of at most ``size``."""
    for start in range(0, count, size):
        yield range(start, min(start + size, count))


def role_of(number: int) -> str:
    """The kind of history message ``number`` (:func:`.workload.kind_of`: user and
    assistant messages, every fifth exchange a tool call and its result)."""
    return kind_of(number)


class Variant:
    """A blocking variant. Subclasses set the class attributes and override the methods.

    ``turn`` must be safe to call from many threads at once on distinct sessions (the
    throughput run), after ``concurrent`` has been called.
    """

    name: str = "?"
    level: Level = "records"
    kind: Kind = "raw"
    is_async = False
    #: One line shown under the table: what this row does that others do not.
    note: str = ""
    #: A peer that does not keep its data on this backend (a file, memory): shown for
    #: scale, never "the fastest peer on the same backend" of the targets.
    elsewhere = False

    def open(self) -> None:
        """Connect, create tables; called once before anything else."""

    def fill(self, session_id: str, count: int) -> None:
        """Give ``session_id`` a history of ``count`` messages (not measured)."""
        raise NotImplementedError

    def turn(self, session_id: str, number: int) -> None:
        """Load the last ``WINDOW`` messages of the session and append one exchange."""
        raise NotImplementedError

    def load(self, session_id: str) -> object:
        """Only the load of a turn (the memory measurement); returns what it loaded."""
        raise NotImplementedError

    def concurrent(self, threads: int) -> None:
        """Get ready for ``threads`` concurrent callers (e.g. switch to a pool)."""

    def close(self) -> None:
        """Release connections and files."""


class AsyncVariant:
    """An asyncio variant: the same methods as :class:`Variant`, as coroutines, all run
    on the harness's one event loop."""

    name: str = "?"
    level: Level = "records"
    kind: Kind = "raw"
    is_async = True
    note: str = ""
    elsewhere = False

    async def open(self) -> None:
        """Connect, create tables; called once before anything else."""

    async def fill(self, session_id: str, count: int) -> None:
        """Give ``session_id`` a history of ``count`` messages (not measured)."""
        raise NotImplementedError

    async def turn(self, session_id: str, number: int) -> None:
        """Load the last ``WINDOW`` messages of the session and append one exchange."""
        raise NotImplementedError

    async def load(self, session_id: str) -> object:
        """Only the load of a turn; returns what it loaded."""
        raise NotImplementedError

    def concurrent(self, threads: int) -> None:
        """Get ready for ``threads`` concurrent tasks."""

    async def close(self) -> None:
        """Release connections and files."""


@dataclass
class Unavailable:
    """A row that cannot run here: a peer that is not installed, a server it needs."""

    name: str
    level: Level
    kind: Kind
    reason: str


AnyVariant = Variant | AsyncVariant


# -- chatkeep through open_store ------------------------------------------------------------


def _exchange(number: int) -> list[Record]:
    return [record(kind, number) for kind in exchange(number)]


def _fill_store(store: Store, session_id: str, count: int) -> None:
    for part in batches(count):
        store.append(session_id, [record(role_of(n), n) for n in part])


class ChatkeepStore(Variant):
    """``open_store(url)`` on the blocking path: ``read(-50)`` + ``append(2 records)``."""

    level: Level = "records"
    kind: Kind = "chatkeep"

    def __init__(self, url: str, options: dict[str, Any] | None = None) -> None:
        self.name = "chatkeep Store"
        self._url = url
        self._options = options or {}
        self._store: Store | None = None

    @property
    def store(self) -> Store:
        """The open store."""
        assert self._store is not None, "open() first"
        return self._store

    def open(self) -> None:
        self._store = open_store(self._url, **self._options)

    def fill(self, session_id: str, count: int) -> None:
        _fill_store(self.store, session_id, count)

    def turn(self, session_id: str, number: int) -> None:
        self.store.read(session_id, -WINDOW)
        self.store.append(session_id, _exchange(number))

    def load(self, session_id: str) -> object:
        return self.store.read(session_id, -WINDOW)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


class ChatkeepBackend(ChatkeepStore):
    """The backend object alone (``open_store(url).backend``), without the core's
    ``Store`` around it (id and batch validation, sync/async adaptation): with the
    ``chatkeep Store`` row, this splits chatkeep's cost between core and backend."""

    note = "diagnostic: the plugin's backend object called directly, no core Store"

    def __init__(self, url: str, options: dict[str, Any] | None = None) -> None:
        super().__init__(url, options)
        self.name = "chatkeep backend alone"

    def turn(self, session_id: str, number: int) -> None:
        backend: Any = self.store.backend
        backend.read(session_id, -WINDOW, None)
        backend.append(session_id, _exchange(number))

    def load(self, session_id: str) -> object:
        backend: Any = self.store.backend
        return backend.read(session_id, -WINDOW, None)


class ChatkeepSyncMessages(ChatkeepStore):
    """The blocking messages path: ``read_view(limit=50)`` decodes ``Message`` objects
    (undo, forks and checkpoints applied), then ``append(encode_records(exchange))``."""

    level: Level = "messages"

    def __init__(self, url: str, options: dict[str, Any] | None = None) -> None:
        super().__init__(url, options)
        self.name = "chatkeep read_view + append"

    def turn(self, session_id: str, number: int) -> None:
        read_view(self.store, session_id, limit=WINDOW)
        messages = [message(kind, number, new_id()) for kind in exchange(number)]
        self.store.append(session_id, encode_records(messages))

    def load(self, session_id: str) -> object:
        return read_view(self.store, session_id, limit=WINDOW)


class ChatkeepFullLoad(ChatkeepStore):
    """The ``full`` level: a whole-session load, ``read_view(store, sid)`` (every message
    of the view, decoded), and nothing else: a *turn* of this level appends nothing."""

    level: Level = "full"

    def __init__(self, url: str, options: dict[str, Any] | None = None) -> None:
        super().__init__(url, options)
        self.name = "chatkeep read_view (whole session)"

    def turn(self, session_id: str, number: int) -> None:
        read_view(self.store, session_id)

    def load(self, session_id: str) -> object:
        return read_view(self.store, session_id)


class ChatkeepAsyncStore(AsyncVariant):
    """``open_store(url)`` on the asyncio path: ``aread(-50)`` + ``aappend``."""

    level: Level = "records"
    kind: Kind = "chatkeep"

    def __init__(self, url: str, options: dict[str, Any] | None = None) -> None:
        self.name = "chatkeep Store async"
        self._url = url
        self._options = options or {}
        self._store: Store | None = None

    @property
    def store(self) -> Store:
        """The open store."""
        assert self._store is not None, "open() first"
        return self._store

    async def open(self) -> None:
        self._store = open_store(self._url, **self._options)

    async def fill(self, session_id: str, count: int) -> None:
        for part in batches(count):
            await self.store.aappend(session_id, [record(role_of(n), n) for n in part])

    async def turn(self, session_id: str, number: int) -> None:
        await self.store.aread(session_id, -WINDOW)
        await self.store.aappend(session_id, _exchange(number))

    async def load(self, session_id: str) -> object:
        return await self.store.aread(session_id, -WINDOW)

    async def close(self) -> None:
        if self._store is not None:
            await self._store.aclose()


class ChatkeepHistoryProvider(ChatkeepAsyncStore):
    """What an agent does around a model call: ``HistoryProvider(max_messages=50)``'s
    ``invoking`` (load and decode the view, tag copies) and ``invoked`` (drop what was
    loaded, assign ids, encode, append once).

    By default the session object is kept across turns, as an agent keeps it, and each
    pool session is loaded once before the measured turns (:meth:`prepare`): so every
    measured turn is a kept session's, whose window the provider caches in the session
    and checks with a tail read. ``resumed=True`` gives each turn a new ``AgentSession``
    (a conversation resumed by id after a restart: the window is read and decoded)."""

    level: Level = "messages"

    def __init__(
        self, url: str, options: dict[str, Any] | None = None, *, resumed: bool = False
    ) -> None:
        super().__init__(url, options)
        self.name = "chatkeep HistoryProvider"
        self._resumed = resumed
        if resumed:
            self.name += " (resumed session)"
            self.note = "a new AgentSession each turn: no cached window (a cold load)"
        self._provider: HistoryProvider | None = None
        self._sessions: dict[str, AgentSession] = {}

    async def open(self) -> None:
        await super().open()
        self._provider = HistoryProvider(self.store, max_messages=WINDOW)

    def _session(self, session_id: str) -> AgentSession:
        if self._resumed:
            return AgentSession(session_id)
        # An agent keeps its session object across turns; so do we.
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = AgentSession(session_id)
        return session

    async def prepare(self, session_id: str) -> None:
        """Load the filled session once, unmeasured (an agent's session has been used
        before its next turn); nothing for a resumed session."""
        if not self._resumed:
            assert self._provider is not None
            await self._provider.invoking(self._session(session_id), [])

    async def turn(self, session_id: str, number: int) -> None:
        assert self._provider is not None
        session = self._session(session_id)
        asked, answered = exchange(number)
        request = [message(asked, number)]
        await self._provider.invoking(session, request)
        await self._provider.invoked(session, request, [message(answered, number)])

    async def load(self, session_id: str) -> object:
        assert self._provider is not None
        return await self._provider.invoking(self._session(session_id), [])


def pool_sessions(length: int, budget: int, turns: int) -> tuple[int, int]:
    """How many sessions a variant's pool for ``length`` has, and how many turns each
    takes: enough sessions that a history grows by a few percent at most during the run,
    no more records than ``budget``."""
    sessions = max(1, min(turns, budget // max(length, 1)))
    return sessions, math.ceil(turns / sessions)


class ChatkeepFullLoadAsync(ChatkeepAsyncStore):
    """:class:`ChatkeepFullLoad` under ``await``: ``aread_view(store, sid)``."""

    level: Level = "full"

    def __init__(self, url: str, options: dict[str, Any] | None = None) -> None:
        super().__init__(url, options)
        self.name = "chatkeep aread_view (whole session)"

    async def turn(self, session_id: str, number: int) -> None:
        await aread_view(self.store, session_id)

    async def load(self, session_id: str) -> object:
        return await aread_view(self.store, session_id)
