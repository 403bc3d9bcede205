"""The running count (``chatkeep.core.metadata``) through the Agents SDK's ``Session``
protocol: a session written only through ``ChatkeepSession`` is counted exactly by
``describe_session``, ``pop_item`` and ``clear_session`` keep it, and a raced or forged
count falls back to the bounded walk, never a wrong figure. On memory and SQLite."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatkeep.core import (
    Message,
    Record,
    Store,
    describe_session,
    encode_records,
    new_id,
    open_store,
    read_view,
)
from chatkeep.core.metadata import COUNT_KEY, COUNT_WALK
from chatkeep.openai_agents import ChatkeepSession


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'count.db'}"
    opened = open_store(url)
    yield opened
    opened.close()


def item(role: str, text: str) -> Any:
    return {"role": role, "content": text}


def turn(session: ChatkeepSession, question: str, limit: int | None = None) -> None:
    """What the SDK's Runner does around a model call: read the history, add the turn."""

    async def go() -> None:
        await session.get_items(limit)
        await session.add_items([item("user", question), item("assistant", f"re: {question}")])

    asyncio.run(go())


def exact(store: Store, session_id: str) -> tuple[int, bool]:
    info = describe_session(store, session_id)
    return info.messages, info.messages_exact


def _long(store: Store, session_id: str, messages: int = COUNT_WALK + 50) -> None:
    batch = [Message.user(f"m{n}", message_id=f"m{n:05d}") for n in range(messages)]
    store.append(session_id, encode_records(batch))


def test_a_session_written_through_the_sdk_is_counted_exactly(store: Store) -> None:
    session = ChatkeepSession("sdk", store=store)
    for n in range(6):
        turn(session, f"q{n}", limit=3)
    assert exact(store, "sdk") == (12, True)
    assert asyncio.run(session.get_items())[-1] == item("assistant", "re: q5")  # no count in it
    asyncio.run(session.add_items([item("user", "no read first")]))  # continues its own count
    assert exact(store, "sdk") == (13, True)


def test_a_long_session_stays_exact_through_pop_and_clear(store: Store) -> None:
    _long(store, "sdk")
    assert not exact(store, "sdk")[1]
    turn(ChatkeepSession("sdk", store=store), "whole")  # get_items() reads the whole view
    for n in range(3):
        turn(ChatkeepSession("sdk", store=store), f"q{n}", limit=4)  # a new process each
    assert exact(store, "sdk") == (COUNT_WALK + 58, True)
    session = ChatkeepSession("sdk", store=store)
    asyncio.run(session.get_items(2))
    assert asyncio.run(session.pop_item()) == item("assistant", "re: q2")
    assert exact(store, "sdk") == (COUNT_WALK + 57, True) == (len(read_view(store, "sdk")), True)
    turn(session, "after pop", limit=4)
    assert exact(store, "sdk") == (COUNT_WALK + 59, True)


def test_clearing_without_delete_counts_zero(tmp_path: Path) -> None:
    """A store without ``delete`` hides the view with a checkpoint that carries count 0."""
    from chatkeep.core.memory import MemoryStore

    class NoDelete(MemoryStore):
        capabilities = MemoryStore.capabilities - {"delete"}

    store = Store(NoDelete())
    _long(store, "sdk")
    session = ChatkeepSession("sdk", store=store)
    asyncio.run(session.clear_session())
    assert exact(store, "sdk") == (0, True)
    turn(session, "fresh", limit=4)
    assert exact(store, "sdk") == (2, True)


def test_another_writer_between_read_and_add_falls_back(store: Store) -> None:
    _long(store, "sdk")
    session = ChatkeepSession("sdk", store=store)
    turn(session, "whole")

    async def race() -> None:
        await session.get_items(4)
        intruder = Message.user("another process", message_id=new_id())
        store.append("sdk", encode_records([intruder]))
        await session.add_items([item("user", "late")])

    asyncio.run(race())
    messages, is_exact = exact(store, "sdk")
    assert not is_exact and messages <= len(read_view(store, "sdk"))
    turn(session, "windowed", limit=4)  # proves nothing: no count written
    assert not exact(store, "sdk")[1]
    turn(session, "whole again")
    assert exact(store, "sdk") == (len(read_view(store, "sdk")), True)


def test_a_forged_count_is_not_continued(store: Store) -> None:
    session = ChatkeepSession("sdk", store=store)
    for n in range(3):
        turn(session, f"q{n}", limit=4)
    records = store.read("sdk")
    body = json.loads(records[-1].data)
    body["additional_properties"][COUNT_KEY]["after"] = "not-the-record"
    store.append("forged", [*records[:-1], Record(records[-1].id, json.dumps(body).encode())])
    turn(ChatkeepSession("forged", store=store), "f", limit=4)
    last = json.loads(store.read("forged", -1)[0].data)
    assert COUNT_KEY not in last["additional_properties"]
    assert exact(store, "forged") == (8, True)  # short: the walk counts it
