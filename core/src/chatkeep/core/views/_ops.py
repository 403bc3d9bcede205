"""The view operations as store programs: read a view, undo, fork, checkpoint."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ..errors import AppendConflict, MessageNotFound, SessionExists, SessionNotFound, ViewError
from ..ids import new_id
from ..messages import Message
from ..records import Record, check_session_id
from ._builder import ViewBuilder
from ._control import CHECKPOINT, FORK, FORKED, RETRACT, control_record
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
    return ViewRead(messages, builder.truncated, builder.newest_record_id, stored, count)


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
    retract = [control_record(RETRACT, target=target)]
    if conditional:
        yield AppendIf(session_id, retract, read.newest_record_id)
    else:
        yield Append(session_id, retract)
    return view[index:]


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
    if at is None:
        length, last = yield from probe_length(session_id)
        if length == 0 or last is None:
            raise SessionNotFound(session_id)
        holder, position, anchor = session_id, length, last.id
    else:
        found = yield from find_record(session_id, at)
        if found is None:
            if not (yield Read(session_id, -1)):
                raise SessionNotFound(session_id)
            raise MessageNotFound(session_id, at)
        holder, before = found
        position, anchor = before + 1, at
    if new_session_id is not None and (yield Read(child, 0, 1)):
        raise SessionExists(child)
    # Register the fork with its parent first: a crash in between leaves a registration
    # without a fork (harmless), never a fork that deleting the parent would not know.
    yield Append(holder, [control_record(FORKED, child=child, position=position)])
    link = [control_record(FORK, parent=holder, position=position, anchor=anchor)]
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

    def to_record(self) -> Record:
        """The control record that stores this checkpoint."""
        return control_record(
            CHECKPOINT, covers=self.covers, keep=self.keep, messages=self.messages
        )

    def to_dict(self) -> dict[str, object]:
        """The checkpoint as the JSON-ready dict of its control record."""
        import json

        result: dict[str, object] = json.loads(self.to_record().data)
        return result


def checkpoint_program(session_id: str, checkpoint: Checkpoint) -> Program[None]:
    """Append ``checkpoint`` to the log."""
    yield Append(check_session_id(session_id), [checkpoint.to_record()])
