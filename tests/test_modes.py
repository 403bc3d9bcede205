"""One application, five ways to keep its history (issue 8).

The same application function runs unchanged against Chat Completions, Responses with
``store=True``, Responses with ``store=False``, Conversations and Anthropic Messages, all
through the official SDKs against the fake model server on loopback, and gets the same
conversation. The server's request log shows who keeps the history: a service-managed
session sends constant-size requests, a client-managed one the growing history.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest

from chatkeep.anthropic import AnthropicChatClient
from chatkeep.core import Agent, AgentSession, HistoryConflict, HistoryProvider, Message
from chatkeep.fake_model import FakeModelServer
from chatkeep.openai import (
    ChatCompletionsClient,
    ConversationsClient,
    ResponsesClient,
    migrate_to_client_managed,
)

T = TypeVar("T")

SERVICE_MANAGED = ("responses", "conversations")
CLIENT_MANAGED = ("chat_completions", "responses_store_false", "anthropic_messages")
MODES = (*SERVICE_MANAGED, *CLIENT_MANAGED)
#: The endpoint each mode's turns go to, in the server's request log.
API = {
    "chat_completions": "chat.completions",
    "responses": "responses",
    "responses_store_false": "responses",
    "conversations": "responses",
    "anthropic_messages": "messages",
}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(server: FakeModelServer) -> None:
    server.reset()


def make_client(mode: str, server: FakeModelServer) -> Any:
    """The one line that differs between the modes."""
    openai_args: dict[str, Any] = {"base_url": server.base_url, "api_key": "test", "max_retries": 0}
    if mode == "chat_completions":
        return ChatCompletionsClient("fake-model", **openai_args)
    if mode == "responses":
        return ResponsesClient("fake-model", **openai_args)
    if mode == "responses_store_false":
        return ResponsesClient("fake-model", store=False, **openai_args)
    if mode == "conversations":
        return ConversationsClient("fake-model", **openai_args)
    assert mode == "anthropic_messages"
    return AnthropicChatClient("fake-model", api_key="test", base_url=server.anthropic_base_url)


def run(factory: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await factory()

    return asyncio.run(main())


def weather(city: str) -> dict[str, object]:
    """Today's weather in a city."""
    return {"city": city, "temp": 21}


SCRIPT = (
    "Hi, I'm Ada.",
    'What is the weather? call:weather({"city": "Oslo"})',
    "Thanks! Do you remember my name?",
)

EXPECTED = [
    '[seen 1] first: "Hi, I\'m Ada." | latest: "Hi, I\'m Ada."',
    "[seen 5] first: \"Hi, I'm Ada.\" | latest: 'What is the weather? "
    'call:weather({"city": "Oslo"})\' | tool results: \'{"city": "Oslo", "temp": 21}\'',
    "[seen 7] first: \"Hi, I'm Ada.\" | latest: 'Thanks! Do you remember my name?'",
]


async def application(client: Any, *, stream: bool = False) -> list[str]:
    """The application: it does not know which mode it runs in."""
    agent = Agent(client, instructions="You are a helpful assistant.", tools=[weather])
    session = agent.create_session()
    replies: list[str] = []
    for text in SCRIPT:
        if stream:
            running = agent.run_stream(text, session)
            async for _ in running:
                pass
            replies.append(running.response.messages[-1].text)
        else:
            response = await agent.run(text, session)
            replies.append(response.messages[-1].text)
    return replies


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
def test_the_same_application_gives_the_same_conversation_in_every_mode(
    mode: str, stream: bool, server: FakeModelServer
) -> None:
    replies = run(lambda: application(make_client(mode, server), stream=stream))
    assert replies == EXPECTED
    assert {r.api for r in server.requests} <= {API[mode], "conversations.create"}
    assert all(r.status == 200 for r in server.requests)


# -- who keeps the history, seen from the server --------------------------------------------


async def equal_turns(client: Any, turns: int) -> AgentSession:
    agent = Agent(client, instructions="Be brief.")
    session = agent.create_session()
    for turn in range(turns):
        await agent.run(f"message number {turn:03d}", session)  # same length every turn
    return session


@pytest.mark.parametrize("mode", SERVICE_MANAGED)
def test_a_service_managed_session_sends_constant_size_requests(
    mode: str, server: FakeModelServer
) -> None:
    session = run(lambda: equal_turns(make_client(mode, server), 8))
    assert session.conversation_id is not None
    turns = server.requests_for(API[mode])
    assert len(turns) == 8
    sizes = [r.size for r in turns[1:]]  # the first turn has no conversation to continue yet
    assert len(set(sizes)) == 1, sizes
    assert all(len(r.body["input"]) == 1 for r in turns)  # only the new message


