"""Stores that declare ``recent``: the most recently updated sessions from the backend's
own index (``Store.recent_sessions``), newest first, ties by id descending, in keyset pages.

Every test works under a fresh prefix, so other sessions of a shared store (and tests
running beside it) never change what it sees. Times come from the store's clock: the
tests compare orders and time ranges, never exact times.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timezone

import pytest

import chatkeep.core.store as store_module
from chatkeep.core import Store
from chatkeep.core.metadata import list_session_infos

from ..checks import records
from ..hooks import SET_UPDATED
from ._base import ConformanceBase

__all__ = [
    "RecentDeleteTests",
    "RecentSessionsTests",
    "RecentSharedTests",
    "RecentTieTests",
    "RecentTtlTests",
]

#: Allowed difference between the store's clock and this machine's (a server's clock).
_CLOCK_SKEW = 300.0


def _fresh_prefix() -> str:
    return f"ck-r-{uuid.uuid4().hex[:16]}-"


def _recent(store: Store, prefix: str, limit: int | None = None) -> list[tuple[str, datetime]]:
    pairs = list(store.recent_sessions(prefix, limit))
    ids = [session_id for session_id, _ in pairs]
    assert len(ids) == len(set(ids)), f"a session was listed more than once: {ids}"
    keys = [(updated, session_id) for session_id, updated in pairs]
    assert keys == sorted(keys, reverse=True), (
        f"not newest first with ties by id descending: {pairs}"
    )
    for session_id, updated in pairs:
        assert session_id.startswith(prefix), session_id
        assert updated.tzinfo is not None and updated.utcoffset() == timezone.utc.utcoffset(None)
    return pairs


def _ids(store: Store, prefix: str, limit: int | None = None) -> list[str]:
    return [session_id for session_id, _ in _recent(store, prefix, limit)]


class RecentSessionsTests(ConformanceBase):
    """Order after appends, ties, keyset pages, prefixes, deletes and no-op retries."""

    def test_recent_orders_by_last_append(self, chatkeep_store: Store) -> None:
        prefix = _fresh_prefix()
        names = [prefix + name for name in ("c", "a", "d", "b")]
        started = time.time()
        for name in names:
            chatkeep_store.append(name, records(1))
        assert _ids(chatkeep_store, prefix) == names[::-1]
        chatkeep_store.append(names[0], records(1, start=1))  # the oldest becomes the newest
        listed = _recent(chatkeep_store, prefix)
        assert [name for name, _ in listed] == [names[0], names[3], names[2], names[1]]
        for _, updated in listed:
            assert abs(updated.timestamp() - started) < _CLOCK_SKEW, updated
        assert _ids(chatkeep_store, prefix, limit=2) == [names[0], names[3]]
        assert _ids(chatkeep_store, prefix, limit=0) == []
        assert _ids(chatkeep_store, prefix + "zzz") == []

    def test_recent_a_retry_that_stores_nothing_does_not_move(self, chatkeep_store: Store) -> None:
        prefix = _fresh_prefix()
        first, second = prefix + "first", prefix + "second"
        chatkeep_store.append(first, records(2))
        chatkeep_store.append(second, records(1))
        before = dict(_recent(chatkeep_store, prefix))
        chatkeep_store.append(first, records(2))  # every id stored already: a no-op
        chatkeep_store.append(first, records(1, start=1))
        after = dict(_recent(chatkeep_store, prefix))
        assert after == before, "a retry that stored nothing moved the session"
        assert list(after) == [second, first]
        chatkeep_store.append(first, records(3))  # stores record 2: moves
        assert _ids(chatkeep_store, prefix) == [first, second]

    def test_recent_keyset_pages(
        self, chatkeep_store: Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(store_module, "RECENT_PAGE", 3)
        prefix = _fresh_prefix()
        names = [f"{prefix}{n:02d}" for n in range(11)]
        for name in names:
            chatkeep_store.append(name, records(1))
        assert _ids(chatkeep_store, prefix) == names[::-1]  # four pages, the last short
        assert _ids(chatkeep_store, prefix, limit=7) == names[::-1][:7]
        assert _ids(chatkeep_store, prefix, limit=9) == names[::-1][:9]

    def test_recent_ties_are_by_id_descending(self, chatkeep_store: Store) -> None:
        prefix = _fresh_prefix()
        names = [f"{prefix}{n:02d}" for n in range(20)]
        for name in names:
            chatkeep_store.append(name, records(1))
        pairs = _recent(chatkeep_store, prefix)  # checks (updated, id) strictly decreasing
        assert sorted(name for name, _ in pairs) == names
        # The backend hook's cursor is exclusive: from one of its pairs on, only older ones.
        raw = _backend_page(chatkeep_store.backend, prefix, None)
        assert [name for name, _ in raw] == [name for name, _ in pairs]
        session_id, updated = raw[5]
        after = _backend_page(chatkeep_store.backend, prefix, (updated, session_id))
        assert after == raw[6:]

    def test_recent_prefix_filters(self, chatkeep_store: Store) -> None:
        prefix = _fresh_prefix()
        for name in ("a", "ab", "abc", "b", "Ab", "a%", "a_"):
            chatkeep_store.append(prefix + name, records(1))
        assert set(_ids(chatkeep_store, prefix + "a")) == {
            prefix + n for n in ("a", "ab", "abc", "a%", "a_")
        }
        assert set(_ids(chatkeep_store, prefix + "ab")) == {prefix + "ab", prefix + "abc"}
        assert _ids(chatkeep_store, prefix + "A") == [prefix + "Ab"]
        assert _ids(chatkeep_store, prefix + "a%") == [prefix + "a%"]

    def test_recent_async_matches(self, chatkeep_store: Store) -> None:
        prefix = _fresh_prefix()
        for name in ("x", "y", "z"):
            chatkeep_store.append(prefix + name, records(1))

        async def collect() -> list[tuple[str, datetime]]:
            return [pair async for pair in chatkeep_store.arecent_sessions(prefix, 2)]

        assert asyncio.run(collect()) == _recent(chatkeep_store, prefix, 2)

    def test_recent_drives_the_newest_first_listing(self, chatkeep_store: Store) -> None:
        prefix = _fresh_prefix()
        for name in ("b", "a", "c"):
            chatkeep_store.append(prefix + name, records(1))
        listed = [info.id for info in list_session_infos(chatkeep_store, prefix=prefix)]
        assert listed == [prefix + "c", prefix + "a", prefix + "b"]


def _backend_page(
    backend: object, prefix: str, before: tuple[float, str] | None
) -> list[tuple[str, float]]:
    """One call of the backend's own ``recent_sessions`` hook (sync or async)."""
    hook: Callable[..., object] | None = getattr(backend, "recent_sessions", None)
    twin: Callable[..., object] | None = getattr(backend, "arecent_sessions", None)
    if hook is not None and not asyncio.iscoroutinefunction(hook):
        return hook(prefix, before, 100)  # type: ignore[return-value]
    coroutine = (hook or twin)(prefix, before, 100)  # type: ignore[misc]
    return asyncio.run(coroutine)  # type: ignore[arg-type]


