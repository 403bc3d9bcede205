"""A conversation's log operations, as core store programs (one definition serves the
blocking and the awaited path; :mod:`chatkeep.core.views` runs them).

A conversation is one chatkeep session whose *view* is always the conversation's current
history (the chain of entries ending at its record's head): a save that extends the
history appends its entries; one that rewrites it or moves the head back (``branch``)
first appends a ``chatkeep.retract`` of the entries it leaves (or, when those are not
plain records of the log, a ``chatkeep.checkpoint`` holding the history it goes on from);
a fork starts with a ``chatkeep.fork`` link into the log that holds its first entries.
Nothing stored is rewritten, so every entry stays readable by id, and chatkeep's own
readers see the conversation as Pydantic AI does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
)

from chatkeep.core import AppendConflict, CorruptRecord, Message, Record
from chatkeep.core.metadata import utc_stamp
from chatkeep.core.views import Checkpoint, ViewBuilder
from chatkeep.core.views._control import FORK, FORKED, RETRACT, control_record
from chatkeep.core.views._erase import delete_program
from chatkeep.core.views._program import Append, AppendIf, Op, Program, Read
from chatkeep.core.views._walk import find_record, walk_chain, walk_from

from .convert import (
    Corrupt,
    copy_for_checkpoint,
    entries_of_records,
    entry_of_message,
    entry_of_record,
    entry_records,
    record_to_json,
    state_of_record,
    state_record,
)

__all__ = [
    "Head",
    "Missing",
    "delete_conversation_program",
    "entry_program",
    "head_program",
    "history_program",
    "tail_entries",
    "write_program",
]

#: How often a write re-reads and retries after another writer got in between without
#: changing the conversation (a fork registering itself, say).
RETRIES = 64
#: Records read from the end of a log to find the conversation's record (its last record
#: holds it, unless forks registered themselves since); a conversation this short is read
#: whole by that one read.
_TAIL = 16
#: An unlimited history first reads this many records from the end.
_FULL_CHUNK = 2048


@dataclass(frozen=True)
class Head:
    """What the end of a conversation's log says."""

    #: The conversation's record; ``None``: none is stored (never saved, or deleted).
    record: ConversationRecord | None
    #: The id of the log's last record (``None``: the log is empty).
    last_id: str | None
    #: The newest state is a deletion marker (the log is being erased, or cannot be).
    deleted: bool = False
    #: The records the read found at the end of the log, and whether they are all of it:
    #: the history ending at a head among them never changes (entries are immutable), so a
    #: load reads it from here instead of reading again.
    tail: tuple[Record, ...] = ()
    whole: bool = False


class Missing(LookupError):
    """An entry a write builds on is in none of the sessions searched."""

    def __init__(self, entry_id: str) -> None:
        self.entry_id = entry_id
        super().__init__(entry_id)


def _corrupt(session_id: str, position: int, record_id: str | None, exc: Corrupt) -> CorruptRecord:
    return CorruptRecord(session_id, position, str(exc), record_id)


def head_program(session_id: str) -> Program[Head]:
    """The conversation's record, read from the end of its log (one small tail read)."""
    size = _TAIL
    while True:
        records: list[Record] = yield Read(session_id, -size)
        for index in range(len(records) - 1, -1, -1):
            try:
                state = state_of_record(records[index])
            except Corrupt as exc:
                raise _corrupt(session_id, index - len(records), records[index].id, exc) from None
            if state is not None:
                last = records[-1].id
                if state[0] == "deleted":
                    return Head(None, last, deleted=True)
                return Head(state[1], last, tail=tuple(records), whole=len(records) < size)
        if len(records) < size:
            return Head(None, records[-1].id if records else None)
        size *= 8


def tail_entries(
    session_id: str, head: Head, head_id: str, limit: int | None
) -> list[ConversationEntry] | None:
    """The history ending at ``head_id`` from the records ``head`` was read with, when they
    hold it (plain entry records ending at ``head_id``: all of the log, or ``limit`` of
    them); ``None`` otherwise. No store read."""
    records = head.tail
    if not records or records[-1].id != head_id:
        return None
    if limit is not None and len(records) >= limit:
        records = records[-limit:]
    elif not head.whole:
        return None
    return _plain_entries(session_id, records)


