"""The view of a log, built from its records fed newest first (no I/O here).

Walking a log backward makes every view cheap to read: a window of N messages stops after
about N records; a retract makes the walk skip the retracted span; a checkpoint ends the
walk (its messages stand for everything before it). Checkpoints nest: a checkpoint that
keeps the last ``k`` messages of the view before it opens a *frame* that ends after ``k``
more messages, and each frame's own messages are emitted when it ends.

An in-place edit (``chatkeep.splice``) does not end the walk: it becomes a *stage* that the
older messages flow through on their way out: it lets its ``keep`` messages pass, then puts
its own messages, then drops the next ``drop`` ones, then passes everything. A stage met
later in the walk (an older edit) sits closer to the log, so older edits apply first, as
they did when they were written. A checkpoint met while a stage is open becomes a stage too
(one that drops everything after its messages, so the walk ends there).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ..codec import plain_decoder
from ..errors import CorruptRecord
from ..messages import Message
from ..records import Record
from ._control import (
    CHECKPOINT,
    COUNT_KEY,
    MESSAGE_HEAD,
    RETRACT,
    SPLICE,
    STORED_AT_KEY,
    Control,
    CountMark,
    count_mark,
    parse_entry,
)

__all__ = ["UNLIMITED", "ViewBuilder", "build_view"]

#: The window of a view read without a limit.
UNLIMITED = sys.maxsize
#: A running count is checked only for batches of at most this many records.
MAX_MARK_BATCH = 4096
# A stage's ``drop`` when it drops everything after its messages (a checkpoint's stage).
_ALL = sys.maxsize


class _Frame:
    """A view level: the consumer's window, or a checkpoint's ``keep`` window."""

    __slots__ = ("deadline", "floor", "prefix")

    def __init__(self, deadline: int, floor: int, prefix: list[Message]) -> None:
        self.deadline = deadline  # message count at which this window is full
        self.floor = floor  # the smallest deadline of this frame and the frames around it
        self.prefix = prefix  # emitted (newest first) when the frame ends


class _Stage:
    """An edit the older messages flow through (see the module docstring)."""

    __slots__ = ("drop", "insert", "keep")

    def __init__(self, keep: int, drop: int, insert: list[Message]) -> None:
        self.keep = keep  # messages still to pass before the edit point
        self.drop = drop  # messages still to drop after it (_ALL: every one)
        self.insert: list[Message] | None = insert  # put at the edit point; None once put


class ViewBuilder:
    """Turns records, fed newest first with :meth:`feed`, into the view's messages.

    ``limit`` keeps only the newest ``limit`` messages (the walk is :attr:`done` once it has
    them). :meth:`finish` returns the messages oldest first.
    """

    def __init__(
        self, limit: int | None = None, *, track_stored: bool = False, count_only: bool = False
    ) -> None:
        deadline = UNLIMITED if limit is None else limit
        self._out: list[Message] = []  # newest first
        self._frames = [_Frame(deadline, deadline, [])]
        self._skip_to: str | None = None
        self._retract: tuple[str, int, str] | None = None
        self._pending: Control | None = None
        self._stages: list[_Stage] = []  # open edits, the newest in the log first
        #: True once the view is complete (no more records needed).
        self.done = deadline == 0
        #: True when the walk stopped because ``limit`` messages were found.
        self.truncated = False
        #: The id of the newest record fed (the log's last record).
        self.newest_record_id: str | None = None
        #: How many records were fed.
        self.records_fed = 0
        #: The bytes of the records fed (data only), what a cache of the view holds about.
        self.bytes_fed = 0
        #: The data of the newest record fed, when it was bytes.
        self.newest_record_data: bytes | None = None
        #: The running count the newest record carries, if it is a message with one
        #: (unchecked: see :meth:`verified_count`).
        self.newest_mark: CountMark | None = None
        # (session, id, position) of the newest records fed, as far back as the mark's check
        # needs (its batch and the record before it).
        self._trail: list[tuple[str, str, int]] = []
        self._trail_wanted = 0
        #: With ``track_stored``: ids of the messages that came from message records (not
        #: copies held inside a checkpoint).
        self.stored_ids: set[str] | None = set() if track_stored else None
        #: With ``track_stored``: those of :attr:`stored_ids` fed before any checkpoint or
        #: edit record (no compaction or edit between them and the log's end: retracting
        #: back to one removes exactly the view's messages from it on).
        self.uncompacted_ids: set[str] | None = set() if track_stored else None
        self._checkpoint_fed = False
        # count_only: message records the codec wrote are not decoded; each stands in the
        # view as an empty placeholder message (for counting the view, not for reading it).
        self._count_only = count_only

    @property
    def emitted(self) -> int:
        """How many view messages were found so far (a lower bound of the view's length
        while the walk is not over: a stopped walk never takes one back)."""
        return len(self._out)

    @property
    def skipping(self) -> bool:
        """Whether the walk is inside a retracted span."""
        return self._skip_to is not None

    def wanted(self) -> int:
        """How many more messages the innermost open window can take."""
        if self.done:
            return 0
        wanted = max(self._frames[-1].floor - len(self._out), 1)
        for stage in self._stages:  # messages an edit drops are read too
            if stage.drop != _ALL:
                wanted += stage.drop
        return wanted

    def feed(
        self, record_id: str, data: bytes | Mapping[str, Any], session_id: str, position: int
    ) -> None:
        """Take the next older record. ``position`` is only used in error messages."""
        if self.done:
            raise RuntimeError("the view is complete; no more records are needed")
        self.records_fed += 1
        if type(data) is bytes:
            self.bytes_fed += len(data)
        if self.newest_record_id is None:
            self.newest_record_id = record_id
            if type(data) is bytes:
                self.newest_record_data = data
            mark = count_mark(data)
            if mark is not None and mark.k <= MAX_MARK_BATCH:
                self.newest_mark = mark
                self._trail_wanted = mark.k + 1
        if len(self._trail) < self._trail_wanted:
            self._trail.append((session_id, record_id, position))
        pending = self._pending
        if pending is not None:
            self._pending = None
            # Honour a checkpoint only when it directly follows what it covers: one written
            # from a stale view (another writer appended in between) would hide messages.
            if record_id == pending["covers"]:
                self._open(pending)
                if self.done:
                    return
        if self._skip_to is not None:
            if record_id == self._skip_to:
                self._skip_to = self._retract = None
            return
        if self._count_only and type(data) is bytes and data.startswith(MESSAGE_HEAD):
            self._emit(Message("message", message_id=record_id))
            return
        try:
            entry = parse_entry(data)
        except ValueError as exc:
            raise CorruptRecord(session_id, position, str(exc), record_id) from exc
        if isinstance(entry, Message):
            if entry.message_id is None:
                entry.message_id = record_id or None
            elif entry.message_id != record_id:
                raise CorruptRecord(
                    session_id,
                    position,
                    f"message id {entry.message_id!r} does not match its record",
                    record_id,
                )
            if self.stored_ids is not None:
                self.stored_ids.add(record_id)
                if not self._checkpoint_fed and self.uncompacted_ids is not None:
                    self.uncompacted_ids.add(record_id)
            self._emit(entry)
            return
        if entry.kind == RETRACT:
            self._skip_to = entry["target"]
            self._retract = (session_id, position, record_id)
        elif entry.kind in (CHECKPOINT, SPLICE):
            self._pending = entry
            self._checkpoint_fed = True
        # fork, forked, base, rebased, rebuild: log structure; state: an adapter's own
        # data. Neither is part of the view.

    def feed_many(self, records: Sequence[Record], session_id: str, base: int) -> None:
        """:meth:`feed` each of ``records`` from the last to the first (they are in log
        order; ``records[i]`` is at position ``base + i``), stopping once :attr:`done`.

        The same result as feeding them one by one, in one loop: a message record in the
        codec's usual shape, met where nothing special is under way (no pending checkpoint,
        no retracted span), is decoded in one step and pushed here; every other record goes
        through :meth:`feed`."""
        decode = plain_decoder()
        index = len(records) - 1
        while index >= 0:
            if (
                self._pending is None
                and self._skip_to is None
                and self.newest_record_id is not None
                and not self._count_only
                and not self._stages
                and not self.done
            ):
                index = self._feed_plain(records, index, session_id, base, decode)
                if index < 0 or self.done:
                    return
            record = records[index]
            self.feed(record.id, record.data, session_id, base + index)
            if self.done:
                return
            index -= 1

    def _feed_plain(
        self,
        records: Sequence[Record],
        index: int,
        session_id: str,
        base: int,
        decode: Callable[[bytes], Message | None],
    ) -> int:
        """:meth:`feed_many`'s one tight loop: take the run of message records in the
        codec's usual shape from ``records[index]`` backward, while nothing special is under
        way (only :meth:`feed` changes that, so what this reads of the builder stays as it
        is). Returns the index of the first record it did not take (-1: all taken)."""
        head = MESSAGE_HEAD
        out = self._out
        append = out.append
        trail = self._trail
        trail_wanted = self._trail_wanted
        floor = self._frames[-1].floor - 1  # room before _push must decide
        stored = self.stored_ids
        uncompacted = self.uncompacted_ids if not self._checkpoint_fed else None
        fed = nbytes = 0
        try:
            while index >= 0:
                record_id, data = records[index]
                if type(data) is not bytes or not data.startswith(head):
                    break
                message = decode(data)
                if message is None:
                    break
                fed += 1
                nbytes += len(data)
                if len(trail) < trail_wanted:
                    trail.append((session_id, record_id, base + index))
                if message.message_id is None:
                    message.message_id = record_id or None
                elif message.message_id != record_id:
                    raise CorruptRecord(
                        session_id,
                        base + index,
                        f"message id {message.message_id!r} does not match its record",
                        record_id,
                    )
                properties = message.additional_properties
                if properties and (STORED_AT_KEY in properties or COUNT_KEY in properties):
                    # The decoder's own dict, held by nobody else: edit it in place.
                    properties.pop(STORED_AT_KEY, None)
                    properties.pop(COUNT_KEY, None)
                if stored is not None:
                    stored.add(record_id)
                    if uncompacted is not None:
                        uncompacted.add(record_id)
                index -= 1
                if len(out) < floor:
                    append(message)
                elif not self._push(message):
                    self._close()
                    break
        finally:
            self.records_fed += fed
            self.bytes_fed += nbytes
        return index

    def verified_count(self) -> int | None:
        """The view's message count from the newest record's running count, when the
        records fed prove it: the record ``k + 1`` back from it (in the same log) is the
        mark's ``after``, or, for ``after=None``, its batch's first record is the log's
        first (position 0). ``None`` when no mark, or the check failed or was not reached."""
        mark = self.newest_mark
        trail = self._trail
        if mark is None or not trail:
            return None
        own = trail[0][0]
        if mark.after is None:
            if len(trail) < mark.k:
                return None
            session, _, position = trail[mark.k - 1]
            return mark.n if session == own and position == 0 else None
        if len(trail) <= mark.k:
            return None
        session, record_id, _ = trail[mark.k]
        return mark.n if session == own and record_id == mark.after else None

    def finish(self) -> list[Message]:
        """The view, oldest message first. Call once, after the last record (or when done)."""
        if not self.done:
            if self._skip_to is not None and self._retract is not None:
                session_id, position, record_id = self._retract
                raise CorruptRecord(
                    session_id,
                    position,
                    f"retracts message {self._skip_to!r}, which is not in the log",
                    record_id,
                )
            self._pending = None  # a checkpoint with nothing before it covers nothing
            self._drain()
        self._out.reverse()
        return self._out

    # -- frames ---------------------------------------------------------------------------

    def _open(self, checkpoint: Control) -> None:
        if checkpoint.kind == SPLICE or self._stages:
            drop = checkpoint["drop"] if checkpoint.kind == SPLICE else _ALL
            self._stages.append(_Stage(checkpoint["keep"], drop, list(checkpoint["messages"])))
            if checkpoint["keep"] == 0:
                self._flow([(len(self._stages) - 1, self._put(len(self._stages) - 1))])
            return
        deadline = len(self._out) + checkpoint["keep"]
        floor = min(deadline, self._frames[-1].floor)
        self._frames.append(_Frame(deadline, floor, list(checkpoint["messages"])))
        if checkpoint["keep"] == 0:
            self._close()

    # -- stages (in-place edits) ------------------------------------------------------------

    def _emit(self, message: Message) -> None:
        """A message of the log, on its way out (through the open edits, if any)."""
        if self._stages:
            self._flow([(len(self._stages), iter((message,)))])
        elif not self._push(message):
            self._close()

    def _put(self, index: int) -> Iterator[Message]:
        """Stage ``index`` reached its edit point: its messages, newest first (they go on
        from the stage outward), and from now on it drops."""
        stage = self._stages[index]
        inserted = stage.insert or []
        stage.insert = None
        return reversed(inserted)

    def _flow(self, work: list[tuple[int, Iterator[Message]]]) -> None:
        """Move messages outward: each ``(level, messages)`` goes through the stages before
        ``level`` (``level - 1`` down to 0), then to the view. A stage whose edit point a
        message reaches puts its own messages right after that one (newest first)."""
        stages = self._stages
        while work and not self.done:
            level, items = work[-1]
            message = next(items, None)
            if message is None:
                work.pop()
                continue
            reached = []
            index = level - 1
            while index >= 0:
                stage = stages[index]
                if stage.insert is not None:
                    stage.keep -= 1
                    if stage.keep <= 0:
                        reached.append(index)
                elif stage.drop > 0:
                    stage.drop -= 1
                    message = None
                    break
                index -= 1
            if message is not None and not self._push(message):
                self._close()
                return
            for index in reached:  # the innermost first, so the outermost's go out first
                work.append((index, self._put(index)))
        if self.done:
            return
        for index, stage in enumerate(stages):
            if stage.insert is None and stage.drop == _ALL:
                # A checkpoint's stage put its messages: nothing older is in the view.
                del stages[index:]
                self._drain()
                return
        if any(stage.insert is None and stage.drop == 0 for stage in stages):
            stages[:] = [s for s in stages if s.insert is not None or s.drop > 0]

    def _drain(self) -> None:
        """The log has no more messages for the view: each open edit puts its messages
        (an edit whose ``keep`` was longer than the view puts them first), innermost
        first; then the frames close."""
        stages = self._stages
        while stages and not self.done:
            index = len(stages) - 1
            inserted = self._put(index) if stages[index].insert is not None else iter(())
            del stages[index]
            self._flow([(index, inserted)])
        if not self.done:
            self._close()

    def _push(self, message: Message) -> bool:
        """Emit one message; False when that filled a window (its level is over)."""
        out = self._out
        out.append(message)
        frames = self._frames
        if len(out) < frames[-1].floor:
            return True
        count = len(out)
        index = next(i for i, frame in enumerate(frames) if frame.deadline <= count)
        if index == 0:
            self.truncated = True
        del frames[index + 1 :]  # windows inside a full one end without their messages
        return False

    def _close(self) -> None:
        """The innermost level is over, so every level is: a checkpoint ends the walk of
        the level that holds it. Emit each frame's messages, innermost first."""
        frames = self._frames
        while frames:
            frame = frames.pop()
            for message in reversed(frame.prefix):
                if not self._push(message):
                    break
        self.done = True


