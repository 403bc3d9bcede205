"""The conversation page's data: a session's own log, a page of records at a time, from
its end, each record said for what it is in the view.

The page shows the log, not only the view, so an undone turn and a compaction checkpoint
stay visible (marked, and hidden or shown by a toggle): each record is a message (in the
view, *undone* by a later ``chatkeep.retract``, or *compacted*: older than a checkpoint that
stands for it), a control record (undo, checkpoint, edit, fork, forked, ...) or a damaged
record. Which is which is found walking the page backward as the core's view does (a
retract skips back to its target; an honoured checkpoint keeps its last ``keep`` messages
and stands for everything older); where that walk stands at the page's first record goes
into the link to the page before (:class:`WalkState`), so an older page needs no read of
the newer records. A fork's messages before the fork point live in its parent: the page
links there, at the message the fork continues from.

Costs: the log's length by O(log n) one-record reads (one read of two records when the
app saw the session before and nothing was appended since: :class:`Known`), one read of the
page's records, one of the log's first :data:`~chatkeep.core.metadata.HEAD` records (for
the title and the creation time; not when :class:`Known` holds) and at most one of two
records (the running count at the log's end): a 10,000-record session opens with the same
reads as a 50-record one, plus ~15 probes the first time. The session's view is never
walked (the message count is shown only when the log's end proves it; the sessions page's
count may walk, within the core's bound).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from chatkeep.core import Record, Store
from chatkeep.core.metadata import HEAD, _title_program
from chatkeep.core.views import LogEntry, decode_log
from chatkeep.core.views._control import CHECKPOINT, FORK, FORKED, RETRACT, SPLICE
from chatkeep.core.views._count import marked_count_program
from chatkeep.core.views._program import Read, arun
from chatkeep.core.views._walk import probe_length

__all__ = ["PAGE_SIZE", "LogPage", "Shown", "WalkState", "log_page"]

#: Records per page.
PAGE_SIZE = 50

#: What a record is in the view (:attr:`Shown.status`).
IN_VIEW = "view"
UNDONE = "undone"
COMPACTED = "compacted"


@dataclass(frozen=True)
class WalkState:
    """Where the backward walk stands between two pages: inside an undone span (until the
    record ``undo_target``), how many more view messages an honoured checkpoint keeps
    (``kept``; ``None``: no checkpoint met; 0: everything older is compacted), and a
    checkpoint met last on the newer page, honoured if the next record is ``covers``
    (it keeps ``covers_keep``)."""

    undo_target: str | None = None
    kept: int | None = None
    covers: str | None = None
    covers_keep: int = 0


@dataclass(frozen=True)
class Shown:
    """One record of the page and its status (:data:`IN_VIEW`, :data:`UNDONE`,
    :data:`COMPACTED`)."""

    entry: LogEntry
    status: str = IN_VIEW

    @property
    def control(self) -> Mapping[str, Any]:
        """The control record's fields (``{}`` for a message or a damaged record)."""
        return self.entry.control or {}


@dataclass(frozen=True)
class Header:
    """What the page's head says of the session, found without walking its log: the first
    record's time, the last record's time, the title the sessions page shows (the first
    user message of the conversation's first records, a fork's from its root), and
    the view's message count when the log's end proves it (a running count, see
    :mod:`chatkeep.core.metadata`), else ``None``."""

    created_at: datetime | None
    updated_at: datetime | None
    title: str | None
    messages: int | None


@dataclass
class LogPage:
    """A page of a session's log: records ``start`` to ``stop`` (absolute positions) of a
    log of ``length`` records, oldest first, and the walk's state before ``start``."""

    session_id: str
    length: int
    start: int
    stop: int
    records: list[Shown] = field(default_factory=list)
    older: WalkState = field(default_factory=WalkState)
    header: Header = field(default_factory=lambda: Header(None, None, None, None))
    #: What the next page of this session may start from (see :class:`Known`).
    known: Known | None = None

    @property
    def fork_of(self) -> Mapping[str, Any] | None:
        """The ``chatkeep.fork`` record this log starts with (on its first page), if any."""
        if self.start == 0 and self.records and self.records[0].entry.kind == FORK:
            return self.records[0].control
        return None


