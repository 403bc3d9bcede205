"""Session metadata: when a session was created and last appended to, how many messages
its view has, and a title, at a cost that does not grow with the transcript.

::

    from chatkeep.core import open_store
    from chatkeep.core.metadata import describe_session, list_session_infos

    store = open_store("sqlite:///chats.db")
    info = describe_session(store, "chat-1")     # SessionInfo(id=..., messages=..., ...)
    for info in list_session_infos(store, limit=20):   # the 20 most recently updated
        print(info.updated_at, info.messages, info.title)

Where the times come from: every record the core writes carries the time it was stored
(UTC, ISO 8601). :class:`~chatkeep.core.HistoryProvider` writes it into each message record
under the reserved key ``"chatkeep.stored_at"`` of the message's ``additional_properties``
(where MAF's message shape has room for application data, so MAF's ``Message.from_dict``
still reads the record); the core's control records (undo, fork, checkpoint) carry it in a
``stored_at`` field. The messages a caller passes in are never changed, and reading takes
the key out again: no view, log entry or framework adapter ever sees it in a message
(:attr:`chatkeep.core.views.LogEntry.stored_at` shows it per record). Records written
without it (by older versions, by hand, or through a framework adapter that encodes its
messages itself) have no time: ``None``.

Costs, per session described:

- ``created_at`` and ``title``: one read of the first :data:`HEAD` records of the log (and
  one more per fork level, for the title, which comes from the conversation's root).
- ``updated_at``: one read of the last record (none when the log is shorter than
  :data:`HEAD`).
- ``messages``: when the log ends with a message that carries a verified running count
  (see below), that count: one read of at most two records. Otherwise the view's own
  backward walk (undo, checkpoints and forks applied, as
  :func:`~chatkeep.core.views.read_view` sees it) with message records counted, not
  decoded, over at most :data:`COUNT_WALK` records. The walk stops early at the start of
  the log or at the newest compaction checkpoint, so a session kept compacted (a reducer
  with ``AFTER_MESSAGE_ADDED``, or :func:`~chatkeep.core.views.compact`) is counted
  exactly whatever the transcript's length. Past the bound the walk stops and ``messages``
  is a lower bound (the messages found in those records), with ``messages_exact=False``;
  ``describe_session(store, id, exact=True)`` walks the whole view instead (its cost grows
  with the log).

The running count: when :class:`~chatkeep.core.HistoryProvider`'s last load proved the
view's message count (it read the whole view, or the log ended with a verified running
count), :meth:`~chatkeep.core.HistoryProvider.save` writes into the batch's last message,
under the reserved key ``"chatkeep.count"`` (:data:`COUNT_KEY`), ``{"n": <the view's
message count after the batch>, "after": <the id of the log's last record before it>, "k":
<the batch's record count>}`` (a :class:`CountMark`). The core's control records carry the
same object in their own ``count`` field when their writer knows the view's count after
them:

- an undo's retract (:func:`~chatkeep.core.views.undo`): the count its read proved minus
  the messages it retracts, unless a checkpoint lies between its target and the end (the
  retract then undoes the compaction too); ``k`` is 1, ``after`` the record it read last;
- a fork's first record (:func:`~chatkeep.core.views.fork`): the parent's count at the fork
  point, when a verified mark on the parent's record there proves it (``after=None``: it
  starts the child's log), so the child's count is the parent's at the fork plus its own;
- the ``forked`` registration the fork appends to its parent: the parent's count at its
  end, unchanged (when its last record proved it);
- a checkpoint: its messages plus its ``keep`` (:func:`~chatkeep.core.views.compact`,
  which read the whole view; a provider's ``AFTER_MESSAGE_ADDED`` batch, whose ``k``
  counts the messages and the checkpoint, when its load proved the count). A "clear"
  without delete (an empty checkpoint) counts 0.

Every mark, wherever it is, is trusted only when the log holds it in place: the record
``k + 1`` back from the one carrying it is ``after`` (for ``after=None``: its batch starts
the log). A write by anyone else between the read and the write, a record appended after
it (the log then does not end with it), a mark with a field of the wrong type or range, a
record of an unknown kind or a forged mark all make :func:`describe_session` fall back to
the walk, never report a wrong count. Reading takes the key out like the storage time. A
writer that only ever loads a window (``max_messages``) keeps an exact count as long as
each load sees a verified count at the end of the log (the window must hold the batch and
the record before it); a write through anything that writes no mark breaks the chain
until a load reads the whole view again. A verified count walks nothing, so it does not
check the view for damage.

Writers that encode their own records (the framework adapters) write the same mark:
:func:`read_view_counted` (or :func:`tail_running_count` for a plain tail already read)
gives the :class:`RunningCount` a read proved, :meth:`RunningCount.mark` puts it on the
batch's last message, and :meth:`RunningCount.extended` is the count after the batch, for
the next one; :func:`running_count` reads it from the end of the log instead (at most two
small reads). :func:`utc_stamp` is the time as the core stores it under
:data:`STORED_AT_KEY`.

A damaged session (a record that is not a chatkeep record, a retract of a message not in
the log, a fork whose parent lost its records) makes :func:`describe_session` raise
:class:`~chatkeep.core.errors.CorruptRecord`; :func:`list_session_infos` lists it instead,
with ``damaged`` set to the error's message, ``messages=0`` and ``messages_exact=False``,
and goes on with the next session.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from .errors import CorruptRecord, InvalidOption, SessionNotFound
from .messages import Message
from .records import Record, check_session_id
from .store import RECENT, Store
from .views import alist_conversations, is_internal_session, list_conversations
from .views._builder import ViewBuilder
from .views._control import (
    BASE,
    COUNT_KEY,
    FORK,
    STORED_AT_KEY,
    Control,
    CountMark,
    count_mark,
    parse_stamped,
    utc_stamp,
)
from .views._count import marked_count_program, tail_count_program
from .views._log import parse_time
from .views._ops import view_program
from .views._program import Program, Read, arun, run
from .views._walk import walk_chain

__all__ = [
    "COUNT_KEY",
    "COUNT_WALK",
    "HEAD",
    "STORED_AT_KEY",
    "TITLE_LENGTH",
    "CountMark",
    "RunningCount",
    "SessionInfo",
    "adescribe_session",
    "alist_session_infos",
    "aread_view_counted",
    "arunning_count",
    "describe_session",
    "list_session_infos",
    "read_view_counted",
    "running_count",
    "tail_running_count",
    "utc_stamp",
]

#: How many records are read from the start of a log for ``created_at`` and ``title``.
HEAD = 8
#: A title is at most this many characters (a longer one ends with ``"…"``).
TITLE_LENGTH = 80
#: At most this many records are walked back to count a view's messages (unless ``exact``).
COUNT_WALK = 2000
# A title follows forks to the conversation's root, but never further than this.
_MAX_TITLE_DEPTH = 64


@dataclass(frozen=True)
class SessionInfo:
    """What a listing shows of one session.

    ``created_at``: when its first record was stored; ``updated_at``: when its last record
    was (a message, or an undo, fork or checkpoint); both UTC, ``None`` for records written
    without a time. ``messages``: how many messages its view has (undo, checkpoints and
    forks applied: what :func:`~chatkeep.core.views.read_view` returns). ``title``: the text
    of the conversation's first user message on one line, at most :data:`TITLE_LENGTH`
    characters; ``None`` when none is found in the first :data:`HEAD` records. The title
    is the first one ever stored, even if that turn was undone since.

    ``messages_exact``: ``False`` when ``messages`` is only a lower bound (the count's walk
    stopped after :data:`COUNT_WALK` records; the CLI prints ``2000+``). ``damaged``:
    ``None``, or, for a session :func:`list_session_infos` could not count (its
    :class:`~chatkeep.core.errors.CorruptRecord`), that error's message; ``messages`` is
    then 0 and ``messages_exact`` ``False``.
    """

    id: str
    created_at: datetime | None
    updated_at: datetime | None
    messages: int
    title: str | None
    messages_exact: bool = True
    damaged: str | None = None


class _Bounded:
    """A sink that passes at most ``bound`` records on to ``inner`` (a view counter)."""

    skipping = False

    def __init__(self, inner: ViewBuilder, bound: int) -> None:
        self.inner = inner
        self.remaining = bound
        self.done = inner.done or bound <= 0
        #: True when the walk stopped because the bound was reached.
        self.cut = self.done and not inner.done

    def wanted(self) -> int:
        return self.inner.wanted()

    def feed(self, record_id: str, data: bytes, session_id: str, position: int) -> None:
        self.inner.feed(record_id, data, session_id, position)
        self.skipping = self.inner.skipping
        self.remaining -= 1
        if self.inner.done:
            self.done = True
        elif self.remaining <= 0:
            self.done = self.cut = True


def _title(text: str) -> str | None:
    line = " ".join(text.split())
    if not line:
        return None
    if len(line) > TITLE_LENGTH:
        return line[: TITLE_LENGTH - 1].rstrip() + "…"
    return line


def _parse(record: Record) -> tuple[Message | Control | None, datetime | None]:
    """What a record is and when it was stored; a damaged record is neither (the count's
    walk reports damage, this only looks for a time and a title)."""
    try:
        entry, stamp = parse_stamped(record.data)
    except ValueError:
        return None, None
    return entry, parse_time(stamp)


def _first_user_text(records: list[Record]) -> str | None:
    for record in records:
        entry, _ = _parse(record)
        if isinstance(entry, Message) and entry.role == "user":
            title = _title(entry.text)
            if title is not None:
                return title
    return None


def _title_program(session_id: str, head: list[Record]) -> Program[str | None]:
    """The first user message's text of the conversation: searched in the root of the
    fork chain first (within each fork's prefix), then down to ``session_id``'s own log."""
    chain = [head]
    records = head
    for _depth in range(_MAX_TITLE_DEPTH):
        if not records:
            break
        fork, _ = _parse(records[0])
        if not isinstance(fork, Control) or fork.kind != FORK:
            break
        parent: str = fork["parent"]
        end: int = fork["position"]
        if end == 0:
            break
        parent_head: list[Record] = yield Read(parent, 0, min(HEAD, end))
        if parent_head:
            base, _ = _parse(parent_head[0])
            if isinstance(base, Control) and base.kind == BASE:
                # Made self-contained since: its records moved by the base's shift.
                end += base["shift"]
                parent_head = yield Read(parent, 0, min(HEAD, end))
        records = parent_head[:end]
        chain.append(records)
    for records in reversed(chain):
        title = _first_user_text(records)
        if title is not None:
            return title
    return None


def _count_program(session_id: str, exact: bool) -> Program[tuple[int, bool]]:
    """The view's message count and whether it is exact (at most :data:`COUNT_WALK`
    records walked unless ``exact``)."""
    counter = ViewBuilder(count_only=True)
    if exact:
        yield from walk_chain(counter, session_id)
        return len(counter.finish()), True
    bounded = _Bounded(counter, COUNT_WALK)
    yield from walk_chain(bounded, session_id)
    if bounded.cut:
        return counter.emitted, False
    return len(counter.finish()), True


def _describe_program(
    session_id: str, exact: bool = False, listing: bool = False
) -> Program[SessionInfo]:
    session_id = check_session_id(session_id)
    head: list[Record] = yield Read(session_id, 0, HEAD)
    if not head:
        raise SessionNotFound(session_id)
    _, created_at = _parse(head[0])
    title = yield from _title_program(session_id, head)
    whole: list[Record] | None = None
    if len(head) < HEAD:
        last = head[-1]
        whole = head
    else:
        tail: list[Record] = yield Read(session_id, -1)
        last = tail[-1] if tail else head[-1]
    _, updated_at = _parse(last)
    if not exact:
        marked = yield from marked_count_program(session_id, last, whole)
        if marked is not None:
            return SessionInfo(session_id, created_at, updated_at, marked, title)
    try:
        count, count_exact = yield from _count_program(session_id, exact)
    except CorruptRecord as error:
        if not listing:
            raise
        return SessionInfo(
            session_id, created_at, updated_at, 0, title, messages_exact=False, damaged=str(error)
        )
    return SessionInfo(session_id, created_at, updated_at, count, title, count_exact)


def describe_session(store: Store, session_id: str, exact: bool = False) -> SessionInfo:
    """The :class:`SessionInfo` of one session. Raises
    :class:`~chatkeep.core.errors.SessionNotFound` when it has no records, and
    :class:`~chatkeep.core.errors.CorruptRecord` when its view cannot be read (within the
    :data:`COUNT_WALK` records walked, or all of it with ``exact``).

    ``exact=False`` (the default) uses the verified running count at the end of the log if
    there is one (see :mod:`chatkeep.core.metadata`), else counts the messages in at most
    :data:`COUNT_WALK` records from the end (``messages_exact=False`` when that was not all
    of the view); ``exact=True`` walks the whole view, a cost that grows with an
    uncompacted log."""
    if type(exact) is not bool:
        raise InvalidOption(f"exact must be a bool, not {exact!r}")
    return run(store, _describe_program(session_id, exact))


async def adescribe_session(store: Store, session_id: str, exact: bool = False) -> SessionInfo:
    """Async :func:`describe_session`."""
    if type(exact) is not bool:
        raise InvalidOption(f"exact must be a bool, not {exact!r}")
    return await arun(store, _describe_program(session_id, exact))


# -- the running count, for writers that encode their own records -------------------------


@dataclass(frozen=True)
class RunningCount:
    """What a writer knows of a session's end: its view has ``n`` messages and its log's
    last record is ``last`` (``None``: the log is empty). Hand it to :meth:`mark` for the
    batch appended right after that record, then keep :meth:`extended` for the next one.

    A stale one (another writer appended since it was read) is harmless: the mark it
    writes names ``last`` as the record before its batch, the log then says otherwise,
    and :func:`describe_session` falls back to its walk."""

    n: int
    last: str | None

    def mark(self, messages: Sequence[Message], records: int | None = None) -> list[Message]:
        """``messages`` (a batch about to be appended, every one a message record) with the
        last one carrying the running count under :data:`COUNT_KEY` (a copy; the others
        unchanged). ``records``: the batch's record count when it also holds records of
        its own after the messages' (default: one per message). ``[]`` stays ``[]``."""
        if not messages:
            return []
        count = CountMark(self.n + len(messages), self.last, records or len(messages))
        last = messages[-1]
        properties = {**last.additional_properties, COUNT_KEY: count.to_json()}
        return [*messages[:-1], replace(last, additional_properties=properties)]

    def extended(self, records: Sequence[Record], messages: int | None = None) -> RunningCount:
        """The count once ``records`` (``messages`` of them messages; default: all) were
        appended after :attr:`last`."""
        if not records:
            return self
        added = len(records) if messages is None else messages
        return RunningCount(self.n + added, records[-1].id)


