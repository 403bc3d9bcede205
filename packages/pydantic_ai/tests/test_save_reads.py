"""``save`` starts with the record this object last read or wrote (one store read fewer a
turn) and is exactly as safe: the conditional write proves that record current."""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from chatkeep.core import Record, Store
from chatkeep.pydantic_ai import ChatkeepConversationStore

pytestmark = pytest.mark.anyio


class _Counting:
    """A backend that counts its reads."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.reads = 0
        self.capabilities = store.capabilities

    def append(self, session_id: str, records: list[Record]) -> None:
        self.store.append(session_id, records)

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        self.store.append_if(session_id, records, after=after)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Any]:
        self.reads += 1
        return self.store.read(session_id, start, stop)


def exchange(n: int) -> list[Any]:
    return [
        ModelRequest(parts=[UserPromptPart(f"question {n}")]),
        ModelResponse(parts=[TextPart(f"answer {n}")]),
    ]


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def url(request: pytest.FixtureRequest) -> str:
    value: str = request.getfixturevalue(f"{request.param}_url")
    return value


async def test_a_turn_is_two_reads_and_one_append(url: str) -> None:
    inner = ChatkeepConversationStore(url=url)
    counting = _Counting(inner.store)
    prefix = f"t{secrets.token_hex(4)}:"
    async with ChatkeepConversationStore(store=Store(counting, name="c"), prefix=prefix) as store:
        await store.save(Conversation(messages=exchange(0), conversation_id="c"))
        for n in range(1, 4):
            counting.reads = 0
            conversation = await store.load("c")
            assert conversation is not None
            conversation.messages.extend(exchange(n))
            await store.save(conversation)
            assert counting.reads == 1, f"{counting.reads} reads for a turn of a short history"
        again = await store.load("c")
        assert again is not None and len(again.messages) == 8
    await inner.aclose()


async def test_a_save_that_lost_a_race_still_conflicts(url: str) -> None:
    prefix = f"t{secrets.token_hex(4)}:"
    async with (
        ChatkeepConversationStore(url=url, prefix=prefix) as ours,
        ChatkeepConversationStore(url=url, prefix=prefix) as theirs,
    ):
        await ours.save(Conversation(messages=exchange(0), conversation_id="c"))
        mine = await ours.load("c")
        other = await theirs.load("c")
        assert mine is not None and other is not None
        other.messages.extend(exchange(1))
        await theirs.save(other)  # another writer got in first
        mine.messages.extend(exchange(2))
        with pytest.raises(ConversationConflict):
            await ours.save(mine)
        # A conversation newer than what this object last read saves fine.
        newer = await theirs.load("c")
        assert newer is not None
        newer.messages.extend(exchange(3))
        await ours.save(newer)
        final = await theirs.load("c")
        assert final is not None
        texts = [p.content for m in final.messages for p in m.parts]
        assert texts == [f"{kind} {n}" for n in (0, 1, 3) for kind in ("question", "answer")]
