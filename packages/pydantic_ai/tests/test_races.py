"""``write_record`` is atomic across processes: several processes save the same loaded
conversation at once; exactly one wins each round, the others get
``ConversationConflict``, and nothing of a losing save is stored (not one entry)."""

from __future__ import annotations

import asyncio
import multiprocessing
import secrets
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from chatkeep.core import open_store
from chatkeep.pydantic_ai import ChatkeepConversationStore

WRITERS = 4
ROUNDS = 3


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def url(request: pytest.FixtureRequest) -> str:
    value: str = request.getfixturevalue(f"{request.param}_url")
    return value


def _writer(url: str, prefix: str, name: str, start: Any, results: Any) -> None:
    async def save() -> tuple[str, list[str]]:
        async with ChatkeepConversationStore(url=url, prefix=prefix) as store:
            conversation = await store.load("race")
            assert conversation is not None
            conversation.messages += [
                ModelRequest(parts=[UserPromptPart(f"from {name}")]),
                ModelResponse(parts=[TextPart(f"reply to {name}")]),
            ]
            start.wait()
            try:
                entries = await store.save(conversation)
            except ConversationConflict:
                return "conflict", []
            return "won", [entry.id for entry in entries]

    results.put((name, *asyncio.run(save())))


def test_exactly_one_save_wins_each_race(url: str) -> None:
    prefix = f"race{secrets.token_hex(4)}:"

    async def create() -> None:
        async with ChatkeepConversationStore(url=url, prefix=prefix) as store:
            await store.save(
                Conversation(
                    messages=[ModelRequest(parts=[UserPromptPart("hi")])], conversation_id="race"
                )
            )

    asyncio.run(create())
    context = multiprocessing.get_context("fork")
    winners: list[tuple[str, list[str]]] = []
    losers: list[str] = []
    for round_number in range(ROUNDS):
        start = context.Barrier(WRITERS)
        results = context.Queue()
        names = [f"r{round_number}w{n}" for n in range(WRITERS)]
        processes = [
            context.Process(target=_writer, args=(url, prefix, name, start, results))
            for name in names
        ]
        for process in processes:
            process.start()
        outcomes = [results.get(timeout=120) for _ in processes]
        for process in processes:
            process.join(60)
            assert process.exitcode == 0
        won = [(name, ids) for name, result, ids in outcomes if result == "won"]
        assert len(won) == 1, outcomes
        assert sorted(result for _, result, _ in outcomes) == ["conflict"] * (WRITERS - 1) + ["won"]
        winners += won
        losers += [name for name, result, _ in outcomes if result == "conflict"]

    async def check() -> None:
        async with ChatkeepConversationStore(url=url, prefix=prefix) as store:
            conversation = await store.load("race")
            assert conversation is not None
            texts = [p.content for m in conversation.messages for p in m.parts]
            expected = ["hi"]
            for name, _ in winners:
                expected += [f"from {name}", f"reply to {name}"]
            assert texts == expected

    asyncio.run(check())
    raw = open_store(url)
    try:
        stored = raw.read(f"{prefix}race")
    finally:
        raw.close()
    data = b"".join(record.data for record in stored)
    assert all(f"from {name}".encode() not in data for name in losers)  # nothing half-stored
    assert len(stored) == 1 + 2 * ROUNDS
