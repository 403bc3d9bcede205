"""The view operations as store programs: read a view, undo, fork, checkpoint."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import AppendConflict, MessageNotFound, SessionExists, SessionNotFound, ViewError
from ..ids import new_id
from ..messages import Message
from ..records import Record, check_session_id
from ._builder import ViewBuilder
from ._control import CHECKPOINT, FORK, FORKED, RETRACT, CountMark, control_record
from ._count import proven_count_program, tail_count_program
from ._program import Append, AppendIf, Program, Read
from ._walk import IdSearch, find_record, probe_length, walk_chain

__all__ = [
    "Checkpoint",
    "ViewRead",
    "checkpoint_program",
    "fork_program",
    "undo_program",
    "view_program",
]


@dataclass(frozen=True)
class ViewRead:
    """A view read: the messages (oldest first), whether ``limit`` cut older ones off, and
    the id of the newest record of the log (what a checkpoint written now would cover).

    ``count``: how many messages the whole view has, when that is known for sure: the read
    was not cut off (``len(messages)``), or the newest record is a message carrying a
    running count that the records read verify (see
    :class:`~chatkeep.core.views._control.CountMark`); else ``None``."""

    messages: list[Message]
    truncated: bool
    newest_record_id: str | None
    stored_ids: frozenset[str] = frozenset()
    count: int | None = None
    #: With ``track_stored``: the stored message ids with no checkpoint or edit record
    #: after them.
    uncompacted_ids: frozenset[str] = frozenset()
    #: How many records the read walked (its cost).
    records_fed: int = 0
    #: The bytes of those records (what a decoded copy of the view holds about).
    bytes_fed: int = 0
    #: The data of the log's newest record (``newest_record_id``'s), when one was read.
    newest_record_data: bytes | None = None


def view_program(
    session_id: str, limit: int | None = None, *, track_stored: bool = False
) -> Program[ViewRead]:
    """Read the view of ``session_id`` (the newest ``limit`` messages, or all)."""
    session_id = check_session_id(session_id)
    if limit is not None and (type(limit) is not int or limit < 0):
        raise ValueError("limit must be a non-negative int or None")
    builder = ViewBuilder(limit, track_stored=track_stored)
    yield from walk_chain(builder, session_id)
    messages = builder.finish()
    stored = frozenset(builder.stored_ids or ())
    count = builder.verified_count() if builder.truncated else len(messages)
    uncompacted = frozenset(builder.uncompacted_ids or ())
    return ViewRead(
        messages,
        builder.truncated,
        builder.newest_record_id,
        stored,
        count,
        uncompacted,
        builder.records_fed,
        builder.bytes_fed,
        builder.newest_record_data,
    )


def _turn_starts(view: Sequence[Message], complete: bool) -> list[int]:
    """Indices of user messages that begin a turn (the first of a run of user messages).
    The first message counts only when the view is ``complete`` (nothing cut off before)."""
    starts = []
    for index, message in enumerate(view):
        if message.role != "user":
            continue
        if index == 0:
            if complete:
                starts.append(index)
        elif view[index - 1].role != "user":
            starts.append(index)
    return starts


#: How often a conditional view operation re-reads and retries after losing a race.
_CONFLICT_RETRIES = 32


def undo_program(
    session_id: str, turns: int = 1, *, conditional: bool = False
) -> Program[list[Message]]:
    """Retract the last ``turns`` turns; return the retracted messages (oldest first).

    With ``conditional`` (the store declares it) the retract is appended only if nothing
    was appended since the view was read; after losing such a race the view is read again,
    so two concurrent undos retract two different turns, never one turn twice.
    """
    session_id = check_session_id(session_id)
    if type(turns) is not int or turns < 1:
        raise ValueError("turns must be a positive int")
    if not conditional:
        return (yield from _undo_once(session_id, turns, None))
    for _attempt in range(_CONFLICT_RETRIES):
        try:
            return (yield from _undo_once(session_id, turns, True))
        except AppendConflict:
            continue
    raise ViewError(
        f"session {session_id!r} kept changing while undo was retried "
        f"{_CONFLICT_RETRIES} times; nothing was retracted"
    )


def _undo_once(session_id: str, turns: int, conditional: bool | None) -> Program[list[Message]]:
    limit = max(16, 8 * turns)
    while True:
        read = yield from view_program(session_id, limit, track_stored=True)
        starts = _turn_starts(read.messages, complete=not read.truncated)
        if len(starts) >= turns or not read.truncated:
            break
        limit *= 4
    if not starts:
        return []
    index = starts[-turns] if len(starts) >= turns else starts[0]
    view = read.messages
    target = view[index].message_id
    assert target is not None
    # A retract skips the log back to its target's record. A message that exists only
    # inside a checkpoint (a summary) has no record: refuse rather than retract everything.
    if target not in read.stored_ids:
        search = IdSearch(target)
        yield from walk_chain(search, session_id)
        if search.found is None:
            raise ViewError(
                f"cannot undo to message {target!r}: it exists only inside a compaction "
                "checkpoint, not as a stored record"
            )
    # The view after the retract is the view before the target (the walk resumes there as
    # it was), so its count is known when the read proved the count and no checkpoint
    # lies between the target and the end (a retract over one also undoes the compaction).
    fields: dict[str, Any] = {"target": target}
    after = read.newest_record_id
    if after is not None and target in read.uncompacted_ids:
        count = yield from _proven(session_id, read)
        if count is not None:
            fields["count"] = CountMark(count - (len(view) - index), after, 1).to_json()
    retract = [control_record(RETRACT, **fields)]
    if conditional:
        yield AppendIf(session_id, retract, read.newest_record_id)
    else:
        yield Append(session_id, retract)
    return view[index:]


def _proven(session_id: str, read: ViewRead) -> Program[int | None]:
    """The view's message count as ``read`` proved it, else as the mark at the end of the
    log proves it when the window stopped short of the mark's check (one read of one
    record, then of two); ``None`` when neither does."""
    if read.count is not None or not read.truncated:
        return read.count
    proven = yield from tail_count_program(session_id)
    if proven is None or proven[1] != read.newest_record_id:
        return None
    return proven[0]


def fork_program(
    session_id: str,
    at: str | None = None,
    new_session_id: str | None = None,
    *,
    conditional: bool = False,
) -> Program[str]:
    """Start a new session from ``session_id`` (at its end, or right after message ``at``)
    without copying its records; return the new session's id.

    With ``conditional`` (the store declares it) the fork's first record is written only
    if the new session is still empty, so two forks racing for one ``new_session_id``
    cannot both write into it: the loser gets :class:`SessionExists`."""
    session_id = check_session_id(session_id)
    child = new_id() if new_session_id is None else check_session_id(new_session_id)
    if child == session_id:
        raise SessionExists(child)
    # The running counts (see CountMark): the view's count at the fork point goes into the
    # fork record (the child's count starts there), the holder's count at its end into the
    # registration (it changes no view); each only when a verified mark proves it.
    at_fork: int | None
    holder_end: tuple[int, str | None] | None
    if at is None:
        length, last = yield from probe_length(session_id)
        if length == 0 or last is None:
            raise SessionNotFound(session_id)
        holder, position, anchor = session_id, length, last.id
        at_fork = yield from proven_count_program(session_id, length - 1, last)
        holder_end = None if at_fork is None else (at_fork, last.id)
    else:
        found = yield from find_record(session_id, at)
        if found is None:
            if not (yield Read(session_id, -1)):
                raise SessionNotFound(session_id)
            raise MessageNotFound(session_id, at)
        holder, before = found
        position, anchor = before + 1, at
        point: list[Record] = yield Read(holder, before, before + 1)
        at_fork = None
        if point and point[0].id == at:
            at_fork = yield from proven_count_program(holder, before, point[0])
        holder_end = yield from tail_count_program(holder)
    if new_session_id is not None and (yield Read(child, 0, 1)):
        raise SessionExists(child)
    registration: dict[str, Any] = {"child": child, "position": position}
    if holder_end is not None and holder_end[1] is not None:
        registration["count"] = CountMark(holder_end[0], holder_end[1], 1).to_json()
    linked: dict[str, Any] = {"parent": holder, "position": position, "anchor": anchor}
    if at_fork is not None:
        linked["count"] = CountMark(at_fork, None, 1).to_json()
    # Register the fork with its parent first: a crash in between leaves a registration
    # without a fork (harmless), never a fork that deleting the parent would not know.
    yield Append(holder, [control_record(FORKED, **registration)])
    link = [control_record(FORK, **linked)]
    if conditional:
        try:
            yield AppendIf(child, link, None)
        except AppendConflict:
            raise SessionExists(child) from None
    else:
        yield Append(child, link)
    return child


@dataclass(frozen=True)
class Checkpoint:
    """A reducer's result saved in the log: the view becomes ``messages`` followed by the
    last ``keep`` messages of the view before it. ``covers`` is the id of the record right
    before the checkpoint (the checkpoint is ignored if anything else lands there)."""

    covers: str
    keep: int
    messages: list[Message] = field(default_factory=list)

    @classmethod
    def between(
        cls, view: Sequence[Message], reduced: Sequence[Message], covers: str
    ) -> Checkpoint | None:
        """The checkpoint that turns ``view`` into ``reduced``; ``None`` if they are equal.

        The longest common tail is kept by reference (``keep``), so a sliding window's
        checkpoint holds no messages at all; only new or changed messages are copied.
        """
        view, reduced = list(view), list(reduced)
        if view == reduced:
            return None
        keep = 0
        limit = min(len(view), len(reduced))
        while keep < limit and view[-1 - keep] == reduced[-1 - keep]:
            keep += 1
        head = reduced[: len(reduced) - keep]
        head = [m if m.message_id else replace(m, message_id=new_id()) for m in head]
        return cls(covers, keep, head)

    @property
    def view_length(self) -> int:
        """How many messages the view has right after this checkpoint: its ``messages``
        and the ``keep`` it keeps (a checkpoint never keeps more than the view had)."""
        return len(self.messages) + self.keep

    def to_record(self, count: CountMark | None = None) -> Record:
        """The control record that stores this checkpoint, with the running count
        ``count`` (see :class:`~chatkeep.core.views._control.CountMark`) if given."""
        fields: dict[str, Any] = {
            "covers": self.covers,
            "keep": self.keep,
            "messages": self.messages,
        }
        if count is not None:
            fields["count"] = count.to_json()
        return control_record(CHECKPOINT, **fields)

    def to_dict(self) -> dict[str, object]:
        """The checkpoint as the JSON-ready dict of its control record."""
        import json

        result: dict[str, object] = json.loads(self.to_record().data)
        return result


def checkpoint_program(
    session_id: str, checkpoint: Checkpoint, *, counted: bool = False
) -> Program[None]:
    """Append ``checkpoint`` to the log; with ``counted`` (it was made from the whole
    view, so the view after it is known) with its running count."""
    count = CountMark(checkpoint.view_length, checkpoint.covers, 1) if counted else None
    yield Append(check_session_id(session_id), [checkpoint.to_record(count)])