def _running(found: tuple[int, str | None] | None) -> RunningCount | None:
    return None if found is None else RunningCount(*found)


def running_count(store: Store, session_id: str) -> RunningCount | None:
    """The session's :class:`RunningCount` when the end of its log proves it (an empty log;
    a last record with a verified running count), else ``None``: at most two reads, of one
    record then two, whatever the session's length."""
    return _running(run(store, tail_count_program(check_session_id(session_id))))


async def arunning_count(store: Store, session_id: str) -> RunningCount | None:
    """Async :func:`running_count`."""
    return _running(await arun(store, tail_count_program(check_session_id(session_id))))


def tail_running_count(records: Sequence[Record], *, whole: bool) -> RunningCount | None:
    """The :class:`RunningCount` the last records of a log prove, with no read: ``records``
    are the log's last records, oldest first (``whole``: all of it), every one a message
    record (a plain tail, as a fast reader that found no control record has). ``None``
    when they prove nothing (a partial tail whose last record has no verified count)."""
    if whole:
        return RunningCount(len(records), records[-1].id if records else None)
    if not records:
        return None
    mark = count_mark(records[-1].data)
    if mark is None or mark.after is None:
        return None  # after=None needs the start of the log, which a partial tail lacks
    index = len(records) - 1 - mark.k
    if index < 0 or records[index].id != mark.after:
        return None
    return RunningCount(mark.n, records[-1].id)


