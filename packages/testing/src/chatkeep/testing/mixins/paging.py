"""Listing at volume: many pages of ids that extend one another, from every handle, and a
first id that costs a page, not the listing."""

from __future__ import annotations

import tracemalloc
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from chatkeep.core import Record, Store

from ..settings import SuiteSettings
from ._base import ConformanceBase

__all__ = ["ListingPagesTests", "LongPrefixTests"]

#: Suffixes making ids that extend one another: each group's ids are prefixes of later
#: ones, and the characters sort below and above ``/``, ``-`` and letters, where key
#: encodings and "continue after the last id" bookmarks go wrong.
_EXTENSIONS = ("", "!", "-", "-x", ".", "/", "/a", "0", "a", "ab", "~", "\u00e9", "\U0001f600")


def _listing_ids(prefix: str, count: int) -> list[str]:
    ids: list[str] = []
    group = 0
    while len(ids) < count:
        base = f"{prefix}{group:05d}"
        # Vary how many extensions a group has, so page boundaries land everywhere in them.
        for extension in _EXTENSIONS[: 1 + group % len(_EXTENSIONS)]:
            ids.append(base + extension)
        group += 1
    return ids[:count]


def _create(store: Store, ids: list[str]) -> None:
    def one(session: str) -> None:
        store.append(session, [Record("r", session.encode())])

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(one, ids))


def _check_listing(listed: list[str], expected: list[str], who: str) -> None:
    repeated = len(listed) - len(set(listed))
    assert repeated == 0, f"{who}: {repeated} ids listed more than once"
    missing = sorted(set(expected) - set(listed))
    assert not missing, f"{who}: {len(missing)} of {len(expected)} missing, e.g. {missing[:3]!r}"
    extra = sorted(set(listed) - set(expected))
    assert not extra, f"{who}: listed ids never written: {extra[:3]!r}"


#: Memory a listing may hold more after its first id once the listing doubled: bytes,
#: and a share of what it held before (an eager listing's holding doubles with it).
_LAZY_NOISE = 1024
_LAZY_SHARE = 0.25
_LAZY_ATTEMPTS = 3
#: Frames kept per traced allocation: enough to reach this module's frame from inside a
#: driver, so what other threads allocate (a server running in this process) is left out.
_FRAMES = 256


def _first_id_memory(store: Store, prefix: str) -> int:
    """The least Python memory a listing holds once it yielded its first id, over three
    listings (allocations only ever add noise, like time): what was allocated on this
    thread during ``next()`` and is still alive. Time-free: a lazy listing holds a page
    whatever the listing's length, an eager one the whole listing."""
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start(_FRAMES)
    mine = [tracemalloc.Filter(True, __file__, all_frames=True)]
    try:
        next(iter(store.list_sessions(prefix)))  # warm: connections, caches, scripts
        least = None
        for _ in range(3):
            listing = store.list_sessions(prefix)
            before = tracemalloc.take_snapshot().filter_traces(mine)
            next(listing)
            after = tracemalloc.take_snapshot().filter_traces(mine)
            held = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
            close = getattr(listing, "close", None)
            if close is not None:
                close()  # a generator's page goes now, not at collection
            least = held if least is None else min(least, held)
        assert least is not None
        return least
    finally:
        if not tracing:
            tracemalloc.stop()


def _check_lazy(store: Store, prefix: str, half: int, small: int, added: int) -> None:
    """The first id of the doubled listing costs what it cost before, within the allowance
    (measured again before it fails)."""
    allowed = _LAZY_NOISE + int(_LAZY_SHARE * small)
    grown = 0
    for _ in range(_LAZY_ATTEMPTS):
        grown = _first_id_memory(store, prefix) - small
        if grown <= allowed:
            return
    raise AssertionError(
        f"list_sessions is not lazy: after its first id it held {grown} bytes more once the "
        f"listing grew from {half} to {half + added} sessions (allowed {allowed}): it builds "
        "the whole listing before yielding, where a lazy one reads a page"
    )