#: Tied ids whose code-point order differs from a naive key encoding's (a space, ``!``,
#: ``/`` and ``~`` around letters, a letter outside ASCII) and from a case-folding order.
_TIED = ("a", "c", "b", "e", "d", "a b", "a!", "a~", "a/", "B", "\u00e9")


class RecentTieTests(ConformanceBase):
    """Sessions whose last appends share one time (written with the ``chatkeep_set_updated``
    test hook, since no store's clock can be made to repeat from outside) are listed
    newest first, ties by id descending in code-point order, and keyset pages that end
    inside a tie go on after it."""

    def test_recent_ties_by_id_descending_across_pages(
        self, chatkeep_store: Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        prefix = _fresh_prefix()
        names = [prefix + name for name in _TIED]
        newest = prefix + "newest"
        for name in [*names, newest]:
            chatkeep_store.append(name, records(1))
        pairs = dict(_recent(chatkeep_store, prefix))
        now = pairs[newest].timestamp()
        tie = float(int(now) - 3600)  # whole seconds: exact in every store's time type
        set_updated = getattr(chatkeep_store.backend, SET_UPDATED)
        for name in names:
            set_updated(name, tie)
        expected = [newest, *sorted(names, reverse=True)]
        listed = _recent(chatkeep_store, prefix)
        assert [name for name, _ in listed] == expected, "ties not by id descending"
        times = {updated.timestamp() for _, updated in listed[1:]}
        assert times == {tie}, f"the tied sessions do not share the time written: {times}"
        for page in (2, 3, 5):  # core pages ending inside the tie, at several places
            monkeypatch.setattr(store_module, "RECENT_PAGE", page)
            got = _ids(chatkeep_store, prefix)
            assert got == expected, f"pages of {page} lost or repeated a tied session: {got}"
        # The backend's cursor is exclusive inside a tie: from a tied pair on, only the
        # tied ids below it, then nothing newer.
        raw = _backend_page(chatkeep_store.backend, prefix, None)
        for cut in (1, 4, len(raw) - 2):
            session_id, updated = raw[cut]
            after = _backend_page(chatkeep_store.backend, prefix, (updated, session_id))
            assert [n for n, _ in after] == [n for n, _ in raw[cut + 1 :]], (
                f"the cursor ({session_id!r} at the tie) did not continue right after it"
            )
        assert _ids(chatkeep_store, prefix, limit=4) == expected[:4]


class RecentDeleteTests(ConformanceBase):
    """A deleted session leaves the listing; appended to again, it comes back as the newest."""

    def test_recent_deleted_sessions_are_not_listed(self, chatkeep_store: Store) -> None:
        prefix = _fresh_prefix()
        for name in ("a", "b", "c"):
            chatkeep_store.append(prefix + name, records(2))
        chatkeep_store.delete(prefix + "b")
        assert _ids(chatkeep_store, prefix) == [prefix + "c", prefix + "a"]
        chatkeep_store.append(prefix + "b", records(1))  # back, as the newest
        assert _ids(chatkeep_store, prefix) == [prefix + "b", prefix + "c", prefix + "a"]


class RecentSharedTests(ConformanceBase):
    """Another handle's appends move its sessions in this handle's listing."""

    def test_recent_sees_another_handles_appends(
        self, chatkeep_store: Store, chatkeep_open: Callable[..., Store]
    ) -> None:
        prefix = _fresh_prefix()
        other = chatkeep_open()
        chatkeep_store.append(prefix + "mine", records(1))
        other.append(prefix + "theirs", records(1))
        assert _ids(chatkeep_store, prefix) == [prefix + "theirs", prefix + "mine"]
        chatkeep_store.append(prefix + "mine", records(2))
        assert _ids(other, prefix) == [prefix + "mine", prefix + "theirs"]


_TTL = 2.0
_MARGIN = 0.6


class RecentTtlTests(ConformanceBase):
    """An expired session leaves the listing (and comes back only with a new append)."""

    def test_recent_leaves_out_expired_sessions(self, chatkeep_open: Callable[..., Store]) -> None:
        store = chatkeep_open(ttl=_TTL)
        for _ in range(3):
            prefix = _fresh_prefix()
            store.append(prefix + "idle", records(1))
            time.sleep(_TTL + _MARGIN)
            store.append(prefix + "fresh", records(1))
            appended = time.monotonic()
            listed = _ids(store, prefix)
            if time.monotonic() - appended > _TTL - _MARGIN:
                continue  # too slow to tell: measure again
            assert listed == [prefix + "fresh"], f"an expired session is listed: {listed}"
            store.append(prefix + "idle", records(1, start=5))
            assert _ids(store, prefix) == [prefix + "idle", prefix + "fresh"]
            return
        pytest.skip("inconclusive: the machine was too slow to keep a margin around the ttl")
