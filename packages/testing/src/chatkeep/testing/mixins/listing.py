"""Stores that declare ``list_sessions``: exact, literal-prefix, lazy listing."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

from chatkeep.core import Store

from ..checks import records
from ..samples import LITERAL_PREFIX_CHARACTERS
from ._base import ConformanceBase

__all__ = ["ListSessionsTests"]


def _fresh_prefix() -> str:
    return f"ck-l-{uuid.uuid4().hex}-"


def _listed(store: Store, prefix: str | None) -> list[str]:
    listed = list(store.list_sessions(prefix))
    assert len(listed) == len(set(listed)), "a session was listed more than once"
    return listed


class ListSessionsTests(ConformanceBase):
    """``list_sessions(prefix)`` yields each stored session starting with ``prefix`` once."""

    def test_lists_exactly_the_stored_sessions(self, chatkeep_store: Store) -> None:
        prefix = _fresh_prefix()
        sessions = {prefix + name for name in ("a", "b", "c", "ab", "b/c")}
        for session in sessions:
            chatkeep_store.append(session, records(1))
            chatkeep_store.append(session, records(2, start=1))  # several batches, one entry
        assert set(_listed(chatkeep_store, prefix)) == sessions
        assert _listed(chatkeep_store, prefix + "zzz") == []

    def test_prefix_filters(self, chatkeep_store: Store) -> None:
        prefix = _fresh_prefix()
        for name in ("a", "ab", "abc", "b", "Ab"):
            chatkeep_store.append(prefix + name, records(1))
        assert set(_listed(chatkeep_store, prefix + "a")) == {
            prefix + n for n in ("a", "ab", "abc")
        }
        assert set(_listed(chatkeep_store, prefix + "ab")) == {prefix + "ab", prefix + "abc"}
        assert set(_listed(chatkeep_store, prefix + "A")) == {prefix + "Ab"}, "case-insensitive"
        assert _listed(chatkeep_store, prefix + "abc") == [prefix + "abc"]

    def test_wildcard_characters_in_prefix_are_literal(self, chatkeep_store: Store) -> None:
        prefix = _fresh_prefix()
        for character in LITERAL_PREFIX_CHARACTERS:
            chatkeep_store.append(prefix + character + "1", records(1))
            # "a" and "ab" would match if the character acted as a wildcard or escape.
            chatkeep_store.append(prefix + "a" + "1", records(1))
            chatkeep_store.append(prefix + "ab" + "1", records(1))
        wrong = {}
        for character in LITERAL_PREFIX_CHARACTERS:
            listed = set(_listed(chatkeep_store, prefix + character))
            if listed != {prefix + character + "1"}:
                wrong[character] = sorted(listed)
        assert not wrong, f"prefix characters not taken literally: {wrong}"

    def test_no_prefix_and_empty_prefix_list_everything(self, chatkeep_store: Store) -> None:
        prefix = _fresh_prefix()
        mine = {prefix + "x", prefix + "y"}
        for session in mine:
            chatkeep_store.append(session, records(1))
        assert mine <= set(_listed(chatkeep_store, None))
        assert mine <= set(_listed(chatkeep_store, ""))

    def test_listing_is_a_lazy_iterator(self, chatkeep_store: Store) -> None:
        prefix = _fresh_prefix()
        sessions = {f"{prefix}{n:03d}" for n in range(5)}
        for session in sessions:
            chatkeep_store.append(session, records(1))
        listing = chatkeep_store.list_sessions(prefix)
        assert isinstance(listing, Iterator)
        first = next(listing)
        assert first in sessions
        assert {first, *listing} == sessions

    def test_listing_spans_several_pages(self, chatkeep_store: Store) -> None:
        prefix = _fresh_prefix()
        sessions = {f"{prefix}{n:04d}" for n in range(250)}
        for session in sessions:
            chatkeep_store.append(session, records(1))
        listed = _listed(chatkeep_store, prefix)
        assert len(listed) == 250
        assert set(listed) == sessions

    def test_async_listing(self, chatkeep_store: Store) -> None:
        prefix = _fresh_prefix()
        sessions = {prefix + name for name in ("a", "b", "c")}
        for session in sessions:
            chatkeep_store.append(session, records(1))

        async def collect() -> list[str]:
            return [session async for session in chatkeep_store.alist_sessions(prefix)]

        listed = asyncio.run(collect())
        assert len(listed) == len(set(listed))
        assert set(listed) == sessions