def _plain_entries(session_id: str, records: Sequence[Record]) -> list[ConversationEntry] | None:
    """The entries of ``records`` when every one is a plain entry record (then they are the
    end of the view as they are); ``None`` otherwise."""
    try:
        return entries_of_records(records)
    except Corrupt as exc:
        index = exc.args[1] if len(exc.args) > 1 else 0
        raise _corrupt(session_id, index - len(records), records[index].id, exc) from None


def _entries(session_id: str, messages: Sequence[Message]) -> list[ConversationEntry]:
    """The entries of a view's messages (messages other chatkeep writers added to the
    session are not entries and are left out)."""
    entries = []
    for message in messages:
        try:
            entry = entry_of_message(message)
        except Corrupt as exc:
            raise _corrupt(session_id, -1, message.message_id, exc) from None
        if entry is not None:
            entries.append(entry)
    return entries


def _view(
    session_id: str, limit: int | None = None, *, track: bool = False
) -> Program[ViewBuilder]:
    builder = ViewBuilder(limit, track_stored=track)
    yield from walk_chain(builder, session_id)
    return builder


def _view_at(session_id: str, entry_id: str, limit: int | None) -> Program[list[Message] | None]:
    """The view right after the record ``entry_id`` of ``session_id``'s chain (its log or
    the logs it forked from) was appended, or ``None`` if the chain has no such record."""
    found = yield from find_record(session_id, entry_id)
    if found is None:
        return None
    holder, position = found
    builder = ViewBuilder(limit)
    yield from walk_from(builder, holder, position + 1, entry_id)
    return builder.finish()


def history_program(
    sessions: Sequence[str], head_id: str, limit: int | None, *, at_end: bool
) -> Program[list[ConversationEntry] | None]:
    """The history ending at entry ``head_id`` (its last ``limit`` entries), looked for in
    ``sessions`` in turn; ``None`` if none of them holds it.

    With ``at_end`` (the caller believes ``head_id`` ends the first session's view) the
    first try is one tail read: a window of plain entry records ending at the head."""
    for number, session_id in enumerate(sessions):
        if number == 0 and at_end:
            entries = yield from _tail_history(session_id, head_id, limit)
            if entries is not None:
                return entries
        messages = yield from _view_at(session_id, head_id, limit)
        if messages is None:
            continue
        entries = _entries(session_id, messages)
        if entries and entries[-1].id == head_id:
            return entries
    return None


def _tail_history(
    session_id: str, head_id: str, limit: int | None
) -> Program[list[ConversationEntry] | None]:
    size = limit if limit is not None else _FULL_CHUNK
    records: list[Record] = yield Read(session_id, -size)
    if records and records[-1].id == head_id:
        entries = _plain_entries(session_id, records)
        if entries is not None:
            if limit is not None or len(records) < size:
                return entries
            records = yield Read(session_id)
            entries = _plain_entries(session_id, records)
            if entries is not None and records and records[-1].id == head_id:
                return entries
    builder = yield from _view(session_id, limit)
    entries = _entries(session_id, builder.finish())
    if entries and entries[-1].id == head_id:
        return entries
    return None


def entry_program(sessions: Sequence[str], entry_id: str) -> Program[ConversationEntry | None]:
    """The entry ``entry_id``, looked for in ``sessions``' chains in turn; ``None`` if none
    holds it."""
    for session_id in sessions:
        found = yield from find_record(session_id, entry_id)
        if found is None:
            continue
        holder, position = found
        records: list[Record] = yield Read(holder, position, position + 1)
        if not records or records[0].id != entry_id:
            continue  # rewritten meanwhile (a parent erased): look again elsewhere
        try:
            entry = entry_of_record(records[0])
        except Corrupt as exc:
            raise _corrupt(holder, position, entry_id, exc) from None
        if entry is None:  # tagged values: through the codec
            from chatkeep.core.views import parse_entry

            message = parse_entry(records[0].data)
            if isinstance(message, Message):
                message.message_id = message.message_id or entry_id
                entries = _entries(holder, [message])
                entry = entries[0] if entries else None
        if entry is not None:
            return entry
    return None