def _walk(entries: list[LogEntry], state: WalkState) -> tuple[list[Shown], WalkState]:
    """Each entry's status, walking newest first from ``state``; the state after the
    oldest."""
    undo_target, kept = state.undo_target, state.kept
    shown: list[Shown] = []
    pending: Mapping[str, Any] | None = None
    if state.covers is not None:
        pending = {"covers": state.covers, "keep": state.covers_keep}
    for entry in reversed(entries):
        if pending is not None:
            if entry.record_id == pending.get("covers") and kept is None:
                keep = pending.get("keep")
                kept = keep if isinstance(keep, int) and keep >= 0 else 0
            pending = None
        if undo_target is not None:
            shown.append(Shown(entry, UNDONE))
            if entry.record_id == undo_target:
                undo_target = None
            continue
        if entry.is_message:
            if kept == 0:
                shown.append(Shown(entry, COMPACTED))
                continue
            if kept is not None:
                kept -= 1
            shown.append(Shown(entry, IN_VIEW))
            continue
        if entry.kind == RETRACT and isinstance(entry.control, Mapping):
            target = entry.control.get("target")
            undo_target = target if isinstance(target, str) else None
        elif entry.kind == CHECKPOINT and isinstance(entry.control, Mapping):
            pending = entry.control
        shown.append(Shown(entry, IN_VIEW))
    shown.reverse()
    if pending is not None:
        keep = pending.get("keep")
        covers = pending.get("covers")
        return shown, WalkState(
            undo_target,
            kept,
            covers if isinstance(covers, str) else None,
            keep if isinstance(keep, int) and keep >= 0 else 0,
        )
    return shown, WalkState(undo_target, kept)


@dataclass(frozen=True)
class Known:
    """What an earlier page of a session found that stays true while its log only grows:
    its length then, its last record's id, its creation time and title (from its head)."""

    length: int
    last_id: str
    created_at: datetime | None
    title: str | None


def _length(
    session_id: str, known: Known | None
) -> Any:  # a Program[tuple[int, Record | None, bool]]
    """The log's length, its last record, and whether ``known`` still holds (nothing was
    appended since, and its last record is the same): one read of two records then, else
    the O(log n) probe."""
    if known is not None and known.length > 0:
        got: list[Record] = yield Read(session_id, known.length - 1, known.length + 1)
        if len(got) == 1 and got[0].id == known.last_id:
            return known.length, got[0], True
    length, last = yield from probe_length(session_id)
    return length, last, False


def _program(
    session_id: str, before: int | None, state: WalkState, size: int, known: Known | None
) -> Any:  # a Program[LogPage]
    length, last, same = yield from _length(session_id, known)
    stop = length if before is None else max(0, min(before, length))
    start = max(0, stop - size)
    if stop <= start or last is None:
        return LogPage(session_id, length, start, stop)
    records: list[Record] = yield Read(session_id, start, stop)
    entries = decode_log(records, start)
    shown, older = _walk(entries, state if before is not None else WalkState())
    if same and known is not None:
        created_at, title = known.created_at, known.title
    else:
        head_records = records[:HEAD]
        if start > 0:
            head_records = yield Read(session_id, 0, HEAD)
        head = decode_log(head_records, 0)
        # The conversation's title as the sessions page shows it (a fork's is its root's).
        title = yield from _title_program(session_id, head_records)
        created_at = head[0].stored_at if head else None
    messages = yield from marked_count_program(session_id, last, None)
    (newest,) = decode_log([last], length - 1)
    header = Header(created_at, newest.stored_at, title, messages)
    page = LogPage(session_id, length, start, start + len(records), shown, older, header)
    page.known = Known(length, last.id, created_at, title)
    return page


async def log_page(
    store: Store,
    session_id: str,
    *,
    before: int | None = None,
    state: WalkState | None = None,
    size: int = PAGE_SIZE,
    known: Known | None = None,
) -> LogPage:
    """The page of ``size`` records ending right before position ``before`` (``None``: the
    log's end), with ``state`` the walk's state there (from the newer page's link);
    ``known``: what an earlier page of the session found (:attr:`LogPage.known`)."""
    program = _program(session_id, before, state or WalkState(), size, known)
    page: LogPage = await arun(store, program)
    return page


def page_of(position: int, size: int = PAGE_SIZE) -> int:
    """The ``before`` of a page that shows ``position`` near its end."""
    return position + 1 + min(size // 4, 10)


KINDS_SHOWN = {
    RETRACT: "undo",
    CHECKPOINT: "checkpoint",
    SPLICE: "edit",
    FORK: "fork",
    FORKED: "forked",
}
