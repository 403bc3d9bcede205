"""The clients through the official ``openai`` SDK against the fake model server."""

from __future__ import annotations

import asyncio
import gc
import logging
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from chatkeep.core import (
    Agent,
    AgentSession,
    ChatResponse,
    ChatResponseUpdate,
    FunctionCallContent,
    HistoryConflict,
    HistoryProvider,
    Message,
    ReasoningContent,
)
from chatkeep.fake_model import FakeModelServer
from chatkeep.openai import (
    ChatCompletionsClient,
    ConversationNotFound,
    ConversationsClient,
    ResponsesClient,
    migrate_to_client_managed,
)

T = TypeVar("T")


def run(awaitable: Awaitable[T]) -> T:
    async def wrapper() -> T:
        return await awaitable

    return asyncio.run(wrapper())


def weather(city: str) -> dict[str, object]:
    """Today's weather in a city."""
    return {"city": city, "temp": 21}


async def converse(agent: Agent, session: AgentSession, *texts: str) -> list[str]:
    return [(await agent.run(text, session)).text for text in texts]


def test_chat_completions_sends_the_whole_history(
    server: FakeModelServer, sdk_args: dict[str, Any]
) -> None:
    agent = Agent(ChatCompletionsClient("fake", **sdk_args), instructions="Be brief.")
    session = agent.create_session()
    replies = run(converse(agent, session, "Hi, I'm Ada.", "What's my name?"))
    assert replies[1] == '[seen 3] first: "Hi, I\'m Ada." | latest: "What\'s my name?"'
    assert session.conversation_id is None
    bodies = [r.body for r in server.requests_for("chat.completions")]
    assert [m["role"] for m in bodies[1]["messages"]] == ["system", "user", "assistant", "user"]
    assert bodies[1]["model"] == "fake"


def test_responses_store_true_sends_only_new_input_and_the_previous_id(
    server: FakeModelServer, sdk_args: dict[str, Any]
) -> None:
    agent = Agent(ResponsesClient("fake", **sdk_args), instructions="Be brief.")
    session = agent.create_session()
    run(converse(agent, session, "one"))
    first_id = session.conversation_id
    assert first_id is not None and first_id.startswith("resp_")
    replies = run(converse(agent, session, "two"))
    assert replies == ["[seen 3] first: 'one' | latest: 'two'"]
    first, second = (r.body for r in server.requests_for("responses"))
    assert "previous_response_id" not in first and first["store"] is True
    assert second["previous_response_id"] == first_id
    assert second["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "two"}]}
    ]
    # Instructions go with every call and are not kept in the conversation.
    assert first["instructions"] == second["instructions"] == "Be brief."
    assert session.conversation_id != first_id


def test_responses_fork_from_an_earlier_response(
    server: FakeModelServer, sdk_args: dict[str, Any]
) -> None:
    client = ResponsesClient("fake", **sdk_args)
    agent = Agent(client)
    session = agent.create_session()
    run(converse(agent, session, "Three vacation spots?"))
    spot = session.conversation_id
    assert spot is not None
    run(converse(agent, session, "Tell me about the first."))
    branch = client.fork_from(spot)
    assert branch.session_id != session.session_id
    (reply,) = run(converse(agent, branch, "Tell me about the second."))
    assert reply == "[seen 3] first: 'Three vacation spots?' | latest: 'Tell me about the second.'"
    (main,) = run(converse(agent, session, "And the third?"))
    assert main == "[seen 5] first: 'Three vacation spots?' | latest: 'And the third?'"
    with pytest.raises(HistoryConflict, match="store=True"):
        ResponsesClient("fake", store=False, **sdk_args).fork_from(spot)


