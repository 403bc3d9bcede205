"""Listing at volume: many pages of ids that extend one another, from every handle."""

from __future__ import annotations

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


class ListingPagesTests(ConformanceBase):
    """``--chatkeep-listing-sessions`` (default 2,400) sessions listed whole, each once,
    across many page boundaries; from a second handle (``shared``) and after reopening
    (``durable``) too, after the first handle listed (no stale listing)."""

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
        _create(chatkeep_store, ids[count // 2 :])
        _check_listing(list(chatkeep_store.list_sessions(prefix)), ids, "this handle")
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