def _counted(
    session_id: str, limit: int | None
) -> Program[tuple[list[Message], RunningCount | None]]:
    read = yield from view_program(session_id, limit)
    counted = None if read.count is None else RunningCount(read.count, read.newest_record_id)
    return read.messages, counted


def read_view_counted(
    store: Store, session_id: str, *, limit: int | None = None
) -> tuple[list[Message], RunningCount | None]:
    """:func:`~chatkeep.core.views.read_view` and, when the read proves it (it read the
    whole view, or the log ends with a verified running count), the session's
    :class:`RunningCount`; else ``None``. The same reads as ``read_view``."""
    return run(store, _counted(session_id, limit))


async def aread_view_counted(
    store: Store, session_id: str, *, limit: int | None = None
) -> tuple[list[Message], RunningCount | None]:
    """Async :func:`read_view_counted`."""
    return await arun(store, _counted(session_id, limit))


def _check_listing(prefix: object, limit: object, newest_first: object) -> None:
    if prefix is not None and type(prefix) is not str:
        raise InvalidOption(f"prefix must be a str or None, not {type(prefix).__name__}")
    if limit is not None and (type(limit) is not int or limit < 0):
        raise InvalidOption(f"limit must be a non-negative int or None, not {limit!r}")
    if type(newest_first) is not bool:
        raise InvalidOption(f"newest_first must be a bool, not {newest_first!r}")


