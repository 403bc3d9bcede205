"""Search over the store under test (:mod:`chatkeep.core.search`).

:class:`SearchTests` (needs ``list_sessions``): the scan finds what each session's view
shows, newest first, across appends, undo, forks, compaction, edits and deletes, and
stays inside a namespace. :class:`FulltextTests` (needs ``fulltext``): the same searches
through the backend's index return exactly what the scan returns, after each of those
steps. Every test works under a fresh session prefix and a fresh word, so other data in a
shared store never changes what it sees.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from chatkeep.core import (
    AgentSession,
    HistoryProvider,
    Message,
    Store,
    TextContent,
    compact,
    delete_session,
    fork,
    new_id,
    search,
    undo,
)
from chatkeep.core.search import SearchProgress
from chatkeep.core.views import edit_replace

from ._base import ConformanceBase

__all__ = ["FulltextTests", "SearchTests"]


def _fresh() -> tuple[str, str]:
    """A session prefix and a word no other data holds."""
    token = uuid.uuid4().hex[:12]
    return f"ck-q-{token}-", "zq" + "".join(chr(ord("a") + int(c, 16) % 26) for c in token)


def _say(store: Store, session_id: str, *turns: tuple[str, str]) -> None:
    provider = HistoryProvider(store)
    messages = [Message(role, [TextContent(text)], message_id=new_id()) for role, text in turns]
    asyncio.run(provider.save(AgentSession(session_id), messages))


def _found(store: Store, query: str, prefix: str, **options: Any) -> list[tuple[str, int | None]]:
    hits = search(store, query, prefix=prefix, limit=None, **options)
    return [(hit.session_id, hit.position) for hit in hits]


def _build(store: Store, prefix: str, word: str) -> None:
    """Three conversations: ``a`` (two turns), ``b`` (one), ``c`` (nothing to find)."""
    _say(store, prefix + "a", ("user", f"Where is the {word} invoice?"), ("assistant", "Filed."))
    _say(store, prefix + "a", ("user", f"And the Ålesund {word}?"), ("assistant", "Also filed."))
    _say(store, prefix + "b", ("user", f"{word} weather"), ("assistant", f"{word.upper()} is cold"))
    _say(store, prefix + "c", ("user", "nothing to see"))


class SearchTests(ConformanceBase):
    """A search finds the messages each session's view shows (after undo, forks,
    compaction, edits and deletes), each session's hits newest first, sessions newest
    first where the store declares ``recent`` (else in listing order), inside one
    namespace."""

    def test_search_finds_the_views_messages_newest_first(self, chatkeep_store: Store) -> None:
        prefix, word = _fresh()
        _build(chatkeep_store, prefix, word)
        b_hits = [(prefix + "b", 1), (prefix + "b", 0)]
        a_hits = [(prefix + "a", 2), (prefix + "a", 0)]
        found = _found(chatkeep_store, word, prefix)
        if chatkeep_store.supports("recent"):  # newest session first, from the recent index
            assert found == b_hits + a_hits
        else:  # in listing order, which the contract leaves to the backend (a cluster's
            # scan order, say): each session's hits together, newest first
            assert found in (a_hits + b_hits, b_hits + a_hits), found
        assert _found(chatkeep_store, f"{word} alesund", prefix) == [(prefix + "a", 2)]
        assert _found(chatkeep_store, f'"the {word} invoice"', prefix) == [(prefix + "a", 0)]
        assert _found(chatkeep_store, f"{word} -invoice -weather -cold", prefix) == [
            (prefix + "a", 2)
        ]

    def test_search_applies_undo_forks_compaction_and_edits(self, chatkeep_store: Store) -> None:
        prefix, word = _fresh()
        _build(chatkeep_store, prefix, word)
        undo(chatkeep_store, prefix + "a")
        assert _found(chatkeep_store, f"{word} alesund", prefix) == []
        assert _found(chatkeep_store, f"{word} alesund", prefix, include_retracted=True) == [
            (prefix + "a", None)
        ]
        fork(chatkeep_store, prefix + "b", new_session_id=prefix + "f")
        assert sorted(_found(chatkeep_store, f"{word} cold", prefix)) == [
            (prefix + "b", 1),
            (prefix + "f", 1),
        ]
        compact(chatkeep_store, prefix + "b", lambda view: view[-1:])
        assert _found(chatkeep_store, f"{word} weather", prefix + "b") == []
        edit_replace(chatkeep_store, prefix + "f", 1, Message("assistant", [TextContent("gone")]))
        assert _found(chatkeep_store, f"{word} cold", prefix + "f") == []

    def test_search_leaves_deleted_sessions_out(self, chatkeep_store: Store) -> None:
        if not chatkeep_store.supports("delete"):
            return  # nothing to delete with: the other tests cover the scan
        prefix, word = _fresh()
        _build(chatkeep_store, prefix, word)
        delete_session(chatkeep_store, prefix + "b")
        assert {session for session, _ in _found(chatkeep_store, word, prefix)} == {prefix + "a"}

    def test_search_stays_inside_a_namespace(self, chatkeep_open: Callable[..., Store]) -> None:
        store = chatkeep_open()
        if not store.supports("namespace"):
            return
        prefix, word = _fresh()
        tenant = chatkeep_open(namespace="ck-search-" + prefix.strip("-"))
        _say(tenant, prefix + "t", ("user", f"{word} tenant"))
        _say(store, prefix + "d", ("user", f"{word} default"))
        assert _found(tenant, word, prefix) == [(prefix + "t", 0)]
        assert _found(store, word, prefix) == [(prefix + "d", 0)]


def _same(store: Store, query: str, prefix: str, **options: Any) -> list[Any]:
    """The hits of the indexed search, checked equal to the scan's."""
    progress: list[bool] = []

    def seen(state: SearchProgress) -> None:
        progress.append(state.indexed)

    indexed = [
        hit.to_json()
        for hit in search(store, query, prefix=prefix, limit=None, progress=seen, **options)
    ]
    scanned = [
        hit.to_json()
        for hit in search(store, query, prefix=prefix, limit=None, use_index=False, **options)
    ]
    assert all(progress), "the search did not use the store's full-text index"
    assert indexed == scanned, f"indexed {indexed} != scanned {scanned} for {query!r}"
    return indexed


