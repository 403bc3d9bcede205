"""Walking a session's log backward, following forks into their parents.

The newest records are read with tail reads (``read(id, -k)``, then earlier negative
slices), so a window costs what it returns however long the log is. Each later slice reads
one record it has already seen (the *anchor*) so that records appended meanwhile by another
writer are noticed and nothing is fed twice or skipped. A fork's prefix is read from the
parent with positive slices that end at the fork point, which never moves.
"""

from __future__ import annotations

from typing import Protocol

from ..errors import CorruptRecord, ViewError
from ..records import Record
from ._control import BASE, FORK, Control, is_control_data, parse_entry
from ._program import Program, Read

__all__ = [
    "IdSearch",
    "Sink",
    "absolute_position",
    "find_record",
    "fork_of",
    "probe_length",
    "read_all",
    "resolve_fork_point",
    "walk_chain",
    "walk_from",
]

# An unlimited walk starts small (a compacted view is short) and grows eightfold, so even
# an uncompacted log of 10,000 records takes four reads.
_FIRST_CHUNK = 32
_GROWTH = 8
_MAX_CHUNK = 8192
_MIN_CHUNK = 16
_MAX_FORK_DEPTH = 10_000  # a longer chain of forks can only be a cycle written by hand
_READ_ALL_CHUNK = 2048


class Sink(Protocol):
    """What a walk feeds records to (a view builder, an id search)."""

    done: bool

    @property
    def skipping(self) -> bool: ...

    def wanted(self) -> int: ...

    def feed(self, record_id: str, data: bytes, session_id: str, position: int) -> None: ...


def _first_size(wanted: int) -> int:
    return _FIRST_CHUNK if wanted > _MAX_CHUNK else max(wanted, 1)