def _updated_key(tail: list[Record]) -> float:
    """The sort key of a session by its last record: its time, or before every time."""
    _, at = _parse(tail[-1])
    return at.timestamp() if at is not None else -math.inf


_Ranked = tuple[float, str]


def _keep(ranked: list[_Ranked], item: _Ranked, limit: int | None) -> None:
    """Keep the ``limit`` newest items seen (a min-heap: the oldest kept is on top)."""
    if limit is None:
        ranked.append(item)
    elif len(ranked) < limit:
        heapq.heappush(ranked, item)
    elif item > ranked[0]:
        heapq.heapreplace(ranked, item)


def list_session_infos(
    store: Store,
    *,
    prefix: str | None = None,
    limit: int | None = None,
    newest_first: bool = True,
) -> Iterator[SessionInfo]:
    """The :class:`SessionInfo` of the store's conversations (those whose id starts with
    ``prefix``; never the core's internal ``chatkeep.tmp.*`` sessions), at most ``limit``.

    ``newest_first=True`` (the default): most recently updated first (ties by id,
    descending). On a store with the ``recent`` capability
    (:meth:`~chatkeep.core.Store.recent_sessions`) the order comes from the store's index
    of last appends: one index query per :data:`~chatkeep.core.store.RECENT_PAGE`
    sessions, then each session described as it comes, streamed, whatever ``limit`` is:
    the cost and the memory are those of the sessions shown, however many the store holds.
    Elsewhere it needs every session's last record: one one-record read per listed
    session, ordered by the records' own times (sessions without a time last), with only
    the ``limit`` best kept in memory (a heap), then each of those described. On a million
    sessions that is a million tail reads, however few are shown; ``limit=None`` also
    keeps a million (time, id) pairs.
    ``newest_first=False``: the store's listing order, streamed, each session described as
    it comes, stopping after ``limit``: the cost is that of the sessions shown.

    A damaged session is listed with ``damaged`` set (see :class:`SessionInfo`), never
    raised. Errors in the arguments and a store without ``list_sessions``
    (:class:`~chatkeep.core.errors.CapabilityMissing`) raise at the call. A session deleted
    while the listing runs is left out.
    """
    _check_listing(prefix, limit, newest_first)
    if limit == 0:
        return iter(())
    if newest_first and store.supports(RECENT):
        return _in_order(store, _recent_ids(store.recent_sessions(prefix)), limit)
    ids = list_conversations(store, prefix)
    if not newest_first:
        return _in_order(store, ids, limit)
    return _newest(store, ids, limit)


