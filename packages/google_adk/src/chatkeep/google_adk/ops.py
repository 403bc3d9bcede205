"""The session service's store work, written once as sans-IO programs (see
:mod:`chatkeep.core.programs`): each yields the reads and appends it needs, and the
service drives it blocking in a worker thread or awaited on the caller's loop.

No program here touches ADK objects: they take and return JSON data and :class:`Tail`\\ s,
so the rules (what a stale session is, how shared state is merged, how events are
ordered) are plain code the tests drive against every backend.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from chatkeep.core import AppendConflict, Record, RecordConflict
from chatkeep.core.errors import CorruptRecord
from chatkeep.core.views._program import Append, AppendIf, Program, Read

from .errors import SessionAlreadyExists, SharedStateBusy, StaleSession, UnknownSession
from .layout import SessionKeys
from .records import Entry, Tail, event_record, header_record, parse_record, state_of
from .records import state_record as _state_record

__all__ = [
    "Listed",
    "Loaded",
    "SessionView",
    "StateCache",
    "append_program",
    "create_program",
    "list_program",
    "load_program",
    "read_state",
    "shared_state_program",
    "summary_program",
]

#: How often a shared-state update re-reads and retries after another writer got in first.
RETRIES = 100
#: The first backward read of a session log for ``after_timestamp`` (then twice as many).
CHUNK = 64

_STALE = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)


class StateCache:
    """The session-scoped states this service last read or wrote, by (log, record id), so
    an append that changes state does not read the state it changes (bounded; any thread)."""

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._items: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, record_id: str) -> dict[str, Any] | None:
        with self._lock:
            return self._items.get((key, record_id))

    def put(self, key: str, record_id: str, state: dict[str, Any]) -> None:
        with self._lock:
            self._items[(key, record_id)] = state
            self._items.move_to_end((key, record_id))
            while len(self._items) > self._size:
                self._items.popitem(last=False)


@dataclass(frozen=True, slots=True)
class Loaded:
    """A session as :func:`load_program` read it (JSON data; events oldest first)."""

    tail: Tail
    events: list[dict[str, Any]]
    state: dict[str, Any]
    app_state: dict[str, Any]
    user_state: dict[str, Any]
    ids: tuple[str, str, str] | None  #: from the creation record, when it was read


# -- shared (app: and user:) state -----------------------------------------------------------


def read_state(key: str) -> Program[dict[str, Any]]:
    """The state a user's or an app's state log holds now (one read of one record)."""
    records: list[Record] = yield Read(key, -1)
    return _state(key, records[-1] if records else None)


def _state(key: str, record: Record | None) -> dict[str, Any]:
    try:
        return state_of(record)
    except (ValueError, TypeError) as exc:
        assert record is not None
        raise CorruptRecord(key, -1, str(exc), record.id) from None


def shared_state_program(
    key: str, delta: dict[str, Any], record_id: str, *, conditional: bool
) -> Program[dict[str, Any]]:
    """Merge ``delta`` into the state of ``key`` (``dict.update``: a value replaces the
    stored one, ``None`` included) and return the state after it.

    With ``conditional`` the new state is appended only right after the record it was
    computed from, and recomputed after any other writer's change, so concurrent updates
    from any number of processes all land (what ``SELECT ... FOR UPDATE`` gives ADK's
    database service). ``record_id`` names the change: a retry of one that was stored
    already (an unknown outcome, then a retry) changes nothing.
    """
    for _attempt in range(RETRIES):
        records: list[Record] = yield Read(key, -1)
        last = records[-1] if records else None
        if last is not None and last.id == record_id:
            return _state(key, last)  # this very change was stored: a retry
        state = {**_state(key, last), **delta}
        record = _state_record(record_id, state)
        try:
            if conditional:
                yield AppendIf(key, [record], None if last is None else last.id)
            else:
                yield Append(key, [record])
        except AppendConflict:
            continue
        except RecordConflict:
            # Stored already, before later changes: applied once, as it should be.
            current: dict[str, Any] = yield from read_state(key)
            return current
        return state
    raise SharedStateBusy(key, RETRIES)


# -- create --------------------------------------------------------------------------------


def create_program(
    keys: SessionKeys,
    ids: tuple[str, str, str],
    created: float,
    deltas: dict[str, dict[str, Any]],
    *,
    conditional: bool,
) -> Program[tuple[Tail, dict[str, Any], dict[str, Any]]]:
    """Create a session (its creation record, atomically refused when the log exists) and
    apply the ``app:``/``user:`` parts of its initial state. Returns the log's tail and
    the app's and the user's state after it."""
    header, tail = header_record(*ids, created, deltas["session"])
    try:
        if conditional:
            yield AppendIf(keys.session, [header], None)
        else:
            existing: list[Record] = yield Read(keys.session, -1)
            if existing:
                raise AppendConflict(keys.session, None)
            yield Append(keys.session, [header])
    except AppendConflict:
        raise SessionAlreadyExists(f"Session with id {ids[2]} already exists.") from None
    app_state, user_state = yield from _apply_shared(keys, deltas, header.id, conditional, True)
    assert app_state is not None and user_state is not None
    return tail, app_state, user_state


def _apply_shared(
    keys: SessionKeys,
    deltas: dict[str, dict[str, Any]],
    change: str,
    conditional: bool,
    read_unchanged: bool,
) -> Program[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
    """Apply the ``app:`` and ``user:`` deltas of change ``change`` (a record id); return
    both states after it (an unchanged one only with ``read_unchanged``, else ``None``)."""
    states: list[dict[str, Any] | None] = []
    for key, delta, suffix in (
        (keys.app_state, deltas["app"], ":app"),
        (keys.user_state, deltas["user"], ":user"),
    ):
        if delta:
            state = yield from shared_state_program(
                key, delta, change + suffix, conditional=conditional
            )
        elif read_unchanged:
            state = yield from read_state(key)
        else:
            state = None
        states.append(state)
    return states[0], states[1]


# -- read ----------------------------------------------------------------------------------


def _entries(key: str, records: Sequence[Record], first: int | None) -> list[Entry]:
    """Parse ``records`` (read from position ``first``; ``None``: from the end)."""
    entries = []
    for offset, record in enumerate(records):
        entries.append(parse_record(key, None if first is None else first + offset, record))
    if first is None and entries:
        # A tail read: each record says where it is; they must follow each other.
        start = entries[0].tail.position
        for offset, entry in enumerate(entries):
            if entry.tail.position != start + offset:
                raise CorruptRecord(
                    key,
                    -len(entries) + offset,
                    "the log was written to by something other than chatkeep.google_adk",
                    entry.tail.record_id,
                )
    return entries


def _session_state(
    key: str, entries: Sequence[Entry], tail: Tail, cache: StateCache
) -> Program[dict[str, Any]]:
    """The session-scoped state at ``tail``: from the records read, the cache, or one
    more read of the record holding it."""
    for entry in reversed(entries):
        if entry.tail.record_id == tail.state_id and entry.state is not None:
            cache.put(key, tail.state_id, entry.state)
            return entry.state
    cached = cache.get(key, tail.state_id)
    if cached is not None:
        return cached
    records: list[Record] = yield Read(key, tail.state_at, tail.state_at + 1)
    if not records or records[0].id != tail.state_id:
        raise CorruptRecord(
            key, tail.state_at, "the record holding the session's state is not there", None
        )
    entry = parse_record(key, tail.state_at, records[0])
    if entry.state is None:
        raise CorruptRecord(key, tail.state_at, "the record holds no state", records[0].id)
    cache.put(key, tail.state_id, entry.state)
    return entry.state


def load_program(
    keys: SessionKeys,
    recent: int | None,
    after: float | None,
    cache: StateCache,
) -> Program[Loaded | None]:
    """Read a session: its newest ``recent`` events (all with ``None``) at or after
    ``after`` (a timestamp; ``None``: no bound), its state and its app's and user's.

    Events come in ``(timestamp, id)`` order, as ADK's database service returns them.
    One read for the whole session or a window (a tail read: its cost follows the window,
    not the session's length) while the log is in that order, plus one read each for the
    app's and the user's state; a log whose events came out of order is read whole.
    """
    key = keys.session
    first: int | None
    if recent is None and after is None:
        records: list[Record] = yield Read(key)
        first = 0
    elif recent is not None:
        records = yield Read(key, -max(recent, 1))
        first = None
    else:
        records, first = yield from _since(key, after)
    if not records:
        return None
    entries = _entries(key, records, first)
    tail = entries[-1].tail
    if not tail.ordered and first != 0:  # events out of order: sort them all
        records = yield Read(key)
        entries = _entries(key, records, 0)
        tail = entries[-1].tail
    events = [entry.event for entry in entries if entry.event is not None]
    if not tail.ordered:
        events.sort(key=lambda event: (event["timestamp"], event["id"]))
    if after is not None:
        events = [event for event in events if event["timestamp"] >= after]
    if recent is not None:
        events = events[-recent:] if recent else []
    state = yield from _session_state(key, entries, tail, cache)
    app_state = yield from read_state(keys.app_state)
    user_state = yield from read_state(keys.user_state)
    ids = entries[0].ids
    return Loaded(tail, events, state, app_state, user_state, ids)


def _since(key: str, after: float | None) -> Program[tuple[list[Record], int | None]]:
    """The end of the log back to its first event before ``after`` (or all of it),
    reading backward in growing chunks: while the log is in timestamp order, that holds
    every event at or after ``after``. (A log out of order is read whole by the caller.)"""
    assert after is not None
    size = CHUNK
    records: list[Record] = yield Read(key, -size)
    if not records or not parse_record(key, None, records[-1]).tail.ordered:
        return records, None
    while True:
        head = parse_record(key, None, records[0])
        if head.event is None or head.event["timestamp"] < after or head.tail.position == 0:
            return records, None
        start = head.tail.position
        earlier: list[Record] = yield Read(key, max(start - size, 0), start)
        if not earlier:
            return records, None
        records = [*earlier, *records]
        size *= 2


def summary_program(
    key: str, hashed: bool, cache: StateCache
) -> Program[tuple[Tail, dict[str, Any], tuple[str, str, str] | None] | None]:
    """What a listing shows of one session: its tail, its session-scoped state and (when
    its key holds a digest, or ``hashed``) its ids from the creation record; ``None`` when
    it was deleted meanwhile."""
    records: list[Record] = yield Read(key, -1)
    if not records:
        return None
    entries = _entries(key, records, None)
    tail = entries[-1].tail
    state = yield from _session_state(key, entries, tail, cache)
    ids = entries[0].ids
    if hashed and ids is None:
        head: list[Record] = yield Read(key, 0, 1)
        if not head:
            return None
        ids = parse_record(key, 0, head[0]).ids
    return tail, state, ids


@dataclass(frozen=True, slots=True)
class Listed:
    """One session of a listing (JSON data; no events)."""

    user_id: str
    session_id: str
    tail: Tail
    state: dict[str, Any]
    user_state: dict[str, Any]


def list_program(
    app_state_key: str,
    found: Sequence[tuple[str, str | None, str | None]],
    user_state_key: Callable[[str], str],
    cache: StateCache,
) -> Program[tuple[dict[str, Any], list[Listed]]]:
    """The app's state and a summary of each session of ``found`` (its key and the ids
    the key holds, ``None`` where it holds a digest), with its user's state (read once per
    user); a session deleted since it was listed is left out."""
    listed: list[Listed] = []
    user_states: dict[str, dict[str, Any]] = {}
    for key, user, session_id in found:
        summary = yield from summary_program(key, user is None or session_id is None, cache)
        if summary is None:
            continue
        tail, state, stored = summary
        if stored is not None:
            _, user, session_id = stored
        assert user is not None and session_id is not None
        if user not in user_states:
            user_states[user] = yield from read_state(user_state_key(user))
        listed.append(Listed(user, session_id, tail, state, user_states[user]))
    app_state = yield from read_state(app_state_key)
    return app_state, listed


# -- append --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionView:
    """What a stale check needs of the caller's session object when it has no marker of
    this adapter: ADK's database service compares its update time and last event id."""

    last_update_time: float
    last_event_id: str | None