def build_view(
    session_id: str,
    entries: Sequence[Record | Mapping[str, Any]],
    *,
    limit: int | None = None,
) -> list[Message]:
    """The view of a log held in memory rather than in a store, oldest message first.

    ``entries`` is the log, oldest first: :class:`~chatkeep.core.Record` objects as a store
    returns them, or their JSON already parsed (a message as ``message_to_dict`` writes it,
    its ``message_id`` the record id; a control record with its record id under ``"id"``;
    an ``"id"`` beside a message's ``message_id`` is that record id too, not a field of the
    message, and is left out of it).
    Walks backward like :func:`read_view`, so a window of ``limit`` messages reads about
    that many entries. ``session_id`` only names the log in errors.
    """
    builder = ViewBuilder(limit)
    for position in range(len(entries) - 1, -1, -1):
        if builder.done:  # limit=0 is done before the first entry
            break
        entry = entries[position]
        if isinstance(entry, Record):
            builder.feed(entry.id, entry.data, session_id, position)
        else:
            record_id = entry.get("message_id") or entry.get("id") or ""
            if "id" in entry and "message_id" in entry:  # the log's record id, not the message's
                entry = {key: value for key, value in entry.items() if key != "id"}
            builder.feed(record_id, entry, session_id, position)
    return builder.finish()
