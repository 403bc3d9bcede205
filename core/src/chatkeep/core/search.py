"""Full-text search across a store's conversations, on every backend.

::

    from chatkeep.core import open_store
    from chatkeep.core.search import search

    store = open_store("sqlite:///chats.db")
    for hit in search(store, 'oslo invoice -draft', limit=20):
        print(hit.stored_at, hit.session_id, hit.role, hit.marked())

The query syntax (words, ``"phrases"``, ``-excluded``; case and accents ignored) is
:mod:`chatkeep.core.search_text`'s. A search looks at what a user sees: each session's
view (undo, forks, compaction and edits applied) through
:func:`~chatkeep.core.views.read_view`'s own walk, message text, tool calls' names and
arguments, tool results. ``include_retracted=True`` also looks at the messages of a
session's own log that its view no longer shows (undone, edited away).

How it finds them:

- **The scan** (every backend): sessions are visited newest first from the store's
  ``recent`` index where it has one (else in listing order), each session's view read,
  matched and dropped before the next: memory is one session's view, hits stream out as
  they are found, and stopping the iteration (``break``, ``close()``, cancelling the
  task) stops the scan. ``since`` ends it at the first session last written before
  ``since``. Through the encryption wrapper the records are decrypted by the wrapper's
  ``read``, in this process.
- **The index** (a backend declaring :data:`~chatkeep.core.store.FULLTEXT` whose index
  is complete): the backend names, in the same order, only the sessions holding a record
  with every word of the query (and every session that starts with a fork); the core
  then reads and matches those sessions' views exactly as the scan does. So an indexed
  search returns exactly what the scan returns, at the cost of the sessions it shows.

Hits come newest first: sessions in the order above, a session's hits from the end of
its view back. A hit's ``position`` is the message's index in the view (``None`` for a
retracted one).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import cached_property
from typing import Any

from .errors import InvalidOption
from .messages import Message
from .records import Record
from .search_text import SNIPPET_LENGTH, FoldedText, Query, fold, message_text, parse_query
from .store import FULLTEXT, RECENT, RECENT_PAGE, Store
from .views._builder import ViewBuilder
from .views._control import parse_stamped
from .views._log import alist_conversations, is_internal_session, list_conversations, parse_time
from .views._program import Program, Read, arun, run
from .views._walk import walk_chain

__all__ = ["SearchHit", "SearchProgress", "asearch", "search"]

# The storage time as the codec writes it into a message record (see metadata); found
# without decoding the record. An escaped quote in a text can never produce it.
_STAMP = re.compile(rb'"chatkeep\.stored_at":"([^"\\]{1,64})"')


@dataclass(frozen=True)
class SearchHit:
    """One message that matched.

    ``position``: the message's index in its session's view (0 is the oldest); ``None``
    for a retracted message (``retracted`` is then ``True``). ``stored_at``: when its
    record was stored (UTC), ``None`` when unknown. ``snippet``: about
    :data:`~chatkeep.core.search_text.SNIPPET_LENGTH` characters of the message's
    searchable text, on one line, around the first match; ``highlights``: the
    ``(start, end)`` spans of the snippet that matched (for marking them).
    """

    session_id: str
    message_id: str
    role: str
    author: str | None
    stored_at: datetime | None
    position: int | None
    snippet: str
    highlights: tuple[tuple[int, int], ...] = ()
    retracted: bool = False

    def marked(self, start: str = "[", end: str = "]") -> str:
        """The snippet with each highlight between ``start`` and ``end``."""
        pieces: list[str] = []
        last = 0
        for first, stop in self.highlights:
            pieces += [self.snippet[last:first], start, self.snippet[first:stop], end]
            last = stop
        pieces.append(self.snippet[last:])
        return "".join(pieces)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (what ``chatkeep search --json`` prints per line)."""
        return {
            "session_id": self.session_id,
            "message_id": self.message_id,
            "role": self.role,
            "author": self.author,
            "stored_at": None if self.stored_at is None else self.stored_at.isoformat(),
            "position": self.position,
            "retracted": self.retracted,
            "snippet": self.snippet,
            "highlights": [list(span) for span in self.highlights],
        }


