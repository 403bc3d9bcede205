"""The sessions page's data: the newest sessions, one keyset page at a time.

A page is asked for with a cursor, the ``(updated, session id)`` of the last session of the
page before (``None``: the newest). On a store with the ``recent`` capability the backend
answers each page from its own index (:meth:`~chatkeep.core.Store.arecent_page`): one query
and one description per session shown, whatever the store holds. Elsewhere every session's
last record is read to order them (the cost of the core's own newest-first listing, per page).
"""

from __future__ import annotations

import asyncio
import heapq
import math
from dataclasses import dataclass

from chatkeep.core import CorruptRecord, SessionNotFound, Store
from chatkeep.core.metadata import SessionInfo, adescribe_session
from chatkeep.core.store import RECENT
from chatkeep.core.urls import redact_text
from chatkeep.core.views import alist_conversations, is_internal_session
from chatkeep.core.views._control import parse_stamped
from chatkeep.core.views._log import parse_time

__all__ = ["Cursor", "ListedSession", "SessionsPage", "parse_cursor", "sessions_page"]

#: A cursor: ``(updated, session id)`` of the last session already shown.
Cursor = tuple[float, str]


@dataclass(frozen=True)
class ListedSession:
    """One row of the sessions page: what the core says of the session, and its sort key."""

    info: SessionInfo
    updated: float


@dataclass(frozen=True)
class SessionsPage:
    """A page of sessions, newest first, and the cursor of the next (older) page."""

    sessions: list[ListedSession]
    next_cursor: Cursor | None
    indexed: bool  # the order came from the backend's index of last appends


def parse_cursor(text: str | None) -> Cursor | None:
    """``"<seconds>~<session id>"`` (as :func:`format_cursor` writes it) or ``None``.
    Raises ``ValueError`` for anything else."""
    if not text:
        return None
    stamp, tilde, session_id = text.partition("~")
    if not tilde or not session_id:
        raise ValueError("a cursor is <seconds>~<session id>")
    updated = float(stamp)
    if math.isnan(updated):
        raise ValueError("a cursor's time is a number")
    return updated, session_id


def format_cursor(cursor: Cursor) -> str:
    """The query-string form of ``cursor`` (``repr`` keeps the float exact)."""
    return f"{cursor[0]!r}~{cursor[1]}"


async def _describe(store: Store, session_id: str, updated: float) -> ListedSession | None:
    try:
        info = await adescribe_session(store, session_id)
    except SessionNotFound:
        return None  # deleted since the listing saw it
    except CorruptRecord as error:
        info = SessionInfo(session_id, None, None, 0, None, False, redact_text(str(error)))
    return ListedSession(info, updated)


async def _indexed(
    store: Store, prefix: str | None, before: Cursor | None, limit: int
) -> tuple[list[tuple[str, float]], bool]:
    """Up to ``limit`` conversations after ``before`` from the index; whether more follow."""
    found: list[tuple[str, float]] = []
    cursor = before
    while len(found) < limit:
        want = limit + 1 - len(found)
        page = await store.arecent_page(prefix, cursor, want)
        found.extend(pair for pair in page if not is_internal_session(pair[0]))
        if len(page) < want:
            return found[:limit], len(found) > limit
        cursor = (page[-1][1], page[-1][0])
    return found[:limit], True


def _updated(data: bytes) -> float:
    try:
        _, stamp = parse_stamped(data)
    except ValueError:
        return -math.inf
    moment = parse_time(stamp)
    return moment.timestamp() if moment is not None else -math.inf


async def _scanned(
    store: Store, prefix: str | None, before: Cursor | None, limit: int
) -> tuple[list[tuple[str, float]], bool]:
    """The same from every session's last record (no index): keeps the ``limit + 1``
    newest before the cursor in a heap."""
    kept: list[tuple[float, str]] = []
    async for session_id in alist_conversations(store, prefix):
        tail = await store.aread(session_id, -1)
        if not tail:
            continue
        key = (_updated(tail[-1].data), session_id)
        if before is not None and key >= before:
            continue
        if len(kept) <= limit:
            heapq.heappush(kept, key)
        elif key > kept[0]:
            heapq.heapreplace(kept, key)
    ordered = sorted(kept, reverse=True)
    return [(session_id, updated) for updated, session_id in ordered[:limit]], len(ordered) > limit


async def sessions_page(
    store: Store, *, prefix: str | None = None, before: Cursor | None = None, limit: int = 50
) -> SessionsPage:
    """The ``limit`` most recently updated conversations after the cursor ``before``."""
    indexed = store.supports(RECENT)
    pairs, more = await (_indexed if indexed else _scanned)(store, prefix, before, limit)
    # Described side by side: on a server backend the rows' round trips overlap.
    described = await asyncio.gather(*(_describe(store, sid, updated) for sid, updated in pairs))
    rows = [row for row in described if row is not None]
    next_cursor = (pairs[-1][1], pairs[-1][0]) if more and pairs else None
    return SessionsPage(rows, next_cursor, indexed)