def _check_all(store: Store, prefix: str, word: str) -> None:
    assert store.fulltext_ready(), "the index does not cover the store after appends"
    for query in (word, f"{word} alesund", f'"the {word} invoice"', f"{word} -cold", "nothing"):
        _same(store, query, prefix)
    _same(store, word, prefix, include_retracted=True)
    _same(store, word, prefix, roles=["assistant"])


class FulltextTests(ConformanceBase):
    """An indexed search returns exactly what the scan returns."""

    def test_indexed_search_matches_the_scan(self, chatkeep_store: Store) -> None:
        prefix, word = _fresh()
        _build(chatkeep_store, prefix, word)
        assert _same(chatkeep_store, word, prefix), "the indexed search found nothing"
        _check_all(chatkeep_store, prefix, word)
        undo(chatkeep_store, prefix + "a")
        _check_all(chatkeep_store, prefix, word)
        fork(chatkeep_store, prefix + "c", new_session_id=prefix + "f")  # nothing to find
        fork(chatkeep_store, prefix + "b", new_session_id=prefix + "g")
        _say(chatkeep_store, prefix + "g", ("user", "after the fork"))
        _check_all(chatkeep_store, prefix, word)
        compact(chatkeep_store, prefix + "b", lambda view: view[-1:])
        _check_all(chatkeep_store, prefix, word)
        edit_replace(chatkeep_store, prefix + "g", 0, Message("user", [TextContent("gone")]))
        _check_all(chatkeep_store, prefix, word)
        if chatkeep_store.supports("delete"):
            delete_session(chatkeep_store, prefix + "b")  # g becomes self-contained
            _check_all(chatkeep_store, prefix, word)
            hits = _same(chatkeep_store, f"{word} cold", prefix)
            assert [hit["session_id"] for hit in hits] == [prefix + "g"]

    def test_indexed_search_stays_inside_a_namespace(
        self, chatkeep_open: Callable[..., Store]
    ) -> None:
        store = chatkeep_open()
        if not store.supports("namespace"):
            return
        prefix, word = _fresh()
        tenant = chatkeep_open(namespace="ck-search-" + prefix.strip("-"))
        _say(tenant, prefix + "t", ("user", f"{word} tenant"))
        _say(store, prefix + "d", ("user", f"{word} default"))
        assert [h["session_id"] for h in _same(tenant, word, prefix)] == [prefix + "t"]
        assert [h["session_id"] for h in _same(store, word, prefix)] == [prefix + "d"]

    def test_indexed_search_survives_hostile_words(self, chatkeep_store: Store) -> None:
        """A 1,000,000-character word and a message of tens of thousands of distinct words
        append (the index never refuses an append) and are found as the scan finds them."""
        prefix, word = _fresh()
        huge = word + "x" * 1_000_000
        _say(chatkeep_store, prefix + "h", ("user", f"the {huge} end"))
        many = " ".join(f"{word}w{n}" for n in range(20_000))
        _say(chatkeep_store, prefix + "m", ("user", many))
        assert chatkeep_store.fulltext_ready()
        assert [h["session_id"] for h in _same(chatkeep_store, word + "x" * 500, prefix)] == [
            prefix + "h"
        ]
        assert _same(chatkeep_store, word + "x" * 500 + "y", prefix) == []
        assert [h["session_id"] for h in _same(chatkeep_store, f"{word}w19999", prefix)] == [
            prefix + "m"
        ]
        assert len(_same(chatkeep_store, word, prefix)) == 2
        assert _same(chatkeep_store, f"{word}w20000", prefix) == []