def test_responses_store_false_resends_history_with_encrypted_reasoning(
    server: FakeModelServer, sdk_args: dict[str, Any]
) -> None:
    client = ResponsesClient(
        "fake", store=False, options={"reasoning": {"effort": "low", "summary": "auto"}}, **sdk_args
    )
    provider = HistoryProvider("memory://")
    agent = Agent(client, history_provider=provider)
    session = agent.create_session()
    first = run(agent.run("Think first.", session))
    reasoning = [c for c in first.messages[0].contents if isinstance(c, ReasoningContent)]
    assert reasoning and reasoning[0].protected_data
    run(agent.run("Again.", session))
    assert session.conversation_id is None
    requests = server.requests_for("responses")
    assert all(r.body["store"] is False for r in requests)
    assert requests[1].body["include"] == ["reasoning.encrypted_content"]
    sent = requests[1].body["input"]
    # The whole history, reasoning item (encrypted content verbatim: the server checks it).
    assert [item["type"] for item in sent] == ["message", "reasoning", "message", "message"]
    assert sent[1]["encrypted_content"] == reasoning[0].protected_data
    assert all(r.status == 200 for r in requests)
    stored = run(provider.messages(session))
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]


def test_conversations_client_is_linear_and_service_managed(
    server: FakeModelServer, sdk_args: dict[str, Any]
) -> None:
    client = ConversationsClient("fake", metadata={"app": "tests"}, **sdk_args)
    agent = Agent(client, instructions="Be brief.")
    session = run(client.create_session("chat-1"))
    conversation_id = session.conversation_id
    assert conversation_id is not None and conversation_id.startswith("conv_")
    replies = run(converse(agent, session, "What is the capital of France?", "And Germany?"))
    assert replies[1] == (
        "[seen 3] first: 'What is the capital of France?' | latest: 'And Germany?'"
    )
    assert session.conversation_id == conversation_id
    assert len(server.requests_for("conversations.create")) == 1
    assert server.requests_for("conversations.create")[0].body == {"metadata": {"app": "tests"}}
    bodies = [r.body for r in server.requests_for("responses")]
    assert all(body["conversation"] == conversation_id for body in bodies)
    assert [item["role"] for item in server.conversation_items(conversation_id)] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]


def test_a_first_run_without_a_conversation_creates_one(
    server: FakeModelServer, sdk_args: dict[str, Any]
) -> None:
    agent = Agent(ConversationsClient("fake", **sdk_args))
    session = agent.create_session()
    run(converse(agent, session, "hello"))
    assert session.conversation_id is not None
    assert len(server.requests_for("conversations.create")) == 1


@pytest.mark.parametrize("kind", ["chat", "responses", "responses-local", "conversations"])
def test_tool_calls_run_and_their_results_reach_the_model(
    kind: str, server: FakeModelServer, sdk_args: dict[str, Any]
) -> None:
    clients: dict[str, Callable[[], Any]] = {
        "chat": lambda: ChatCompletionsClient("fake", **sdk_args),
        "responses": lambda: ResponsesClient("fake", **sdk_args),
        "responses-local": lambda: ResponsesClient("fake", store=False, **sdk_args),
        "conversations": lambda: ConversationsClient("fake", **sdk_args),
    }
    agent = Agent(clients[kind](), tools=[weather])
    session = agent.create_session()
    response = run(agent.run('call:weather({"city": "Oslo"})', session))
    assert [m.role for m in response.messages] == ["assistant", "tool", "assistant"]
    call = response.messages[0].contents[0]
    assert isinstance(call, FunctionCallContent) and call.name == "weather"
    assert response.text.endswith('| tool results: \'{"city": "Oslo", "temp": 21}\'')
    assert response.text.startswith("[seen 3]")


@pytest.mark.parametrize("kind", ["chat", "responses", "responses-local", "conversations"])
def test_streaming_gives_the_same_turns_in_pieces(
    kind: str, server: FakeModelServer, sdk_args: dict[str, Any]
) -> None:
    clients: dict[str, Callable[[], Any]] = {
        "chat": lambda: ChatCompletionsClient("fake", **sdk_args),
        "responses": lambda: ResponsesClient("fake", **sdk_args),
        "responses-local": lambda: ResponsesClient("fake", store=False, **sdk_args),
        "conversations": lambda: ConversationsClient("fake", **sdk_args),
    }

    async def scenario() -> tuple[list[list[ChatResponseUpdate]], list[str]]:
        agent = Agent(clients[kind](), tools=[weather])
        session = agent.create_session()
        updates: list[list[ChatResponseUpdate]] = []
        texts: list[str] = []
        for text in ["Hello there.", 'call:weather({"city": "Oslo"})', "Thanks."]:
            stream = agent.run_stream(text, session)
            updates.append([update async for update in stream])
            texts.append(stream.response.text)
        return updates, texts

    updates, texts = run(scenario())
    assert texts[0] == "[seen 1] first: 'Hello there.' | latest: 'Hello there.'"
    assert texts[2] == "[seen 7] first: 'Hello there.' | latest: 'Thanks.'"
    assert len([u for u in updates[0] if u.text]) > 3  # text arrived in pieces
    assert all(
        r.stream for r in server.requests_for("chat.completions" if kind == "chat" else "responses")
    )


