"""In-place edits of a view as store programs: ``view[start:stop] = messages``, said with
one record appended to the log, never a rewrite.

Which record says it, from the cheapest for the reader that is exact:

- nothing removed at the end of the view: the new messages are appended as ordinary
  message records (an edit that only adds at the end is an append);
- only the end removed, on a store with ``conditional``: a ``chatkeep.retract`` back to the
  first removed message, when that is a stored record with no checkpoint or edit after it;
- the edit reaches the start of the view: a ``chatkeep.checkpoint`` holding the new head
  and keeping the rest by count (a later read stops there: it costs the view);
- otherwise: a ``chatkeep.splice`` (``covers``, ``keep``, ``drop``, ``messages``).

Every record is written with ``AppendIf`` after the record the edit was computed from, on
a store that declares ``conditional`` (a lost race reads again and recomputes, so two
concurrent deletes remove two different messages); elsewhere it is appended and checked:
a checkpoint or splice that landed after another writer's record is ignored by every
reader (it covers the wrong record), so it is computed and written again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from ..codec import encode_message_adding
from ..errors import AppendConflict, EditOutOfRange, RecordConflict, ViewError
from ..ids import new_id
from ..messages import Message
from ..records import Record, check_session_id
from ._control import (
    CHECKPOINT,
    RETRACT,
    SPLICE,
    STORED_AT_KEY,
    CountMark,
    control_record,
    is_control_data,
    utc_stamp,
)
from ._count import tail_count_program
from ._ops import ViewRead, view_program
from ._program import Append, AppendIf, Program, Read
from ._walk import find_record

__all__ = [
    "Spliced",
    "delete_program",
    "insert_program",
    "known_splice_program",
    "replace_program",
    "set_program",
    "splice_program",
]

#: How often an edit re-reads and recomputes after another writer got in between.
RETRIES = 32
# A whole-view rewrite (set) checkpoints the view when the log behind it holds more than
# this many records per view message (plus a floor), so whole reads stay O(view).
_WASTE_RATIO = 2
_WASTE_FLOOR = 64


class _Changed(Exception):
    """The log changed between the reads of one attempt: compute the edit again."""


def _bound(index: int | None, length: int, default: int) -> int:
    """A slice bound, Python's way: ``None`` is ``default``; a negative one counts from the
    end; out of range is clamped."""
    if index is None:
        return default
    if index < 0:
        return max(length + index, 0)
    return min(index, length)


def _check_index(value: object, name: str) -> None:
    if value is not None and (type(value) is not int):
        raise TypeError(f"{name} must be an int or None, not {type(value).__name__}")


def _check_messages(messages: Sequence[Message]) -> list[Message]:
    """The messages, each with a ``message_id`` of its own (given ones kept, unless one
    repeats within the batch)."""
    out = []
    seen: set[str] = set()
    for message in messages:
        if not isinstance(message, Message):
            raise TypeError(f"an edit takes chatkeep Messages, not {type(message).__name__}")
        if not message.message_id or message.message_id in seen:
            message = replace(message, message_id=new_id())
        assert message.message_id is not None
        seen.add(message.message_id)
        out.append(message)
    return out


class _Target:
    """What one attempt read: the view from the edit's start to its end, and where it is."""

    def __init__(
        self, read: ViewRead, tail: list[Message], length: int | None, start: int, stop: int
    ) -> None:
        self.read = read
        self.tail = tail  # view[start:], the newest messages
        self.length = length  # the view's message count, when known
        self.start = start  # from the end: len(tail)
        self.stop = stop  # messages after the edit (kept), from the end

    @property
    def removed(self) -> list[Message]:
        return self.tail[: self.start - self.stop]

    @property
    def reaches_start(self) -> bool:
        return self.length is not None and self.start == self.length


def _locate(session_id: str, start: int | None, stop: int | None) -> Program[_Target]:
    """Read what an edit of ``view[start:stop]`` needs (the view from ``start`` on, and the
    view's length when an index counts from the start)."""
    from_end = start is not None and start < 0 and (stop is None or stop < 0)
    if from_end:
        assert start is not None
        read = yield from view_program(session_id, -start, track_stored=True)
        length = read.count
        if length is None and read.newest_record_id is not None:
            # The window stopped short of the running count's check: check it apart (at
            # most two small reads), so the edit's record carries the count on.
            proven = yield from tail_count_program(session_id)
            if proven is not None and proven[1] == read.newest_record_id:
                length = proven[0]
        tail = read.messages
        size = len(tail)
        keep = 0 if stop is None else min(-stop, size)
        return _Target(read, tail, length, size, min(keep, size))
    proven = yield from tail_count_program(session_id)
    if proven is not None:  # the length is known: read from ``start`` on only
        length, newest = proven
        first = _bound(start, length, 0)
        last = max(_bound(stop, length, length), first)
        read = yield from view_program(session_id, max(length - first, 1), track_stored=True)
        if read.newest_record_id != newest:
            raise _Changed
        if len(read.messages) >= length - first:
            tail = read.messages[len(read.messages) - (length - first) :] if length > first else []
            return _Target(read, tail, length, length - first, length - last)
    read = yield from view_program(session_id, track_stored=True)  # the whole view
    length = len(read.messages)
    first = _bound(start, length, 0)
    last = max(_bound(stop, length, length), first)
    return _Target(read, read.messages[first:], length, length - first, length - last)


