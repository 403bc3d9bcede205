"""Listing at volume: many pages of ids that extend one another, from every handle, and a
first id that costs a page, not the listing."""

from __future__ import annotations

import asyncio
import inspect
import tracemalloc
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

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


def _traced_files(store: Store) -> list[tracemalloc.Filter]:
    """Allocations this memory check counts: made with this module's frame on the stack
    (this thread, the event loop it runs), or with one of the backend's classes' (a worker
    thread running a sync listing for the core's async fallback). What other threads
    allocate (a server running in this process) is left out."""
    files = {__file__}
    for cls in type(store.backend).__mro__:
        try:
            files.add(inspect.getfile(cls))
        except TypeError:  # builtins
            continue
    return [tracemalloc.Filter(True, name, all_frames=True) for name in sorted(files)]


def _first_id_memory(store: Store, prefix: str, *, twin: bool = False) -> int:
    """The least Python memory a listing holds once it yielded its first id, over three
    listings (allocations only ever add noise, like time): what was allocated during
    ``next()`` (``twin``: the first ``anext()`` of ``alist_sessions``) and is still
    alive. Time-free: a lazy listing holds a page whatever the listing's length, an eager
    one the whole listing."""
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start(_FRAMES)
    # The sync listing runs on this thread: this module's frames alone (the backend's
    # files would also count its other threads' churn).
    mine = _traced_files(store) if twin else [tracemalloc.Filter(True, __file__, all_frames=True)]
    loop = asyncio.new_event_loop() if twin else None

    def first(listing: Any) -> None:
        if loop is None:
            next(listing)
        else:
            loop.run_until_complete(listing.__anext__())

    def start() -> Any:
        return store.list_sessions(prefix) if loop is None else store.alist_sessions(prefix)

    def done(listing: Any) -> None:
        # The page goes now, not at collection (for an async generator, at a later turn
        # of the loop: inside the next measurement, where its freeing would hide what
        # that listing holds).
        if loop is not None:
            loop.run_until_complete(listing.aclose())
            for _ in range(3):  # finalizers the loop scheduled (a backend's inner listing)
                loop.run_until_complete(asyncio.sleep(0))
        elif hasattr(listing, "close"):
            listing.close()

    try:
        if loop is None:
            next(iter(store.list_sessions(prefix)))  # warm: connections, caches, scripts
        else:
            warm = start()
            first(warm)
            done(warm)
        least = None
        for _ in range(3):
            listing = start()
            before = tracemalloc.take_snapshot().filter_traces(mine)
            first(listing)
            after = tracemalloc.take_snapshot().filter_traces(mine)
            held = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
            if loop is not None:  # what the loop freed meanwhile says nothing of the listing
                held = max(0, held)
            done(listing)
            least = held if least is None else min(least, held)
        assert least is not None
        return least
    finally:
        if loop is not None:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
        if not tracing:
            tracemalloc.stop()


def _check_lazy(
    store: Store, prefix: str, half: int, small: int, added: int, *, twin: bool = False
) -> None:
    """The first id of the doubled listing costs what it cost before, within the allowance
    (measured again before it fails)."""
    # The event loop's own task and future objects add up to a KiB more noise.
    allowed = _LAZY_NOISE * (2 if twin else 1) + int(_LAZY_SHARE * small)
    grown = 0
    for _ in range(_LAZY_ATTEMPTS):
        grown = _first_id_memory(store, prefix, twin=twin) - small
        if grown <= allowed:
            return
    call = "alist_sessions" if twin else "list_sessions"
    raise AssertionError(
        f"{call} is not lazy: after its first id it held {grown} bytes more once the "
        f"listing grew from {half} to {half + added} sessions (allowed {allowed}): it builds "
        "the whole listing before yielding, where a lazy one reads a page (a backend whose "
        f"page holds more than {half} ids passes with --chatkeep-listing-sessions above "
        "twice its page size)"
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
        small_twin = _first_id_memory(chatkeep_store, prefix, twin=True)
        _create(chatkeep_store, ids[count // 2 :])
        _check_listing(list(chatkeep_store.list_sessions(prefix)), ids, "this handle")
        _check_lazy(chatkeep_store, prefix, count // 2, small, count - count // 2)
        _check_lazy(chatkeep_store, prefix, count // 2, small_twin, count - count // 2, twin=True)
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