def _next_size(sink: Sink, previous: int) -> int:
    wanted = sink.wanted()
    if wanted > _MAX_CHUNK:
        return min(max(previous * _GROWTH, _FIRST_CHUNK), _MAX_CHUNK)
    # Control records (checkpoints, retracts) mean a few more records than messages.
    size = max(wanted + wanted // 2, _MIN_CHUNK)
    if sink.skipping:  # the retracted span's length is unknown: grow geometrically
        size = max(size, min(previous * 2, _MAX_CHUNK))
    return size


def fork_of(session_id: str, record: Record) -> Control | None:
    """The fork record ``record`` is, if it is one (it is the first record of its log)."""
    if not is_control_data(record.data):
        return None
    try:
        entry = parse_entry(record.data)
    except ValueError as exc:
        raise CorruptRecord(session_id, 0, str(exc), record.id) from exc
    if isinstance(entry, Control) and entry.kind == FORK:
        return entry
    return None


def _base_shift(records: list[Record]) -> int | None:
    if not records or not is_control_data(records[0].data):
        return None
    try:
        entry = parse_entry(records[0].data)
    except ValueError:
        return None
    if isinstance(entry, Control) and entry.kind == BASE:
        shift: int = entry["shift"]
        return shift
    return None


def _lost_parent(child: str, fork: Control, fork_id: str) -> CorruptRecord:
    return CorruptRecord(
        child,
        0,
        f"forked from session {fork['parent']!r} at position {fork['position']}, but that "
        "session no longer holds those records (it was erased or rewritten without "
        "chatkeep.core.views.delete_session)",
        fork_id,
    )


def resolve_fork_point(
    child: str, fork: Control, fork_id: str, size: int
) -> Program[tuple[int, list[Record]]]:
    """Where the fork point is in the parent's log today, and the ``size`` records before
    it. A parent made self-contained since has moved its records by the ``shift`` of its
    ``chatkeep.base`` record; the fork's anchor (the id of the record right before the fork
    point) proves the place."""
    parent: str = fork["parent"]
    end: int = fork["position"]
    anchor: str | None = fork["anchor"]
    if end == 0:
        return 0, []
    size = min(size, end)
    records: list[Record] = yield Read(parent, end - size, end)
    if records and records[-1].id == anchor and len(records) == size:
        return end, records
    shift = _base_shift((yield Read(parent, 0, 1)))
    if shift is None:
        raise _lost_parent(child, fork, fork_id)
    end += shift
    records = yield Read(parent, end - size, end)
    if records and records[-1].id == anchor and len(records) == size:
        return end, records
    raise _lost_parent(child, fork, fork_id)


def walk_chain(sink: Sink, session_id: str) -> Program[None]:
    """Feed ``session_id``'s records to ``sink``, newest first, continuing into the parent
    at a fork record, until the sink is done or the oldest record was fed.

    Positions handed to the sink are absolute when known, else negative (counted from the
    end of the log); a :class:`CorruptRecord` raised with a negative position is given its
    absolute position before it leaves.
    """
    if sink.done:
        return
    try:
        fork = yield from _walk_tail(sink, session_id)
        yield from _follow(sink, fork)
    except CorruptRecord as error:
        if error.position >= 0:
            raise
        position = yield from absolute_position(error.session_id, error.position, error.record_id)
        raise CorruptRecord(error.session_id, position, error.reason, error.record_id) from error


def walk_from(sink: Sink, session_id: str, position: int, anchor: str) -> Program[None]:
    """Feed the records of ``session_id``'s log before ``position`` to ``sink``, newest
    first, continuing into the parent at a fork record, as :func:`walk_chain` does from the
    end of the log: the log as it was right after its record ``anchor`` (at ``position - 1``)
    was appended, which is what a fork made there sees. Records appended later are never
    read; a log made self-contained since (a ``chatkeep.base`` shift) is followed through
    the anchor, as a fork's prefix is."""
    if sink.done or position <= 0:
        return
    link = Control(FORK, {"parent": session_id, "position": position, "anchor": anchor})
    yield from _follow(sink, (session_id, link, anchor))


def _follow(sink: Sink, fork: tuple[str, Control, str] | None) -> Program[None]:
    """Walk the parents a chain of fork links leads to, until the sink is done."""
    depth = 0
    while fork is not None and not sink.done:
        depth += 1
        child, control, fork_id = fork
        if depth > _MAX_FORK_DEPTH:
            raise CorruptRecord(child, 0, "the chain of forks is circular", fork_id)
        fork = yield from _walk_parent(sink, child, control, fork_id)


def _walk_tail(sink: Sink, session_id: str) -> Program[tuple[str, Control, str] | None]:
    size = _first_size(sink.wanted())
    records: list[Record] = yield Read(session_id, -size)
    at_start = len(records) < size
    consumed = 0
    oldest: Record | None = None
    feed_many = getattr(sink, "feed_many", None)
    while True:
        count = len(records)
        if feed_many is not None:  # a view builder: one call per slice
            feed_many(records, session_id, 0 if at_start else -(consumed + count))
            if sink.done:
                return None
        else:
            for index in range(count - 1, -1, -1):
                record = records[index]
                position = index if at_start else -(consumed + count - index)
                sink.feed(record.id, record.data, session_id, position)
                if sink.done:
                    return None
        if records:
            oldest = records[0]
        if at_start:
            if oldest is None:
                return None
            fork = fork_of(session_id, oldest)
            return None if fork is None else (session_id, fork, oldest.id)
        consumed += count
        size = _next_size(sink, size)
        assert oldest is not None
        records, at_start, moved = yield from _read_before(session_id, consumed, oldest.id, size)
        consumed += moved


def _read_before(
    session_id: str, consumed: int, anchor: str, size: int
) -> Program[tuple[list[Record], bool, int]]:
    """The ``size`` records before the oldest one read so far (``anchor``, ``consumed``
    records from the end when it was read). Returns them, whether they reach the start of
    the log, and how many records were appended meanwhile."""
    want = size
    while True:
        stop = -(consumed - 1) or None  # one past the anchor; 0 would mean "up to the end"
        records: list[Record] = yield Read(session_id, -(consumed + want), stop)
        expected = want + 1
        for index in range(len(records) - 1, -1, -1):
            if records[index].id == anchor:
                moved = len(records) - 1 - index
                return records[:index], len(records) < expected, moved
        if len(records) < expected:
            raise ViewError(
                f"session {session_id!r} changed while it was being read "
                "(deleted or rewritten); read it again"
            )
        want *= 2  # more records were appended meanwhile than this slice covers


def _walk_parent(
    sink: Sink, child: str, fork: Control, fork_id: str
) -> Program[tuple[str, Control, str] | None]:
    parent: str = fork["parent"]
    size = _first_size(sink.wanted())
    end, records = yield from resolve_fork_point(child, fork, fork_id, size)
    start = end - len(records)
    feed_many = getattr(sink, "feed_many", None)
    while True:
        if feed_many is not None:
            feed_many(records, parent, start)
            if sink.done:
                return None
        else:
            for index in range(len(records) - 1, -1, -1):
                record = records[index]
                sink.feed(record.id, record.data, parent, start + index)
                if sink.done:
                    return None
        if start <= 0:
            if not records:
                return None
            parent_fork = fork_of(parent, records[0])
            return None if parent_fork is None else (parent, parent_fork, records[0].id)
        end = start
        size = min(_next_size(sink, len(records)), end)
        start = end - size
        records = yield Read(parent, start, end)
        if len(records) != size:
            raise ViewError(f"session {parent!r} changed while it was being read; read it again")


def probe_length(session_id: str) -> Program[tuple[int, Record | None]]:
    """The number of records in the log and its last record, in O(log n) one-record reads
    (the contract has no length call; this never reads the log itself)."""
    first: list[Record] = yield Read(session_id, 0, 1)
    if not first:
        return 0, None
    low, high = 1, 2  # a record exists at low - 1; maybe none at high - 1
    while (yield Read(session_id, high - 1, high)):
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if (yield Read(session_id, middle - 1, middle)):
            low = middle
        else:
            high = middle
    last: list[Record] = yield Read(session_id, low - 1, low)
    return low, (last[0] if last else None)


def absolute_position(session_id: str, negative: int, record_id: str | None) -> Program[int]:
    """The absolute position of a record seen at ``negative`` (from the end) earlier."""
    length, _ = yield from probe_length(session_id)
    guess = max(length + negative, 0)
    if record_id is None:
        return guess
    # The log may have grown since: the record is at the guess or before it.
    start = max(guess - 256, 0)
    records: list[Record] = yield Read(session_id, start, guess + 1)
    for index in range(len(records) - 1, -1, -1):
        if records[index].id == record_id:
            return start + index
    return guess


def read_all(session_id: str) -> Program[list[Record]]:
    """Every record of one log (not following forks), in bounded slices."""
    out: list[Record] = []
    while True:
        chunk: list[Record] = yield Read(session_id, len(out), len(out) + _READ_ALL_CHUNK)
        out.extend(chunk)
        if len(chunk) < _READ_ALL_CHUNK:
            return out


class IdSearch:
    """A sink that stops at the record with id ``target`` and remembers where it was."""

    skipping = True  # the distance is unknown: chunks grow geometrically

    def __init__(self, target: str) -> None:
        self.target = target
        self.done = False
        self.found: tuple[str, int] | None = None

    def wanted(self) -> int:
        """Start small: the record searched for is usually recent."""
        return _MIN_CHUNK * 2

    def feed(self, record_id: str, data: bytes, session_id: str, position: int) -> None:
        if record_id == self.target:
            self.found = (session_id, position)
            self.done = True


def find_record(session_id: str, record_id: str) -> Program[tuple[str, int] | None]:
    """The session (``session_id`` or a fork ancestor) and absolute position holding
    ``record_id``, searching newest first; ``None`` if no such record."""
    search = IdSearch(record_id)
    yield from walk_chain(search, session_id)
    if search.found is None:
        return None
    holder, position = search.found
    if position < 0:
        position = yield from absolute_position(holder, position, record_id)
    return holder, position