def _message_records(messages: list[Message], count: CountMark | None) -> list[Record]:
    stamp = utc_stamp()
    records = []
    for index, message in enumerate(messages):
        added: dict[str, Any] = {}
        if count is not None and index == len(messages) - 1:
            added["chatkeep.count"] = count.to_json()
        if STORED_AT_KEY not in message.additional_properties:
            added[STORED_AT_KEY] = stamp
        assert message.message_id is not None
        records.append(Record(message.message_id, encode_message_adding(message, added)))
    return records


def _edit_record(
    target: _Target, messages: list[Message], conditional: bool, inline: bool = False
) -> list[Record]:
    """The records that say the edit (see the module docstring). ``inline``: the messages
    go inside a control record even at the end (their ids are taken in the log)."""
    read = target.read
    covers = read.newest_record_id
    keep, drop = target.stop, target.start - target.stop
    after = None if target.length is None else target.length - drop + len(messages)
    if keep == 0 and drop == 0 and not inline:
        taken = read.stored_ids | {m.message_id for m in target.tail}
        inline = any(message.message_id in taken for message in messages)
    if keep == 0 and drop == 0 and (not inline or covers is None):
        count = None if after is None else CountMark(after, covers, len(messages))
        return _message_records(messages, count)
    assert covers is not None  # something to remove or keep: the log has records
    fields: dict[str, Any] = {}
    if after is not None:
        fields["count"] = CountMark(after, covers, 1).to_json()
    removed = target.removed
    if conditional and not messages and keep == 0 and removed[0].message_id in read.uncompacted_ids:
        return [control_record(RETRACT, target=removed[0].message_id, **fields)]
    if target.reaches_start:
        return [control_record(CHECKPOINT, covers=covers, keep=keep, messages=messages, **fields)]
    return [
        control_record(SPLICE, covers=covers, keep=keep, drop=drop, messages=messages, **fields)
    ]


def _landed(session_id: str, record: Record, covers: str | None) -> Program[bool]:
    """Whether ``record`` (just appended without a condition) follows ``covers`` in the
    log, so readers honour it."""
    if covers is None:
        return True
    found = yield from find_record(session_id, record.id)
    if found is None:
        raise ViewError(f"session {session_id!r} changed while it was being edited")
    holder, position = found
    if position == 0:
        return False
    before: list[Record] = yield Read(holder, position - 1, position)
    return bool(before) and before[0].id == covers


_LOST = "lost"  # a lost race: compute the edit again
_INLINE = "inline"  # a message id is taken in the log: say the edit with a control record


def _write(
    session_id: str, records: list[Record], covers: str | None, conditional: bool
) -> Program[str | None]:
    """Append the edit; ``None`` when it is done, else why it must be computed again."""
    try:
        if conditional:
            try:
                yield AppendIf(session_id, records, covers)
            except AppendConflict:
                return _LOST
            return None
        yield Append(session_id, records)
    except RecordConflict:
        if covers is None or is_control_data(records[0].data):
            raise
        return _INLINE
    if len(records) == 1 and is_control_data(records[0].data):
        landed = yield from _landed(session_id, records[0], covers)
        return None if landed else _LOST
    return None


Compute = Callable[[], "Program[tuple[_Target, list[Message]] | None]"]


def _edit_loop(session_id: str, compute: Compute, conditional: bool) -> Program[_Target | None]:
    """Compute an edit (``compute()``: what it works on and the messages it puts; ``None``
    for nothing to do) and write it, again after a lost race; return what it worked on."""
    inline = False
    for _attempt in range(RETRIES):
        try:
            planned = yield from compute()
        except _Changed:
            continue
        if planned is None:
            return None
        target, new = planned
        records = _edit_record(target, new, conditional, inline)
        why = yield from _write(session_id, records, target.read.newest_record_id, conditional)
        if why is None:
            return target
        inline = inline or why == _INLINE
    raise ViewError(
        f"session {session_id!r} kept changing while an edit was retried {RETRIES} times; "
        "nothing was changed"
    )


def splice_program(
    session_id: str,
    start: int | None,
    stop: int | None,
    messages: Sequence[Message],
    *,
    conditional: bool,
) -> Program[list[Message]]:
    """``view[start:stop] = messages`` (Python's slice rules); returns what was removed."""
    session_id = check_session_id(session_id)
    _check_index(start, "start")
    _check_index(stop, "stop")
    new = _check_messages(messages)

    def compute() -> Program[tuple[_Target, list[Message]] | None]:
        target = yield from _locate(session_id, start, stop)
        return None if target.start == target.stop and not new else (target, new)

    target = yield from _edit_loop(session_id, compute, conditional)
    return [] if target is None else target.removed


class Spliced(NamedTuple):
    """What :func:`known_splice_program` wrote: ``view[first:last]`` was replaced, and the
    log's newest record is now ``newest_record_id`` (the edit's), ``nbytes`` bytes added."""

    first: int
    last: int
    newest_record_id: str | None
    nbytes: int