class ListingPagesTests(ConformanceBase):
    """``--chatkeep-listing-sessions`` (default 2,400) sessions listed whole, each once,
    across many page boundaries; from a second handle (``shared``) and after reopening
    (``durable``) too, after the first handle listed (no stale listing). Lazy: the first
    id holds no more memory once the listing doubled (half of it must span more than a
    page)."""

    def test_many_pages_of_extending_ids(
        self,
        chatkeep_store: Store,
        chatkeep_open: Callable[..., Store],
        chatkeep_settings: SuiteSettings,
    ) -> None:
        count = chatkeep_settings.listing_sessions
        if count == 0:
            pytest.skip("the listing-pages test is switched off (--chatkeep-listing-sessions=0)")
        prefix = f"ck-lp-{uuid.uuid4().hex}-"
        ids = _listing_ids(prefix, count)
        # Neighbours sorting just before and just after every id of the prefix: a listing
        # whose later pages forget the prefix lists the one after.
        _create(chatkeep_store, [prefix[:-1] + ",", prefix[:-1] + "."])
        _create(chatkeep_store, ids[: count // 2])
        _check_listing(list(chatkeep_store.list_sessions(prefix)), ids[: count // 2], "first half")
        small = _first_id_memory(chatkeep_store, prefix)
        _create(chatkeep_store, ids[count // 2 :])
        _check_listing(list(chatkeep_store.list_sessions(prefix)), ids, "this handle")
        _check_lazy(chatkeep_store, prefix, count // 2, small, count - count // 2)
        group = f"{prefix}{12:05d}"
        _check_listing(
            list(chatkeep_store.list_sessions(group)),
            [i for i in ids if i.startswith(group)],
            f"prefix {group!r}",
        )
        if chatkeep_store.supports("shared"):
            other = chatkeep_open()
            _check_listing(list(other.list_sessions(prefix)), ids, "a second handle")
            extra = f"{prefix}{0:05d}-late"
            other.append(extra, [Record("r", b"late")])
            _check_listing(list(chatkeep_store.list_sessions(prefix)), [*ids, extra], "first again")
            ids.append(extra)
        if chatkeep_store.supports("durable"):
            chatkeep_store.close()
            again = chatkeep_open()
            _check_listing(list(again.list_sessions(prefix)), ids, "after reopening")


class LongPrefixTests(ConformanceBase):
    """Long, multi-byte prefixes are compared in full (not on their first few hundred bytes)."""

    def test_long_multibyte_prefixes(self, chatkeep_store: Store) -> None:
        head = f"ck-lx-{uuid.uuid4().hex[:8]}-"
        body = "\u00e9" * 440  # 880 bytes of UTF-8 before the ids differ
        emoji = "\U0001f600" * (511 - len(head))  # a 512-character id of 4-byte characters
        ids = [
            head + body + "a",
            head + body + "b",
            head + body + "ab",
            head + body[:-1] + "\U0001f600",
            head + emoji + "x",
            head + emoji + "y",
        ]
        for session in ids:
            chatkeep_store.append(session, [Record("r", session.encode())])
        cases = {
            head + body: set(ids[:3]),
            head + body + "a": {ids[0], ids[2]},
            head + body + "b": {ids[1]},
            head + body[:-1]: set(ids[:4]),
            head + body[:-1] + "\U0001f600": {ids[3]},
            head + emoji: set(ids[4:]),
            head + emoji + "x": {ids[4]},
            head + emoji + "z": set(),
            head + emoji + "xx": set(),
            head: set(ids),
        }
        wrong = {}
        for prefix, expected in cases.items():
            listed = set(chatkeep_store.list_sessions(prefix))
            if listed != expected:
                wrong[f"{len(prefix)} chars ...{prefix[-3:]!r}"] = (len(listed), len(expected))
        assert not wrong, f"prefixes not compared in full (listed, expected): {wrong}"
        for session in ids:
            assert chatkeep_store.read(session) == [Record("r", session.encode())]
