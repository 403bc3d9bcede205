"""AnthropicChatClient through the official SDK against chatkeep's fake model server."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import anthropic
import pytest

from chatkeep.anthropic import AnthropicChatClient
from chatkeep.core import (
    Agent,
    ChatResponse,
    FunctionCallContent,
    FunctionResultContent,
    HistoryConflict,
    HistoryProvider,
    InvalidOption,
    Message,
    ReasoningContent,
)
from chatkeep.fake_model import FakeModelServer

T = TypeVar("T")
KEY = "sk-ant-test-secret"
THINKING = {"thinking": {"type": "enabled", "budget_tokens": 1024}}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as running:
        yield running


@pytest.fixture
def fake(server: FakeModelServer) -> FakeModelServer:
    server.reset()
    return server


def run(
    fake: FakeModelServer, scenario: Callable[[AnthropicChatClient], Awaitable[T]], **options: Any
) -> T:
    """Run ``scenario`` with a client on one event loop (the SDK's pool belongs to it)."""

    async def main() -> T:
        sdk = anthropic.AsyncAnthropic(base_url=fake.anthropic_base_url, api_key=KEY, max_retries=0)
        async with sdk:
            return await scenario(AnthropicChatClient("claude-test", client=sdk, **options))

    return asyncio.run(main())


def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def test_agent_keeps_the_history_client_side(fake: FakeModelServer) -> None:
    async def scenario(client: AnthropicChatClient) -> list[str]:
        agent = Agent(
            client, history_provider=HistoryProvider("memory://"), instructions="be brief"
        )
        session = agent.create_session()
        return [(await agent.run(text, session)).text for text in ["I am Ada", "hi 2", "hi 3"]]

    assert run(fake, scenario) == [
        "[seen 1] first: 'I am Ada' | latest: 'I am Ada'",
        "[seen 3] first: 'I am Ada' | latest: 'hi 2'",
        "[seen 5] first: 'I am Ada' | latest: 'hi 3'",
    ]
    sent = fake.requests_for("messages")
    assert [r.status for r in sent] == [200, 200, 200]
    for record in sent:
        assert record.body["system"] == "be brief"
        assert record.body["max_tokens"] == 1024
        assert record.body["model"] == "claude-test"
        assert {m["role"] for m in record.body["messages"]} <= {"user", "assistant"}
    sizes = [r.size for r in sent]
    assert sizes == sorted(sizes) and len(set(sizes)) == 3  # the whole history each time


def test_tool_round_trip(fake: FakeModelServer) -> None:
    async def scenario(client: AnthropicChatClient) -> list[Message]:
        agent = Agent(client, history_provider=HistoryProvider("memory://"), tools=[weather])
        session = agent.create_session()
        answer = await agent.run('call:weather({"city": "Oslo"})', session)
        assert answer.text.endswith("| tool results: 'sunny in Oslo'")
        provider = agent.get_service(HistoryProvider)
        assert provider is not None
        return await provider.messages(session)

    stored = run(fake, scenario)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    (call,) = stored[1].contents
    assert isinstance(call, FunctionCallContent)
    assert call.call_id.startswith("toolu_") and call.arguments == {"city": "Oslo"}
    (result,) = stored[2].contents
    assert isinstance(result, FunctionResultContent) and result.call_id == call.call_id
    second = fake.requests_for("messages")[1].body
    assert second["tools"][0]["name"] == "weather"
    assert second["messages"][-1]["content"][0]["type"] == "tool_result"


def test_streaming_matches_the_plain_reply(fake: FakeModelServer) -> None:
    async def scenario(client: AnthropicChatClient) -> tuple[list[str], str, str]:
        agent = Agent(client, history_provider=HistoryProvider("memory://"), tools=[weather])
        session = agent.create_session()
        stream = agent.run_stream("hello stream", session)
        pieces = [update.text async for update in stream]
        tool_stream = agent.run_stream('call:weather({"city": "Rome"})', session)
        async for _ in tool_stream:
            pass
        return pieces, stream.response.text, tool_stream.response.text

    pieces, text, tool_text = run(fake, scenario)
    assert text == "[seen 1] first: 'hello stream' | latest: 'hello stream'"
    assert "".join(pieces) == text and len([p for p in pieces if p]) > 3
    assert tool_text.startswith("[seen 5]") and tool_text.endswith("'sunny in Rome'")
    assert all(r.stream for r in fake.requests_for("messages"))


@pytest.mark.parametrize("streaming", [False, True])
def test_thinking_blocks_are_kept_with_their_signature(
    fake: FakeModelServer, streaming: bool
) -> None:
    async def scenario(client: AnthropicChatClient) -> list[Message]:
        agent = Agent(client, history_provider=HistoryProvider("memory://"), tools=[weather])
        session = agent.create_session()
        if streaming:
            stream = agent.run_stream('call:weather({"city": "Oslo"})', session)
            async for _ in stream:
                pass
        else:
            await agent.run('call:weather({"city": "Oslo"})', session)
        await agent.run("and tomorrow?", session)
        provider = agent.get_service(HistoryProvider)
        assert provider is not None
        return await provider.messages(session)

    stored = run(fake, scenario, options=THINKING)
    reasoning = stored[1].contents[0]
    assert isinstance(reasoning, ReasoningContent)
    assert reasoning.text == "I was shown 1 turns."
    assert reasoning.protected_data and reasoning.protected_data.startswith("sig_")
    # The server refuses a thinking block whose signature does not match: every later
    # request succeeding proves the block went back verbatim.
    assert [r.status for r in fake.requests_for("messages")] == [200, 200, 200]
    assert fake.requests_for("messages")[-1].body["thinking"]["type"] == "enabled"


def test_options_and_max_tokens_are_sent(fake: FakeModelServer) -> None:
    async def scenario(client: AnthropicChatClient) -> ChatResponse:
        return await client.get_response([Message.user("hi")])

    response = run(fake, scenario, max_tokens=77, options={"temperature": 0.5})
    assert response.additional_properties["stop_reason"] == "end_turn"
    assert response.additional_properties["usage"]["input_tokens"] > 0
    assert response.messages[0].message_id is not None
    body = fake.requests[-1].body
    assert (body["max_tokens"], body["temperature"]) == (77, 0.5)


def test_a_service_managed_session_is_refused(fake: FakeModelServer) -> None:
    async def scenario(client: AnthropicChatClient) -> None:
        with pytest.raises(HistoryConflict, match="conv_123"):
            await client.get_response([Message.user("hi")], conversation_id="conv_123")

    run(fake, scenario)
    assert fake.requests == []  # refused before anything was sent


def test_api_errors_propagate_and_nothing_is_stored(fake: FakeModelServer) -> None:
    async def scenario(client: AnthropicChatClient) -> list[Message]:
        agent = Agent(client, history_provider=HistoryProvider("memory://"))
        session = agent.create_session()
        fake.fail_next(500, "overloaded")
        with pytest.raises(anthropic.InternalServerError, match="overloaded"):
            await agent.run("hi", session)
        provider = agent.get_service(HistoryProvider)
        assert provider is not None
        return await provider.messages(session)

    assert run(fake, scenario) == []


def test_key_from_the_environment_and_never_shown(
    fake: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    client = AnthropicChatClient("claude-test", base_url=fake.anthropic_base_url)
    assert KEY not in repr(client)
    assert fake.anthropic_base_url in repr(client)

    async def call() -> str:
        try:
            return (await client.get_response([Message.user("hi")])).text
        finally:
            await client.aclose()

    assert asyncio.run(call()).startswith("[seen 1]")
    assert KEY not in repr(fake.requests[-1])
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(InvalidOption, match="ANTHROPIC_API_KEY"):
        AnthropicChatClient("claude-test")


def test_run_sync_turns_each_on_a_new_event_loop(fake: FakeModelServer) -> None:
    client = AnthropicChatClient(
        "claude-test", api_key=KEY, base_url=fake.anthropic_base_url, max_retries=0, timeout=10
    )
    agent = Agent(client, history_provider=HistoryProvider("memory://"))
    session = agent.create_session()
    texts = [agent.run_sync(text, session).text for text in ["one", "two", "three"]]
    assert texts[-1] == "[seen 5] first: 'one' | latest: 'three'"


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(InvalidOption, match="model"):
        AnthropicChatClient("", api_key="k")
    with pytest.raises(InvalidOption, match="max_tokens"):
        AnthropicChatClient("m", api_key="k", max_tokens=0)
    with pytest.raises(InvalidOption, match="AsyncAnthropic"):
        AnthropicChatClient("m", client=anthropic.Anthropic(api_key="k"))