def known_splice_program(
    session_id: str,
    start: int | None,
    stop: int | None,
    messages: Sequence[Message],
    *,
    newest_record_id: str | None,
    length: int,
    conditional: bool,
) -> Program[Spliced | None]:
    """``view[start:stop] = messages`` on a view the caller already holds: the view has
    ``length`` messages and was read when the log's newest record was
    ``newest_record_id`` (``None``: an empty log), which the caller has just checked (a
    tail read), so nothing of the view is read again. One attempt: the record is written
    with ``AppendIf`` after ``newest_record_id`` (elsewhere appended and checked as
    :func:`splice_program` does). Returns the slice's bounds in the view (apply the same
    edit to the held copy) and the log's new newest record, or ``None`` when the log no longer ends
    at ``newest_record_id``: nothing readers honour was written; edit the usual way.

    The record is a splice or, reaching the view's start, a checkpoint, or an append for
    messages added at the end (never a retract: which stored ids a retract may target is
    not known without reading)."""
    session_id = check_session_id(session_id)
    _check_index(start, "start")
    _check_index(stop, "stop")
    if type(length) is not int or length < 0:
        raise ValueError("length must be a non-negative int")
    if newest_record_id is None and length:
        raise ValueError("a view with messages has a newest record")
    given = any(message.message_id for message in messages)
    new = _check_messages(messages)
    first = _bound(start, length, 0)
    last = max(_bound(stop, length, length), first)
    if first == last and not new:
        return Spliced(first, last, newest_record_id, 0)
    read = ViewRead([], False, newest_record_id, count=length)
    target = _Target(read, [], length, length - first, length - last)
    # A given id may already be taken in the log: say the messages inside a control record.
    records = _edit_record(target, new, False, inline=given)
    why = yield from _write(session_id, records, newest_record_id, conditional)
    if why is not None:
        return None
    return Spliced(first, last, records[-1].id, sum(len(record.data) for record in records))


def _at(session_id: str, index: int, new: list[Message], conditional: bool) -> Program[Message]:
    """Replace message ``index`` with ``new`` (``[]``: delete it); return it."""
    _check_index(index, "index")
    session_id = check_session_id(session_id)

    def compute() -> Program[tuple[_Target, list[Message]] | None]:
        target = yield from _locate(session_id, index, None if index == -1 else index + 1)
        if target.start - target.stop != 1:
            raise EditOutOfRange(session_id, index, target.length)
        return target, new

    target = yield from _edit_loop(session_id, compute, conditional)
    assert target is not None
    return target.removed[0]


def delete_program(session_id: str, index: int, *, conditional: bool) -> Program[Message]:
    """Remove message ``index`` (``list.pop`` rules: -1 is the last); return it."""
    return (yield from _at(session_id, index, [], conditional))


def replace_program(
    session_id: str, index: int, message: Message, *, conditional: bool
) -> Program[Message]:
    """Put ``message`` in place of message ``index``; return the one it replaced."""
    return (yield from _at(session_id, index, _check_messages([message]), conditional))


def insert_program(
    session_id: str, index: int, messages: Sequence[Message], *, conditional: bool
) -> Program[None]:
    """Insert ``messages`` before message ``index`` (``list.insert`` rules)."""
    _check_index(index, "index")
    yield from splice_program(session_id, index, index, messages, conditional=conditional)


def _same(old: Message, new: Message) -> bool:
    """Whether ``new`` says what ``old`` says (a message without an id matches one with)."""
    if new.message_id is None:
        return replace(old, message_id=None) == new
    return old == new


def set_program(
    session_id: str, messages: Sequence[Message], *, conditional: bool
) -> Program[list[Message]]:
    """Make the view exactly ``messages``; return the view it replaced. Only what differs
    is written: an unchanged head and tail are kept by reference, so setting the view to
    itself plus new messages appends them."""
    session_id = check_session_id(session_id)
    wanted = list(messages)
    _check_messages(wanted)  # the type check; ids are given to what is written
    before: list[Message] = []

    def compute() -> Program[tuple[_Target, list[Message]] | None]:
        nonlocal before
        read = yield from view_program(session_id, track_stored=True)
        view = before = read.messages
        head = 0
        while head < min(len(view), len(wanted)) and _same(view[head], wanted[head]):
            head += 1
        tail = 0
        while tail < min(len(view), len(wanted)) - head and _same(
            view[-1 - tail], wanted[-1 - tail]
        ):
            tail += 1
        if head == len(view) == len(wanted):
            return None
        if head < len(view) and _wasteful(read, len(view)):
            head = 0  # the log behind the view is long: a checkpoint makes reads cheap
        target = _Target(read, view[head:], len(view), len(view) - head, tail)
        return target, _check_messages(wanted[head : len(wanted) - tail])

    yield from _edit_loop(session_id, compute, conditional)
    return before


def _wasteful(read: ViewRead, length: int) -> bool:
    return read.records_fed > _WASTE_RATIO * length + _WASTE_FLOOR