def _recent_ids(pairs: Iterator[tuple[str, datetime]]) -> Iterator[str]:
    """The conversations' ids of a ``recent_sessions`` listing (no internal session)."""
    for session_id, _updated in pairs:
        if not is_internal_session(session_id):
            yield session_id


async def _arecent_ids(pairs: AsyncIterator[tuple[str, datetime]]) -> AsyncIterator[str]:
    async for session_id, _updated in pairs:
        if not is_internal_session(session_id):
            yield session_id


def _in_order(store: Store, ids: Iterator[str], limit: int | None) -> Iterator[SessionInfo]:
    shown = 0
    for session_id in ids:
        try:
            info = run(store, _describe_program(session_id, listing=True))
        except SessionNotFound:
            continue
        yield info
        shown += 1
        if limit is not None and shown >= limit:
            return


def _newest(store: Store, ids: Iterator[str], limit: int | None) -> Iterator[SessionInfo]:
    ranked: list[_Ranked] = []
    for session_id in ids:
        tail = store.read(session_id, -1)
        if tail:
            _keep(ranked, (_updated_key(tail), session_id), limit)
    for _key, session_id in sorted(ranked, reverse=True):
        try:
            yield run(store, _describe_program(session_id, listing=True))
        except SessionNotFound:
            continue


