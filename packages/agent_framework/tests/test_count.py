"""The running count (``chatkeep.core.metadata``) through MAF's run lifecycle: a session
written only through ``ChatkeepHistoryProvider`` is counted exactly by
``describe_session`` in a few small reads, and a raced or forged count falls back to the
bounded walk, never a wrong figure. On the memory and SQLite stores."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from agent_framework import AgentResponse, AgentSession, Message, SessionContext

from chatkeep.agent_framework import ChatkeepHistoryProvider
from chatkeep.core import (
    Message as CkMessage,
)
from chatkeep.core import (
    Record,
    Store,
    aundo,
    describe_session,
    encode_records,
    fork,
    new_id,
    open_store,
    read_view,
)
from chatkeep.core.metadata import COUNT_KEY, COUNT_WALK


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'count.db'}"
    opened = open_store(url)
    yield opened
    opened.close()


def _long(store: Store, session_id: str, messages: int = COUNT_WALK + 50) -> None:
    """A long session written in one batch, without a running count."""
    batch = [CkMessage.user(f"m{n}", message_id=f"m{n:05d}") for n in range(messages)]
    store.append(session_id, encode_records(batch))


def turn(provider: ChatkeepHistoryProvider, session_id: str, question: str) -> None:
    """One agent run as MAF drives a context provider: before_run loads, after_run saves."""

    async def go() -> None:
        session = AgentSession(session_id=session_id)
        context = SessionContext(
            session_id=session_id, input_messages=[Message("user", [question])]
        )
        state = session.state.setdefault(provider.source_id, {})
        await provider.before_run(
            agent=cast(Any, None), session=session, context=context, state=state
        )
        context._response = AgentResponse(messages=[Message("assistant", [f"re: {question}"])])
        await provider.after_run(
            agent=cast(Any, None), session=session, context=context, state=state
        )

    asyncio.run(go())


def exact(store: Store, session_id: str) -> tuple[int, bool]:
    info = describe_session(store, session_id)
    return info.messages, info.messages_exact


def test_a_session_written_through_the_provider_is_counted_exactly(store: Store) -> None:
    provider = ChatkeepHistoryProvider(store=store, max_messages=6)
    for n in range(8):
        turn(provider, "maf", f"q{n}")
    assert exact(store, "maf") == (16, True)
    assert json.loads(store.read("maf", -1)[0].data)["additional_properties"][COUNT_KEY] == {
        "n": 16,
        "after": store.read("maf", -3, -2)[0].id,
        "k": 2,
    }
    # The count is never seen by MAF.
    loaded = asyncio.run(provider.get_messages("maf"))
    assert all(COUNT_KEY not in (m.additional_properties or {}) for m in loaded)


def test_a_long_session_stays_exact_after_one_whole_load(store: Store) -> None:
    _long(store, "maf")
    assert exact(store, "maf")[1] is False
    turn(ChatkeepHistoryProvider(store=store), "maf", "whole")  # reads the whole view
    windowed = ChatkeepHistoryProvider(store=store, max_messages=4)
    for n in range(3):
        turn(windowed, "maf", f"q{n}")
    assert exact(store, "maf") == (COUNT_WALK + 58, True)
    assert len(read_view(store, "maf")) == COUNT_WALK + 58
    asyncio.run(aundo(store, "maf"))  # the retract carries the count; MAF goes on from it
    turn(ChatkeepHistoryProvider(store=store, max_messages=4), "maf", "after undo")
    assert exact(store, "maf") == (COUNT_WALK + 58, True)
    child = fork(store, "maf", new_session_id="maf-child")
    turn(ChatkeepHistoryProvider(store=store, max_messages=4), child, "in the fork")
    assert exact(store, child) == (COUNT_WALK + 60, True) == (len(read_view(store, child)), True)


def test_another_writer_between_load_and_save_falls_back(store: Store) -> None:
    _long(store, "maf")
    turn(ChatkeepHistoryProvider(store=store), "maf", "whole")
    provider = ChatkeepHistoryProvider(store=store, max_messages=4)

    async def race() -> None:
        await provider.get_messages("maf")  # proves the count
        store.append(
            "maf", encode_records([CkMessage.user("another process", message_id=new_id())])
        )
        await provider.save_messages("maf", [Message("user", ["late"])])

    asyncio.run(race())
    messages, is_exact = exact(store, "maf")
    assert not is_exact and messages <= len(read_view(store, "maf"))
    turn(provider, "maf", "windowed")  # its load proves nothing now: no count written
    assert not exact(store, "maf")[1]
    turn(ChatkeepHistoryProvider(store=store), "maf", "whole again")
    assert exact(store, "maf") == (len(read_view(store, "maf")), True)


def test_a_forged_count_is_not_continued(store: Store) -> None:
    provider = ChatkeepHistoryProvider(store=store, max_messages=4)
    for n in range(3):
        turn(provider, "maf", f"q{n}")
    records = store.read("maf")
    body = json.loads(records[-1].data)
    body["additional_properties"][COUNT_KEY]["after"] = "not-the-record"
    forged = Record(records[-1].id, json.dumps(body).encode())
    store.append("forged", [*records[:-1], forged])
    for n in range(2):
        turn(ChatkeepHistoryProvider(store=store, max_messages=4), "forged", f"f{n}")
    last = json.loads(store.read("forged", -1)[0].data)
    assert COUNT_KEY not in last["additional_properties"]
    assert exact(store, "forged") == (10, True)  # short: the walk counts it