@dataclass
class SearchProgress:
    """How far a search got, handed to its ``progress`` callback after each session."""

    sessions: int = 0
    messages: int = 0
    #: Characters of searchable text matched against (decoded, decrypted).
    characters: int = 0
    hits: int = 0
    indexed: bool = False
    started: datetime = field(default_factory=lambda: datetime.now(timezone.utc))


# -- one session --------------------------------------------------------------------------


class _TimedView:
    """A view builder that also notes each fed record's storage time (the sink of a walk)."""

    def __init__(self) -> None:
        self.builder = ViewBuilder()
        self.stamps: dict[str, bytes] = {}
        self.done = self.builder.done

    @property
    def skipping(self) -> bool:
        return self.builder.skipping

    def wanted(self) -> int:
        return self.builder.wanted()

    def feed(self, record_id: str, data: bytes, session_id: str, position: int) -> None:
        found = _STAMP.search(data) if type(data) is bytes else None
        if found is not None:
            self.stamps[record_id] = found.group(1)
        self.builder.feed(record_id, data, session_id, position)
        self.done = self.builder.done


@dataclass(frozen=True)
class _Filter:
    query: Query
    roles: frozenset[str] | None
    since: datetime | None
    until: datetime | None
    include_retracted: bool

    @cached_property
    def required(self) -> tuple[str, ...]:
        return self.query.required

    def admits(self, message: Message, at: datetime | None) -> bool:
        if self.roles is not None and str(message.role) not in self.roles:
            return False
        if self.since is not None and (at is None or at < self.since):
            return False
        return not (self.until is not None and (at is None or at >= self.until))


def _hit(
    session_id: str,
    message: Message,
    at: datetime | None,
    position: int | None,
    *,
    wanted: _Filter,
    progress: SearchProgress,
) -> SearchHit | None:
    progress.messages += 1
    if not wanted.admits(message, at):
        return None
    plain = message_text(message)
    progress.characters += len(plain)
    # Every word a match needs is a substring of the folded text: most messages fail
    # that cheap test and are never cut into words.
    folded = fold(plain)
    if not all(word in folded for word in wanted.required):
        return None
    text = FoldedText(plain)
    marks = wanted.query.match(text)
    if marks is None:
        return None
    snippet, highlights = _snippet(text, marks)
    return SearchHit(
        session_id,
        message.message_id or "",
        str(message.role),
        message.author_name,
        at,
        position,
        snippet,
        highlights,
        retracted=position is None,
    )