def test_streamed_responses_return_the_conversation_id(
    server: FakeModelServer, sdk_args: dict[str, Any]
) -> None:
    client = ResponsesClient("fake", **sdk_args)

    async def collect() -> list[ChatResponseUpdate]:
        return [u async for u in client.get_streaming_response([Message.user("hi")])]

    updates = run(collect())
    response = ChatResponse.from_updates(updates)
    assert response.conversation_id is not None
    assert server.stored_response(response.conversation_id) is not None
    assert response.text == "[seen 1] first: 'hi' | latest: 'hi'"


@pytest.mark.parametrize(
    "client_kind", ["chat", "responses-local"], ids=["chat-completions", "responses-store-false"]
)
def test_client_managed_clients_refuse_a_service_managed_session(
    client_kind: str, server: FakeModelServer, sdk_args: dict[str, Any]
) -> None:
    service = Agent(ResponsesClient("fake", **sdk_args))
    session = service.create_session()
    run(converse(service, session, "My name is Ada."))
    conversation_id = session.conversation_id
    before = len(server.requests)
    local = (
        ChatCompletionsClient("fake", **sdk_args)
        if client_kind == "chat"
        else ResponsesClient("fake", store=False, **sdk_args)
    )
    switched = Agent(local, history_provider=HistoryProvider("memory://"))
    with pytest.raises(HistoryConflict, match="migrate_to_client_managed"):
        run(switched.run("What is my name?", session))
    assert len(server.requests) == before  # nothing was sent without the history
    assert session.conversation_id == conversation_id  # and the session is unchanged


@pytest.mark.parametrize("source_kind", ["responses", "conversations"])
def test_migrating_a_service_managed_session_keeps_its_history(
    source_kind: str, server: FakeModelServer, sdk_args: dict[str, Any]
) -> None:
    source = (
        ResponsesClient("fake", **sdk_args)
        if source_kind == "responses"
        else ConversationsClient("fake", **sdk_args)
    )
    service = Agent(source, tools=[weather])
    session = service.create_session()
    run(converse(service, session, "My name is Ada.", 'call:weather({"city": "Oslo"})'))
    provider = HistoryProvider("memory://")
    moved = run(migrate_to_client_managed(session, source=source, history_provider=provider))
    assert [m.role for m in moved] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert session.conversation_id is None
    local = Agent(ChatCompletionsClient("fake", **sdk_args), history_provider=provider)
    (reply,) = run(converse(local, session, "What is my name?"))
    assert reply == "[seen 7] first: 'My name is Ada.' | latest: 'What is my name?'"
    # Nothing to do the second time.
    assert run(migrate_to_client_managed(session, source=source, history_provider=provider)) == []