@pytest.mark.parametrize("mode", CLIENT_MANAGED)
def test_a_client_managed_session_sends_the_growing_history(
    mode: str, server: FakeModelServer
) -> None:
    session = run(lambda: equal_turns(make_client(mode, server), 8))
    assert session.conversation_id is None
    turns = server.requests_for(API[mode])
    sizes = [r.size for r in turns]
    assert all(later > earlier for earlier, later in itertools.pairwise(sizes)), sizes
    field = "input" if API[mode] == "responses" else "messages"
    sent = [len([m for m in r.body[field] if m.get("role") != "system"]) for r in turns]
    assert sent == [1 + 2 * turn for turn in range(8)]


def test_a_responses_fork_continues_from_an_earlier_response(server: FakeModelServer) -> None:
    client = ResponsesClient("fake-model", base_url=server.base_url, api_key="t", max_retries=0)

    async def scenario() -> tuple[list[str], str, str]:
        agent = Agent(client)
        session = agent.create_session()
        replies = [(await agent.run("Three vacation spots?", session)).text]
        spot = session.conversation_id
        assert spot is not None
        replies.append((await agent.run("Tell me about the first.", session)).text)
        branch = client.fork_from(spot)
        replies.append((await agent.run("Tell me about the second.", branch)).text)
        replies.append((await agent.run("And the third?", session)).text)
        assert branch.conversation_id is not None
        return replies, spot, branch.conversation_id

    replies, spot, branch_end = run(scenario)
    assert replies[2] == (
        "[seen 3] first: 'Three vacation spots?' | latest: 'Tell me about the second.'"
    )
    assert replies[3] == "[seen 5] first: 'Three vacation spots?' | latest: 'And the third?'"
    forked = server.requests_for("responses")[2]
    assert forked.body["previous_response_id"] == spot
    # The server keeps both branches: the fork's history does not contain the other one.
    stored = server.stored_response(branch_end)
    assert stored is not None
    assert "Tell me about the first." not in json.dumps(stored)


# -- switching modes -----------------------------------------------------------------------


@pytest.mark.parametrize("service_mode", SERVICE_MANAGED)
@pytest.mark.parametrize("client_mode", CLIENT_MANAGED)
def test_switching_from_service_to_client_managed_is_refused_then_migrated(
    service_mode: str, client_mode: str, server: FakeModelServer
) -> None:
    source = make_client(service_mode, server)
    provider = HistoryProvider("memory://")

    async def scenario() -> str:
        session = AgentSession()
        service_agent = Agent(source)
        await service_agent.run("My name is Ada.", session)
        await service_agent.run("I live in Oslo.", session)
        local_agent = Agent(make_client(client_mode, server), history_provider=provider)
        sent_before = len(server.requests)
        with pytest.raises(HistoryConflict, match="migrate"):
            await local_agent.run("What is my name?", session)
        assert len(server.requests) == sent_before  # refused before anything was sent
        assert session.conversation_id is not None  # the session still points at the service
        moved = await migrate_to_client_managed(session, source=source, history_provider=provider)
        assert [m.role for m in moved] == ["user", "assistant", "user", "assistant"]
        return (await local_agent.run("What is my name?", session)).text

    assert run(scenario) == "[seen 5] first: 'My name is Ada.' | latest: 'What is my name?'"


@pytest.mark.parametrize("client_mode", CLIENT_MANAGED)
@pytest.mark.parametrize("service_mode", SERVICE_MANAGED)
def test_switching_from_client_to_service_managed_sends_the_history_once(
    client_mode: str, service_mode: str, server: FakeModelServer
) -> None:
    async def scenario() -> list[str]:
        local_agent = Agent(make_client(client_mode, server))  # in-memory history
        session = local_agent.create_session()
        await local_agent.run("My name is Ada.", session)
        service_agent = Agent(make_client(service_mode, server))
        first = (await service_agent.run("I live in Oslo.", session)).text
        second = (await service_agent.run("What is my name?", session)).text
        return [first, second]

    first, second = run(scenario)
    assert first == "[seen 3] first: 'My name is Ada.' | latest: 'I live in Oslo.'"
    assert second == "[seen 5] first: 'My name is Ada.' | latest: 'What is my name?'"
    service_turns = server.requests_for("responses")[-2:]
    assert len(service_turns[0].body["input"]) == 3  # the local history went up once
    assert len(service_turns[1].body["input"]) == 1


def test_modes_store_nothing_locally_when_the_service_keeps_the_history(
    server: FakeModelServer,
) -> None:
    provider = HistoryProvider("memory://")

    async def scenario() -> list[Message]:
        agent = Agent(make_client("responses", server), history_provider=provider)
        session = agent.create_session()
        with pytest.warns(UserWarning, match="keeps the conversation itself"):
            await agent.run("hello", session)
        return await provider.messages(session)

    assert run(scenario) == []
