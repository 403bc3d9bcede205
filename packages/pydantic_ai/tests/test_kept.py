"""The whole history an object last loaded or saved is kept decoded and handed out as
copies: a load whose record read finds the same head decodes nothing, and behaves exactly as
``InMemoryConversationStore`` (what a caller does to what it was given or returned never
changes what a later load returns)."""

from __future__ import annotations

import copy
import secrets
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import (
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)

from chatkeep.core.errors import InvalidOption
from chatkeep.pydantic_ai import ChatkeepConversationStore, convert

pytestmark = pytest.mark.anyio


def exchange(n: int) -> list[Any]:
    """The same two messages for each ``n`` (timestamps and ids fixed at the first call)."""
    if n not in _EXCHANGES:
        _EXCHANGES[n] = _new_exchange(n)
    return copy.deepcopy(_EXCHANGES[n])


_EXCHANGES: dict[int, list[Any]] = {}


def _new_exchange(n: int) -> list[Any]:
    return [
        ModelRequest(parts=[UserPromptPart(f"question {n}")]),
        ModelResponse(
            parts=[TextPart(f"answer {n}"), ToolCallPart("look", {"q": [n, {"k": "v"}]})],
            provider_details={"n": n},
        ),
    ]


def round_trip(messages: list[Any]) -> list[Any]:
    return ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(messages))


@pytest.fixture(params=["sqlite", "postgres", "redis", "memory"])
def url(request: pytest.FixtureRequest) -> str:
    if request.param == "memory":
        return "memory://"
    value: str = request.getfixturevalue(f"{request.param}_url")
    return value


def _decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the entries decoded from stored records."""
    counted: list[int] = []
    original = convert.entries_of_records

    def counting(records: Any) -> Any:
        counted.append(len(records))
        return original(records)

    import chatkeep.pydantic_ai._log as log

    monkeypatch.setattr(log, "entries_of_records", counting)
    return counted


async def test_a_kept_history_is_not_decoded_again(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = f"k{secrets.token_hex(4)}:"
    async with ChatkeepConversationStore(url=url, prefix=prefix) as store:
        decoded = _decodes(monkeypatch)
        await store.save(Conversation(messages=exchange(0), conversation_id="c"))
        sent = exchange(0)
        for n in range(1, 4):
            conversation = await store.load("c")
            assert conversation is not None
            assert conversation.messages == round_trip(sent)
            conversation.messages.extend(exchange(n))
            sent.extend(exchange(n))
            await store.save(conversation)
        assert decoded == [], "a load decoded stored entries although the history was kept"
        window = await store.load("c", limit=3)
        assert window is not None and window.messages == round_trip(sent)[-3:]
        # Another object on the same store has nothing kept: it reads the history.
        async with ChatkeepConversationStore(store=store.store, prefix=prefix) as fresh:
            resumed = await fresh.load("c")
            assert resumed is not None and resumed.messages == round_trip(sent)
            assert decoded == [8]


async def test_changing_what_a_load_returned_changes_nothing_kept(url: str) -> None:
    prefix = f"k{secrets.token_hex(4)}:"
    async with ChatkeepConversationStore(url=url, prefix=prefix) as store:
        await store.save(Conversation(messages=exchange(0), conversation_id="c"))
        first = await store.load("c")
        assert first is not None
        # Every level of what was handed out, changed in place.
        response = first.messages[1]
        assert isinstance(response, ModelResponse)
        response.parts[0].content = "changed"  # type: ignore[union-attr]
        call = response.parts[1]
        assert isinstance(call, ToolCallPart) and isinstance(call.args, dict)
        call.args["q"][1]["k"] = "changed"
        call.args["q"].append("more")
        assert response.provider_details is not None
        response.provider_details["n"] = "changed"
        response.usage.input_tokens = 99
        first.messages.append(exchange(5)[0])
        entries = await store.load_entries("c")
        assert entries is not None
        entries[0].message.parts.clear()
        second = await store.load("c")
        assert second is not None and second.messages == round_trip(exchange(0))
        assert second.messages[1] is not first.messages[1]


async def test_changing_a_saved_message_afterwards_changes_nothing_kept(url: str) -> None:
    prefix = f"k{secrets.token_hex(4)}:"
    async with ChatkeepConversationStore(url=url, prefix=prefix) as store:
        messages = exchange(0)
        conversation = Conversation(messages=messages, conversation_id="c")
        await store.save(conversation)
        messages[0].parts[0].content = "changed after the save"
        loaded = await store.load("c")
        assert loaded is not None and loaded.messages == round_trip(exchange(0))


async def test_another_writer_makes_the_kept_history_stale(url: str) -> None:
    prefix = f"k{secrets.token_hex(4)}:"
    async with (
        ChatkeepConversationStore(url=url, prefix=prefix) as ours,
        ChatkeepConversationStore(store=ours.store, prefix=prefix) as theirs,
    ):
        await ours.save(Conversation(messages=exchange(0), conversation_id="c"))
        assert await ours.load("c") is not None
        other = await theirs.load("c")
        assert other is not None
        other.messages.extend(exchange(1))
        await theirs.save(other)
        again = await ours.load("c")
        assert again is not None and again.messages == round_trip(exchange(0) + exchange(1))
        # A branch back moves the head to an entry the kept history also holds.
        entries = await ours.load_entries("c")
        assert entries is not None
        branched = await ours.branch(
            "c", from_entry=entries[1].id, expected_revision=again.revision
        )
        branched.messages.extend(exchange(2))
        await ours.save(branched)
        loaded = await ours.load("c")
        assert loaded is not None and loaded.messages == round_trip(exchange(0) + exchange(2))
        back = await theirs.load("c")
        assert back is not None and back.messages == loaded.messages
        await ours.delete("c")
        assert await ours.load("c") is None
        await ours.save(Conversation(messages=exchange(7), conversation_id="c"))
        renewed = await theirs.load("c")
        assert renewed is not None and renewed.messages == round_trip(exchange(7))
        mine = await ours.load("c")
        assert mine is not None and mine.messages == round_trip(exchange(7))


async def test_keep_entries_bounds_what_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    async with ChatkeepConversationStore(url="memory://", keep_entries=3) as store:
        decoded = _decodes(monkeypatch)
        for name in ("a", "b"):
            await store.save(Conversation(messages=exchange(0), conversation_id=name))
        await store.load("b")
        assert decoded == [], "b, saved last, is kept"
        await store.load("a")
        assert decoded == [2], "a was dropped to keep b within 3 entries"
        await store.load("a")
        assert decoded == [2], "a is kept again after its load"
    async with ChatkeepConversationStore(url="memory://", keep_entries=0) as off:
        decoded.clear()
        await off.save(Conversation(messages=exchange(0), conversation_id="a"))
        await off.load("a")
        await off.load("a")
        assert decoded == [2, 2]
    for bad in (-1, True, 1.5, "3"):
        with pytest.raises(InvalidOption):
            ChatkeepConversationStore(url="memory://", keep_entries=bad)  # type: ignore[arg-type]


def test_fresh_entries_copy_like_deepcopy() -> None:
    from pydantic_ai.conversation_store import ConversationEntry

    messages = round_trip(exchange(1))
    entries = [ConversationEntry(parent_id=None, message=message) for message in messages]
    copies = convert.fresh_entries(entries)
    assert copies == entries == copy.deepcopy(entries)
    for original, copied in zip(entries, copies, strict=True):
        assert copied is not original and copied.message is not original.message
        assert copied.message.parts is not original.message.parts
        assert all(
            a is not b for a, b in zip(copied.message.parts, original.message.parts, strict=True)
        )