def test_migration_back_after_a_round_trip_stores_only_what_is_new(
    server: FakeModelServer, sdk_args: dict[str, Any]
) -> None:
    provider = HistoryProvider("memory://")
    local = Agent(ChatCompletionsClient("fake", **sdk_args), history_provider=provider)
    session = local.create_session()
    run(converse(local, session, "one"))
    source = ResponsesClient("fake", **sdk_args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the agent warns that the provider is not used
        service = Agent(source, history_provider=provider)
        (reply,) = run(converse(service, session, "two"))
    assert reply == "[seen 3] first: 'one' | latest: 'two'"  # local history went up once
    moved = run(migrate_to_client_managed(session, source=source, history_provider=provider))
    assert [m.text for m in moved] == ["two", reply]
    assert [m.role for m in run(provider.messages(session))] == ["user", "assistant"] * 2


def test_migrating_into_diverged_local_history_is_refused(
    server: FakeModelServer, sdk_args: dict[str, Any]
) -> None:
    source = ResponsesClient("fake", **sdk_args)
    service = Agent(source)
    session = service.create_session()
    run(converse(service, session, "service side"))
    provider = HistoryProvider("memory://")
    run(provider.save(session, [Message.user("something else", message_id="m1")]))
    with pytest.raises(HistoryConflict, match="nothing was migrated"):
        run(migrate_to_client_managed(session, source=source, history_provider=provider))
    assert session.conversation_id is not None


def test_unknown_conversation_or_response_ids_are_a_typed_error(
    server: FakeModelServer, sdk_args: dict[str, Any]
) -> None:
    responses = ResponsesClient("fake", **sdk_args)
    with pytest.raises(ConversationNotFound, match="resp_missing"):
        run(responses.get_response([Message.user("hi")], conversation_id="resp_missing"))
    conversations = ConversationsClient("fake", **sdk_args)
    with pytest.raises(ConversationNotFound, match="conv_missing"):
        run(conversations.get_response([Message.user("hi")], conversation_id="conv_missing"))
    with pytest.raises(ConversationNotFound):
        run(conversations.export_history("conv_missing"))
    with pytest.raises(ConversationNotFound):
        run(responses.export_history("resp_missing"))


def test_ids_of_the_other_service_managed_protocol_are_refused(
    server: FakeModelServer, sdk_args: dict[str, Any]
) -> None:
    with pytest.raises(HistoryConflict, match="ConversationsClient"):
        run(ResponsesClient("fake", **sdk_args).get_response([], conversation_id="conv_1"))
    with pytest.raises(HistoryConflict, match="ResponsesClient"):
        run(ConversationsClient("fake", **sdk_args).get_response([], conversation_id="resp_1"))
    assert server.requests == []


def test_run_sync_works_turn_after_turn(
    server: FakeModelServer, sdk_args: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # Each run_sync is a new event loop; the client's connections must follow it, and
    # the old loop's client must not fail (loudly, at garbage collection) in a new one.
    gc.collect()  # other tests' clients, collected outside any loop: quietly
    agent = Agent(ChatCompletionsClient("fake", **sdk_args))
    session = agent.create_session()

    async def collect_in_a_running_loop() -> None:
        gc.collect()  # what the collector does at some point, while some loop runs
        await asyncio.sleep(0.05)

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        for turn in range(3):
            agent.run_sync(f"turn {turn}", session)
        assert agent.run_sync("last", session).text.startswith("[seen 7]")
        asyncio.run(collect_in_a_running_loop())
        gc.collect()
    assert not [r.getMessage() for r in caplog.records if r.name == "asyncio"]


def test_reprs_and_errors_never_show_the_api_key(server: FakeModelServer) -> None:
    secret = "sk-very-secret-value"
    for client in (
        ChatCompletionsClient("fake", base_url=server.base_url, api_key=secret),
        ResponsesClient("fake", base_url=server.base_url, api_key=secret, store=False),
        ConversationsClient("fake", base_url=server.base_url, api_key=secret),
    ):
        assert secret not in repr(client)
        assert "fake" in repr(client) and "127.0.0.1" in repr(client)
    assert all(secret not in str(r.headers) for r in server.requests)


def test_usage_and_response_id_are_reported(
    server: FakeModelServer, sdk_args: dict[str, Any]
) -> None:
    response = run(ChatCompletionsClient("fake", **sdk_args).get_response([Message.user("x")]))
    assert response.additional_properties["response_id"]
    assert response.additional_properties["usage"]["total_tokens"] > 0
    response = run(
        ResponsesClient("fake", store=False, **sdk_args).get_response([Message.user("x")])
    )
    assert response.conversation_id is None
    assert response.additional_properties["response_id"].startswith("resp_")


def test_request_options_are_passed_through(
    server: FakeModelServer, sdk_args: dict[str, Any]
) -> None:
    client = ChatCompletionsClient("fake", options={"temperature": 0.25, "seed": 7}, **sdk_args)
    run(client.get_response([Message.user("x")]))
    body = server.requests_for("chat.completions")[0].body
    assert body["temperature"] == 0.25 and body["seed"] == 7
    with pytest.raises(ValueError, match="model"):
        ChatCompletionsClient("", **sdk_args)
