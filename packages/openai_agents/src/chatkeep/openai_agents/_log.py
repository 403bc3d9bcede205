"""The two log operations a session needs beyond reading and appending, as core store
programs (so one definition serves the blocking and the awaited path):

- :func:`pop_program`: take the newest message out of the view, race-free;
- :func:`hide_program`: empty the view of a store that cannot ``delete``.

They are built from chatkeep.core's view internals (the backward walk, the view builder,
the ``AppendIf`` operation), the same ones ``undo`` uses, so the view they change is
exactly the view every other chatkeep reader sees.
"""

from __future__ import annotations

from chatkeep.core import AppendConflict, Message, Record, ViewError
from chatkeep.core.metadata import CountMark
from chatkeep.core.views import Checkpoint, Control, ViewBuilder, parse_entry
from chatkeep.core.views._control import CHECKPOINT, RETRACT, SPLICE, control_record
from chatkeep.core.views._count import tail_count_program
from chatkeep.core.views._ops import view_program
from chatkeep.core.views._program import Append, AppendIf, Program, Read
from chatkeep.core.views._walk import walk_chain

__all__ = ["hide_program", "pop_program"]

#: How often an operation re-reads and retries after another writer got in between.
RETRIES = 64
_MESSAGE_HEAD = b'{"type":"message"'
_CHECK_TAIL = 16


class _NewestMessage(ViewBuilder):
    """A view builder for the newest message that also notes whether the walk passed a
    compaction checkpoint on the way (a retract reaching behind one would undo it)."""

    def __init__(self) -> None:
        super().__init__(1, track_stored=True)
        self.passed_checkpoint = False

    def feed(self, record_id: str, data: bytes, session_id: str, position: int) -> None:  # type: ignore[override]
        if not data.startswith(_MESSAGE_HEAD) and not self.passed_checkpoint:
            try:
                entry = parse_entry(data)
            except ValueError:
                pass  # the builder reports it as CorruptRecord, with its position
            else:
                # An in-place edit (chatkeep.splice) counts too: a retract reaching
                # behind one would undo it.
                self.passed_checkpoint = isinstance(entry, Control) and entry.kind in (
                    CHECKPOINT,
                    SPLICE,
                )
        super().feed(record_id, data, session_id, position)


def _pop_once(session_id: str, conditional: bool) -> Program[Message | None]:
    newest = _NewestMessage()
    yield from walk_chain(newest, session_id)
    messages = newest.finish()
    if not messages:
        return None
    last = messages[-1]
    after = newest.newest_record_id
    stored = newest.stored_ids or set()
    # The running count of the view after the record (chatkeep.core.metadata), when the
    # read proved the count before it.
    before = newest.verified_count() if newest.truncated else len(messages)
    if before is None and newest.newest_mark is not None:
        # The one-message walk stopped short of the mark's check: check it with a read.
        proven = yield from tail_count_program(session_id)
        if proven is not None and proven[1] == after:
            before = proven[0]
    if last.message_id in stored and not newest.passed_checkpoint:
        # The usual case: one retract record; the view skips from it back to the message.
        if before is None or after is None:
            record = control_record(RETRACT, target=last.message_id)
        else:
            count = CountMark(before - 1, after, 1).to_json()
            record = control_record(RETRACT, target=last.message_id, count=count)
    else:
        # The newest message exists only in a compaction checkpoint, or lies behind one:
        # say what the view is now with a checkpoint of the view minus that message.
        whole = yield from view_program(session_id)
        if whole.newest_record_id != after:
            raise AppendConflict(session_id, after)  # changed meanwhile: read again
        if not whole.messages or whole.newest_record_id is None:
            return None
        last = whole.messages[-1]
        checkpoint = Checkpoint.between(whole.messages, whole.messages[:-1], whole.newest_record_id)
        assert checkpoint is not None
        record = checkpoint.to_record(CountMark(checkpoint.view_length, whole.newest_record_id, 1))
    if conditional:
        yield AppendIf(session_id, [record], after)
    else:
        yield Append(session_id, [record])
    return last


def pop_program(session_id: str, *, conditional: bool) -> Program[Message | None]:
    """Take the newest message of the view out of it (one control record appended; the log
    keeps everything) and return it, or ``None`` when the view is empty.

    With ``conditional`` (the store declares it) the record is appended only if nothing
    was appended since the view was read, and the read is retried otherwise: concurrent
    pops, from any number of processes, each get a different message.
    """
    for _attempt in range(RETRIES):
        try:
            return (yield from _pop_once(session_id, conditional))
        except AppendConflict:
            continue
    raise ViewError(
        f"session {session_id!r} kept changing while pop_item was retried {RETRIES} times; "
        "nothing was removed"
    )


def hide_program(session_id: str, *, conditional: bool) -> Program[None]:
    """Empty the view without deleting anything: one checkpoint saying "nothing before
    me". Used by stores without the ``delete`` capability (the log keeps the history)."""
    for _attempt in range(RETRIES):
        read = yield from view_program(session_id, 1)
        if not read.messages or read.newest_record_id is None:
            return
        # An empty view: its running count is 0 (chatkeep.core.metadata).
        record = Checkpoint(read.newest_record_id, 0, []).to_record(
            CountMark(0, read.newest_record_id, 1)
        )
        if not conditional:
            # Without a conditional append a writer may land between the read and this
            # checkpoint, which then covers nothing (it is ignored): check, and go again.
            yield Append(session_id, [record])
            tail: list[Record] = yield Read(session_id, -_CHECK_TAIL)
            ids = [entry.id for entry in tail]
            if record.id not in ids:
                return  # many records came after it: whatever they are, they are newer
            index = ids.index(record.id)
            if index > 0 and ids[index - 1] == read.newest_record_id:
                return
            continue
        try:
            yield AppendIf(session_id, [record], read.newest_record_id)
        except AppendConflict:
            continue
        return
    raise ViewError(
        f"session {session_id!r} kept changing while it was being cleared {RETRIES} times"
    )
