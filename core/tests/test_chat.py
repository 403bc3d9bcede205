"""The chat-client protocol's one call-and-check helper, shared by Agent and the reducers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from chatkeep.core import (
    Agent,
    ChatResponse,
    ChatResponseUpdate,
    Message,
    OfflineChatClient,
    SummarizationReducer,
    TextContent,
    tool,
)
from chatkeep.core.chat import get_response, stream_response


class Recording:
    """A sync client that records the keywords it was called with."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.calls: list[dict[str, Any]] = []

    def get_response(self, messages: list[Message], **options: Any) -> Any:
        self.calls.append(options)
        return self.reply


def test_sync_and_async_clients_are_both_awaited_to_a_chat_response() -> None:
    async def main() -> None:
        sync = await get_response(Recording(ChatResponse([Message.assistant("x")])), [])
        offline = await get_response(OfflineChatClient(), [Message.user("Hi")])
        assert sync.text == "x"
        assert offline.text == "[seen 1] first: 'Hi' | latest: 'Hi'"

    asyncio.run(main())


def test_tools_are_passed_only_when_there_are_some() -> None:
    @tool
    def clock() -> str:
        """The time."""
        return "noon"

    client = Recording(ChatResponse([]))
    asyncio.run(get_response(client, [], conversation_id="c1"))
    asyncio.run(get_response(client, [], tools=[clock]))
    assert client.calls == [
        {"conversation_id": "c1"},
        {"conversation_id": None, "tools": [clock]},
    ]


def test_a_client_returning_something_else_is_refused_in_the_agent_and_the_reducer() -> None:
    bad = Recording("just a string")
    with pytest.raises(TypeError, match="returned str, not ChatResponse"):
        asyncio.run(get_response(bad, []))
    with pytest.raises(TypeError, match="returned str, not ChatResponse"):
        Agent(bad).run_sync("hello")
    reducer = SummarizationReducer(bad, keep_last=1, threshold=0)
    history = [Message.user(f"m{i}") for i in range(4)]
    with pytest.raises(TypeError, match="returned str, not ChatResponse"):
        asyncio.run(reducer(history))


def test_a_non_streaming_client_streams_one_update_per_message() -> None:
    reply = ChatResponse(
        [Message.assistant("one", message_id="a"), Message.assistant("two", message_id="b")],
        conversation_id="conv-9",
    )

    async def collect() -> list[ChatResponseUpdate]:
        return [u async for u in stream_response(Recording(reply), [])]

    updates = asyncio.run(collect())
    assert [(u.text, u.message_id, u.conversation_id) for u in updates] == [
        ("one", "a", None),
        ("two", "b", "conv-9"),
    ]
    assert ChatResponse.from_updates(updates).messages == reply.messages


def test_a_streaming_client_yielding_something_else_is_refused() -> None:
    class BadStream:
        def get_response(self, messages: list[Message], **_: Any) -> ChatResponse:
            raise AssertionError("not called when streaming")

        def get_streaming_response(self, messages: list[Message], **_: Any) -> Any:
            return iter([ChatResponseUpdate([TextContent("ok")]), {"text": "no"}])

    async def collect() -> list[ChatResponseUpdate]:
        return [u async for u in stream_response(BadStream(), [])]

    with pytest.raises(TypeError, match="yielded dict, not ChatResponseUpdate"):
        asyncio.run(collect())


def test_the_offline_client_keeps_only_its_last_requests() -> None:
    # Issue 30: every request holds the whole history, so keeping them all made a long
    # `chatkeep chat` session grow without bound (18 GB after 5000 turns).
    client = OfflineChatClient(keep_requests=3)
    for n in range(10):
        client.get_response([Message.user(f"turn {n}")])
    assert [request[0].text for request in client.requests] == ["turn 7", "turn 8", "turn 9"]
    assert len(client.tool_names) == 3
    assert len(OfflineChatClient().requests) == 0 and OfflineChatClient().keep_requests == 32
    keep_all = OfflineChatClient(keep_requests=None)
    for n in range(40):
        keep_all.get_response([Message.user(f"turn {n}")])
    assert len(keep_all.requests) == 40
