"""``ChatkeepHistoryProvider`` keeps each session's decoded view between turns (a
``chatkeep.core.TailCache``): the next ``get_messages`` reads only the log's last records,
and whatever another writer did in between (an append, undo, compaction, a delete and a
fork written into the id) is seen. Run on SQLite, PostgreSQL and Redis."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Message
from conftest import url_for
from maf_support import run

from chatkeep.agent_framework import ChatkeepHistoryProvider
from chatkeep.core import (
    SlidingWindowReducer,
    Store,
    acompact,
    adelete_session,
    afork,
    aundo,
    open_store,
)


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened = open_store(url_for(request.param, request, tmp_path))
    yield opened
    opened.close()


def spy_reads(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int | None]]:
    """The ``(start, stop)`` of every ``aread`` on ``store``'s class from now on."""
    reads: list[tuple[int, int | None]] = []
    cls = type(store)
    real_aread = cls.aread

    async def aread(self: Store, session_id: str, start: int = 0, stop: int | None = None) -> Any:
        reads.append((start, stop))
        return await real_aread(self, session_id, start, stop)

    monkeypatch.setattr(cls, "aread", aread)  # the class: a Store's slots are read-only
    return reads


def texts(messages: list[Message]) -> list[str]:
    return [message.text for message in messages]


def fresh(store: Store, sid: str, limit: int | None) -> list[str]:
    """The view as a provider that kept nothing reads it."""
    return texts(run(ChatkeepHistoryProvider(store=store, max_messages=limit).get_messages(sid)))


@pytest.mark.parametrize("limit", [None, 4])
def test_a_kept_view_reads_the_tail_and_sees_other_writers(
    store: Store, limit: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = "s-" + uuid.uuid4().hex
    kept = ChatkeepHistoryProvider(store=store, max_messages=limit)
    other = ChatkeepHistoryProvider(store=store)
    for n in range(3):  # a turn: load, then save the exchange
        run(kept.get_messages(sid))
        run(kept.save_messages(sid, [Message("user", [f"q{n}"]), Message("assistant", [f"a{n}"])]))
    reads = spy_reads(store, monkeypatch)
    loaded = run(kept.get_messages(sid))
    whole = ["q0", "a0", "q1", "a1", "q2", "a2"]
    assert texts(loaded) == (whole if limit is None else whole[-limit:])
    assert reads == [(-3, None)], "a kept view read more than its tail"
    monkeypatch.undo()
    loaded[0].contents.clear()  # the caller's copy: never reaches the kept view
    assert texts(run(kept.get_messages(sid))) == fresh(store, sid, limit)

    run(other.save_messages(sid, [Message("user", ["from elsewhere"])]))
    assert texts(run(kept.get_messages(sid)))[-1] == "from elsewhere"
    run(aundo(store, sid))  # a retract
    assert texts(run(kept.get_messages(sid))) == fresh(store, sid, limit)
    assert "from elsewhere" not in texts(run(kept.get_messages(sid)))
    run(kept.save_messages(sid, [Message("user", ["after the undo"])]))
    assert texts(run(kept.get_messages(sid))) == fresh(store, sid, limit)
    run(acompact(store, sid, SlidingWindowReducer(2)))  # a checkpoint
    assert texts(run(kept.get_messages(sid))) == ["a2", "after the undo"]
    # delete, then a fork of another session written into this id
    source = "s-" + uuid.uuid4().hex
    run(other.save_messages(source, [Message("user", ["forked"]), Message("assistant", ["f"])]))
    run(adelete_session(store, sid))
    run(afork(store, source, new_session_id=sid))
    assert texts(run(kept.get_messages(sid))) == ["forked", "f"][-(limit or 2) :]
    run(kept.save_messages(sid, [Message("user", ["next"])]))
    assert texts(run(kept.get_messages(sid))) == fresh(store, sid, limit)
    # delete and re-create by another writer
    run(adelete_session(store, sid))
    run(other.save_messages(sid, [Message("user", ["new"])]))
    assert texts(run(kept.get_messages(sid))) == ["new"]


def test_a_write_between_the_load_and_the_save_is_seen(store: Store) -> None:
    sid = "s-" + uuid.uuid4().hex
    kept, other = ChatkeepHistoryProvider(store=store), ChatkeepHistoryProvider(store=store)
    run(kept.save_messages(sid, [Message("user", ["one"])]))
    run(kept.get_messages(sid))
    run(other.save_messages(sid, [Message("user", ["theirs"])]))  # lands mid-turn
    run(kept.save_messages(sid, [Message("assistant", ["mine"])]))
    assert texts(run(kept.get_messages(sid))) == ["one", "theirs", "mine"]


def test_cache_bytes_bounds_what_is_kept(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    sid = "s-" + uuid.uuid4().hex
    kept = ChatkeepHistoryProvider(store=store, cache_bytes=0)
    run(kept.save_messages(sid, [Message("user", [f"m{n}"]) for n in range(4)]))
    run(kept.get_messages(sid))
    reads = spy_reads(store, monkeypatch)
    assert texts(run(kept.get_messages(sid))) == ["m0", "m1", "m2", "m3"]
    assert (-1, None) not in reads and reads, "cache_bytes=0 kept a view"