def write_program(
    session_id: str,
    record: ConversationRecord,
    new_entries: Sequence[ConversationEntry],
    expected_revision: str | None,
    *,
    sources: Sequence[str],
    known: Head | None,
    conditional: bool,
) -> Program[Head]:
    """Store ``record`` and ``new_entries`` in one append that lands only if the log is
    still as read (``conditional``): the revision check, the entries and the record land
    together or not at all. ``sources``: other sessions whose chains may hold the entry the
    history goes on from (the conversation forked from). ``known``: the head this handle
    read last (tried first; a conditional append proves it still current).

    Raises ``ConversationConflict`` (another revision is stored) or :class:`Missing`."""
    record_json = record_to_json(record)
    stamp = utc_stamp()
    for attempt in range(RETRIES):
        head = None
        if attempt == 0 and conditional and known is not None and known.record is not None:
            # Trusted only for the revision expected: the conditional append then proves
            # the log unchanged since it was read; anything else is read afresh.
            head = known if known.record.revision == expected_revision else None
        if head is None:
            head = yield from head_program(session_id)
        current = head.record.revision if head.record is not None else None
        if current != expected_revision:
            raise ConversationConflict(record.conversation_id)
        before, prefix = yield from _plan(session_id, head, record, new_entries, sources)
        if new_entries:
            body = entry_records(new_entries, record=record_json, stored_at=stamp)
        else:
            body = [state_record(record=record_json)]
        batch = [*prefix, *body]
        yield from before
        if conditional:
            try:
                yield AppendIf(session_id, batch, head.last_id)
            except AppendConflict:
                continue
        else:
            yield Append(session_id, batch)
        return Head(record, batch[-1].id)
    raise ConversationConflict(record.conversation_id)


def _plan(
    session_id: str,
    head: Head,
    record: ConversationRecord,
    new_entries: Sequence[ConversationEntry],
    sources: Sequence[str],
) -> Program[tuple[list[Op], list[Record]]]:
    """What to append before the entries so the view becomes the new history: nothing
    (the history grows), a fork link (a new conversation going on from another's entry),
    a retract (the history goes back to an entry of the view) or a checkpoint (it goes
    on from an entry elsewhere). Also the appends to other logs that come first."""
    base = new_entries[0].parent_id if new_entries else record.head_id
    if head.record is not None and base == head.record.head_id:
        return [], []
    if head.record is None and head.last_id is None:  # a new conversation, an empty log
        if base is None:
            return [], []
        for source in sources:
            found = yield from find_record(source, base)
            if found is None:
                continue
            holder, position = found
            # Registered with the holder first, as chatkeep.core's fork does: deleting it
            # then finds this fork and hands it a copy of what it shares.
            register = Append(
                holder, [control_record(FORKED, child=session_id, position=position + 1)]
            )
            link = control_record(FORK, parent=holder, position=position + 1, anchor=base)
            return [register], [link]
        raise Missing(base)
    builder = yield from _view(session_id, track=True)
    view = builder.finish()
    uncompacted = builder.uncompacted_ids or set()
    ids = [message.message_id for message in view]
    covers = head.last_id
    assert covers is not None  # a non-empty log
    if base is None or base in ids:
        keep = 0 if base is None else ids.index(base) + 1
        if keep == len(view):
            return [], []
        target = view[keep].message_id
        if target is not None and target in uncompacted:
            return [], [control_record(RETRACT, target=target)]
        kept = [copy_for_checkpoint(message) for message in view[:keep]]
        return [], [Checkpoint(covers, 0, kept).to_record()]
    for source in (session_id, *sources):
        chain = yield from _view_at(source, base, None)
        if chain is not None and chain and chain[-1].message_id == base:
            kept = [copy_for_checkpoint(message) for message in chain]
            return [], [Checkpoint(covers, 0, kept).to_record()]
    raise Missing(base)


def delete_conversation_program(
    session_id: str, conversation_id: str, expected_revision: str, *, conditional: bool, erase: bool
) -> Program[None]:
    """Mark the conversation deleted (only if its revision is still ``expected_revision``:
    a conditional append, so a save racing the delete either lands first and makes this
    raise ``ConversationConflict``, or fails), then, with ``erase``, erase its log the way
    ``chatkeep.core.delete_session`` does: forks that read a prefix from it get their own
    copy of that prefix first."""
    for _attempt in range(RETRIES):
        head = yield from head_program(session_id)
        if head.record is None or head.record.revision != expected_revision:
            raise ConversationConflict(conversation_id)
        marker = state_record(record=None)
        if conditional:
            try:
                yield AppendIf(session_id, [marker], head.last_id)
            except AppendConflict:
                continue
        else:
            yield Append(session_id, [marker])
        if erase:
            after = yield from head_program(session_id)
            if after.deleted and after.last_id == marker.id:  # nobody re-created it meanwhile
                yield from delete_program(session_id)
        return
    raise ConversationConflict(conversation_id)