def _snippet(
    text: FoldedText, marks: Sequence[tuple[int, int]]
) -> tuple[str, tuple[tuple[int, int], ...]]:
    """About :data:`SNIPPET_LENGTH` characters of the original text around the first
    mark, on one line, and the marks inside it."""
    spans = [text.original_span(start, end) for start, end in marks]
    original = text.original
    first = spans[0][0]
    begin = max(0, first - SNIPPET_LENGTH // 3)
    if begin > 0:  # start at a word boundary
        space = original.rfind(" ", 0, begin + 1)
        begin = space + 1 if space >= first - SNIPPET_LENGTH // 2 else begin
    end = min(len(original), begin + SNIPPET_LENGTH)
    lead = "…" if begin > 0 else ""
    tail = "…" if end < len(original) else ""
    # One line: every whitespace character becomes a space (same length: spans hold).
    window = re.sub(r"\s", " ", original[begin:end])
    shift = len(lead) - begin
    inside = tuple(
        (max(start, begin) + shift, min(stop, end) + shift)
        for start, stop in spans
        if start < end and stop > begin
    )
    return lead + window + tail, inside


def _session_program(
    session_id: str, wanted: _Filter, progress: SearchProgress
) -> Program[list[SearchHit]]:
    """The hits of one session, newest first."""
    sink = _TimedView()
    yield from walk_chain(sink, session_id)
    view = sink.builder.finish()
    hits: list[SearchHit] = []
    shown: set[str] = set()
    for position in range(len(view) - 1, -1, -1):
        message = view[position]
        record_id = message.message_id or ""
        shown.add(record_id)
        stamp = sink.stamps.get(record_id)
        at = parse_time(stamp.decode("utf-8", "replace")) if stamp is not None else None
        hit = _hit(session_id, message, at, position, wanted=wanted, progress=progress)
        if hit is not None:
            hits.append(hit)
    if wanted.include_retracted:
        records: list[Record] = yield Read(session_id)
        for record in reversed(records):
            if record.id in shown:
                continue
            try:
                entry, stamp_text = parse_stamped(record.data)
            except ValueError:
                continue  # a damaged record is the view's to report, and it did not
            if not isinstance(entry, Message):
                continue
            if entry.message_id is None:
                entry.message_id = record.id
            at = parse_time(stamp_text)
            hit = _hit(session_id, entry, at, None, wanted=wanted, progress=progress)
            if hit is not None:
                hits.append(hit)
    return hits


# -- which sessions, in which order -------------------------------------------------------

_Page = Callable[[tuple[float, str] | None, int], list[tuple[str, float]]]


def _paged(page: _Page, since: float | None) -> Iterator[str]:
    before: tuple[float, str] | None = None
    while True:
        pairs = page(before, RECENT_PAGE)
        for session_id, updated in pairs:
            if since is not None and updated < since:
                return
            if not is_internal_session(session_id):
                yield session_id
        if len(pairs) < RECENT_PAGE:
            return
        session_id, updated = pairs[-1]
        before = (updated, session_id)


def _sessions(
    store: Store, query: Query, prefix: str | None, since: float | None, indexed: bool
) -> Iterator[str]:
    if indexed:
        required = list(query.required)
        return _paged(
            lambda before, size: store.fulltext_page(required, prefix, before, size), since
        )
    if store.supports(RECENT):
        return _paged(lambda before, size: store.recent_page(prefix, before, size), since)
    return list_conversations(store, prefix)


async def _asessions(
    store: Store, query: Query, prefix: str | None, since: float | None, indexed: bool
) -> AsyncIterator[str]:
    if not indexed and not store.supports(RECENT):
        async for session_id in alist_conversations(store, prefix):
            yield session_id
        return
    required = list(query.required)
    before: tuple[float, str] | None = None
    while True:
        if indexed:
            pairs = await store.afulltext_page(required, prefix, before, RECENT_PAGE)
        else:
            pairs = await store.arecent_page(prefix, before, RECENT_PAGE)
        for session_id, updated in pairs:
            if since is not None and updated < since:
                return
            if not is_internal_session(session_id):
                yield session_id
        if len(pairs) < RECENT_PAGE:
            return
        session_id, updated = pairs[-1]
        before = (updated, session_id)


# -- the API ------------------------------------------------------------------------------


def _moment(name: str, value: object) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        return datetime.now(timezone.utc) - value
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
    raise InvalidOption(f"{name} must be a datetime, a timedelta (that long ago) or None")


def _check(  # noqa: PLR0917 (the public arguments, checked in one place)
    query: str,
    prefix: object,
    since: object,
    until: object,
    roles: object,
    limit: object,
    include_retracted: object,
) -> tuple[_Filter, int | None]:
    parsed = parse_query(query)
    if prefix is not None and type(prefix) is not str:
        raise InvalidOption(f"prefix must be a str or None, not {type(prefix).__name__}")
    if limit is not None and (type(limit) is not int or limit < 0):
        raise InvalidOption(f"limit must be a non-negative int or None, not {limit!r}")
    if type(include_retracted) is not bool:
        raise InvalidOption(f"include_retracted must be a bool, not {include_retracted!r}")
    if roles is not None:
        if isinstance(roles, str) or not all(isinstance(r, str) for r in roles):  # type: ignore[attr-defined]
            raise InvalidOption("roles must be a list of role names (['user', 'tool']) or None")
        roles = frozenset(str(r) for r in roles)  # type: ignore[attr-defined]
    wanted = _Filter(
        parsed, roles, _moment("since", since), _moment("until", until), include_retracted
    )
    return wanted, limit


def _use_index(store: Store, use_index: object) -> bool:
    if type(use_index) is not bool:
        raise InvalidOption(f"use_index must be a bool, not {use_index!r}")
    return use_index and store.supports(FULLTEXT) and store.fulltext_ready()


def search(
    store: Store,
    query: str,
    *,
    prefix: str | None = None,
    since: datetime | timedelta | None = None,
    until: datetime | timedelta | None = None,
    roles: Sequence[str] | None = None,
    limit: int | None = 20,
    include_retracted: bool = False,
    use_index: bool = True,
    progress: Callable[[SearchProgress], None] | None = None,
) -> Iterator[SearchHit]:
    """The messages of ``store``'s conversations that match ``query``, newest first (see
    the module docstring), as an iterator that reads as it goes.

    ``prefix``: only sessions whose id starts with it. ``since``/``until``: only messages
    stored at or after ``since`` and before ``until`` (datetimes, naive ones read as UTC,
    or timedeltas meaning that long ago); a message with no storage time is then left
    out. ``roles``: only messages of these roles. ``limit``: at most this many hits
    (``None``: all). ``use_index=False`` scans even where the store keeps an index.
    ``progress`` is called after each session with a :class:`SearchProgress`.

    Bad arguments (an empty query, a negative limit, ...) raise
    :class:`~chatkeep.core.errors.InvalidOption` at the call; a store that cannot list
    its sessions raises :class:`~chatkeep.core.errors.CapabilityMissing` there too.
    """
    wanted, limit = _check(query, prefix, since, until, roles, limit, include_retracted)
    indexed = _use_index(store, use_index)
    since_key = None if wanted.since is None else wanted.since.timestamp()
    sessions = _sessions(store, wanted.query, prefix, since_key, indexed)
    return _search(store, sessions, wanted=wanted, limit=limit, indexed=indexed, progress=progress)


def _search(
    store: Store,
    sessions: Iterator[str],
    *,
    wanted: _Filter,
    limit: int | None,
    indexed: bool,
    progress: Callable[[SearchProgress], None] | None,
) -> Iterator[SearchHit]:
    state = SearchProgress(indexed=indexed)
    if limit == 0:
        return
    for session_id in sessions:
        hits = run(store, _session_program(session_id, wanted, state))
        state.sessions += 1
        for hit in hits:
            yield hit
            state.hits += 1
            if limit is not None and state.hits >= limit:
                return
        if progress is not None:
            progress(state)


def asearch(
    store: Store,
    query: str,
    *,
    prefix: str | None = None,
    since: datetime | timedelta | None = None,
    until: datetime | timedelta | None = None,
    roles: Sequence[str] | None = None,
    limit: int | None = 20,
    include_retracted: bool = False,
    use_index: bool = True,
    progress: Callable[[SearchProgress], None] | None = None,
) -> AsyncIterator[SearchHit]:
    """Async :func:`search` (``async for hit in asearch(store, "oslo invoice")``);
    cancelling the task that iterates stops the scan."""
    wanted, limit = _check(query, prefix, since, until, roles, limit, include_retracted)
    if type(use_index) is not bool:
        raise InvalidOption(f"use_index must be a bool, not {use_index!r}")
    return _asearch(
        store,
        wanted=wanted,
        prefix=prefix,
        limit=limit,
        use_index=use_index,
        progress=progress,
    )


async def _asearch(
    store: Store,
    *,
    wanted: _Filter,
    prefix: str | None,
    limit: int | None,
    use_index: bool,
    progress: Callable[[SearchProgress], None] | None,
) -> AsyncIterator[SearchHit]:
    indexed = use_index and store.supports(FULLTEXT) and await store.afulltext_ready()
    state = SearchProgress(indexed=indexed)
    if limit == 0:
        return
    since_key = None if wanted.since is None else wanted.since.timestamp()
    async for session_id in _asessions(store, wanted.query, prefix, since_key, indexed):
        hits = await arun(store, _session_program(session_id, wanted, state))
        state.sessions += 1
        for hit in hits:
            yield hit
            state.hits += 1
            if limit is not None and state.hits >= limit:
                return
        if progress is not None:
            progress(state)