def alist_session_infos(
    store: Store,
    *,
    prefix: str | None = None,
    limit: int | None = None,
    newest_first: bool = True,
) -> AsyncIterator[SessionInfo]:
    """Async :func:`list_session_infos` (``async for info in alist_session_infos(store)``)."""
    _check_listing(prefix, limit, newest_first)
    if limit != 0 and newest_first and store.supports(RECENT):
        recent = _arecent_ids(store.arecent_sessions(prefix))
        return _alisting(store, recent, limit, newest_first=False)
    ids = alist_conversations(store, prefix) if limit != 0 else None
    return _alisting(store, ids, limit, newest_first)


async def _alisting(
    store: Store, ids: AsyncIterator[str] | None, limit: int | None, newest_first: bool
) -> AsyncIterator[SessionInfo]:
    if ids is None:
        return
    if not newest_first:
        shown = 0
        async for session_id in ids:
            try:
                info = await arun(store, _describe_program(session_id, listing=True))
            except SessionNotFound:
                continue
            yield info
            shown += 1
            if limit is not None and shown >= limit:
                return
        return
    ranked: list[_Ranked] = []
    async for session_id in ids:
        tail = await store.aread(session_id, -1)
        if tail:
            _keep(ranked, (_updated_key(tail), session_id), limit)
    for _key, session_id in sorted(ranked, reverse=True):
        try:
            yield await arun(store, _describe_program(session_id, listing=True))
        except SessionNotFound:
            continue
