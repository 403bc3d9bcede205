"""The view of a log, built from its records fed newest first (no I/O here).

Walking a log backward makes every view cheap to read: a window of N messages stops after
about N records; a retract makes the walk skip the retracted span; a checkpoint ends the
walk (its messages stand for everything before it). Checkpoints nest: a checkpoint that
keeps the last ``k`` messages of the view before it opens a *frame* that ends after ``k``
more messages, and each frame's own messages are emitted when it ends.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
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


class _Frame:
    """A view level: the consumer's window, or a checkpoint's ``keep`` window."""

    __slots__ = ("deadline", "floor", "prefix")

    def __init__(self, deadline: int, floor: int, prefix: list[Message]) -> None:
        self.deadline = deadline  # message count at which this window is full
        self.floor = floor  # the smallest deadline of this frame and the frames around it
        self.prefix = prefix  # emitted (newest first) when the frame ends


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
        #: True once the view is complete (no more records needed).
        self.done = deadline == 0
        #: True when the walk stopped because ``limit`` messages were found.
        self.truncated = False
        #: The id of the newest record fed (the log's last record).
        self.newest_record_id: str | None = None
        #: How many records were fed.
        self.records_fed = 0
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
        #: With ``track_stored``: those of :attr:`stored_ids` fed before any checkpoint
        #: record (no compaction between them and the log's end: retracting back to one
        #: removes exactly the view's messages from it on).
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
        return max(self._frames[-1].floor - len(self._out), 1)

    def feed(
        self, record_id: str, data: bytes | Mapping[str, Any], session_id: str, position: int
    ) -> None:
        """Take the next older record. ``position`` is only used in error messages."""
        if self.done:
            raise RuntimeError("the view is complete; no more records are needed")
        self.records_fed += 1
        if self.newest_record_id is None:
            self.newest_record_id = record_id
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
            if not self._push(Message("message", message_id=record_id)):
                self._close()
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
            if not self._push(entry):
                self._close()
            return
        if entry.kind == RETRACT:
            self._skip_to = entry["target"]
            self._retract = (session_id, position, record_id)
        elif entry.kind == CHECKPOINT:
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
        head = MESSAGE_HEAD
        out = self._out
        trail = self._trail
        stored = self.stored_ids
        uncompacted = self.uncompacted_ids
        index = len(records) - 1
        while index >= 0:
            record = records[index]
            data = record.data
            if (
                self._pending is None
                and self._skip_to is None
                and self.newest_record_id is not None
                and not self._count_only
                and type(data) is bytes
                and data.startswith(head)
                and not self.done
            ):
                message = decode(data)
                if message is not None:
                    record_id = record.id
                    self.records_fed += 1
                    if len(trail) < self._trail_wanted:
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
                        if not self._checkpoint_fed and uncompacted is not None:
                            uncompacted.add(record_id)
                    if len(out) + 1 < self._frames[-1].floor:
                        out.append(message)
                    elif not self._push(message):
                        self._close()
                        return
                    index -= 1
                    continue
            self.feed(record.id, data, session_id, base + index)
            if self.done:
                return
            index -= 1

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
            self._close()
        self._out.reverse()
        return self._out

    # -- frames ---------------------------------------------------------------------------

    def _open(self, checkpoint: Control) -> None:
        deadline = len(self._out) + checkpoint["keep"]
        floor = min(deadline, self._frames[-1].floor)
        self._frames.append(_Frame(deadline, floor, list(checkpoint["messages"])))
        if checkpoint["keep"] == 0:
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