def append_program(
    keys: SessionKeys,
    *,
    name: str,
    record_id: str,
    event: dict[str, Any],
    deltas: dict[str, dict[str, Any]],
    known: Tail | None,
    session: SessionView,
    cache: StateCache,
    conditional: bool,
) -> Program[Tail]:
    """Append one event (its JSON form, ``temp:`` state already taken out) and apply its
    state deltas; return the log's tail after it.

    ``known``: the tail the caller's session object was loaded or last updated at (its
    marker). The event is appended only right after that record (one conditional append,
    no read), so a session object another writer got ahead of is refused with
    :class:`StaleSession`, as ADK's database service refuses it, and nothing is stored.
    Without a marker, the log's end is read and judged as the database service judges a
    session object without its marker (by update time, then last event id).

    The event is the commit point: the app's and the user's state are updated after it
    (each race-free on its own log). A process killed between the two leaves the event
    stored with its deltas and the shared state without them.
    """
    key = keys.session
    if known is None or not conditional:
        # No marker to append after, or no conditional append to check it with: read the
        # log's end and judge it (without ``conditional``, a writer landing between this
        # read and the append goes unnoticed).
        records: list[Record] = yield Read(key, -1)
        if not records:
            raise UnknownSession(f"Session {name} not found.")
        last = parse_record(key, None, records[-1]).tail
        if known is None:
            latest = None if last.newest is None else last.newest[1]
            if last.updated > session.last_update_time and latest != session.last_event_id:
                raise StaleSession(_STALE)
        elif last.record_id != known.record_id:
            raise StaleSession(_STALE)
        known = last
    state = None
    if deltas["session"]:
        base = yield from _session_state(key, (), known, cache)
        state = {**base, **deltas["session"]}
    record, tail = event_record(record_id, event, known, state)
    try:
        if conditional:
            yield AppendIf(key, [record], known.record_id)
        else:
            yield Append(key, [record])
    except AppendConflict:
        now: list[Record] = yield Read(key, -1)
        if not now:
            raise UnknownSession(f"Session {name} not found.") from None
        raise StaleSession(_STALE) from None
    if state is not None:
        cache.put(key, record_id, state)
    yield from _apply_shared(keys, deltas, record_id, conditional, False)
    return tail
