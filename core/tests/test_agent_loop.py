"""The full agent loop: tools, streaming, context providers and the conflict policy."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

from chatkeep.core import (
    Agent,
    AgentSession,
    ChatResponse,
    ChatResponseUpdate,
    Context,
    ContextProvider,
    FunctionCallContent,
    FunctionResultContent,
    HistoryConflict,
    HistoryProvider,
    Message,
    MessageSource,
    OfflineChatClient,
    Store,
    TextContent,
    ToolLoopLimit,
    read_messages,
    read_view,
    tool,
)

MakeStore = Callable[..., tuple[Store, Any]]


def weather(city: str) -> dict[str, Any]:
    """Today's weather."""
    return {"city": city, "sky": "sunny", "temp": 21}


async def slow_clock() -> str:
    """The time."""
    await asyncio.sleep(0)
    return "noon"


def broken(x: int) -> int:
    raise ValueError("no such x")


def call(call_id: str, name: str, **arguments: Any) -> list[FunctionCallContent]:
    return [FunctionCallContent(call_id, name, arguments)]


def roles(messages: Sequence[Message]) -> list[str]:
    return [m.role for m in messages]


# -- tools -------------------------------------------------------------------------------------


def test_tool_calls_and_results_are_stored_in_order_in_one_append(
    counting_store: MakeStore,
) -> None:
    store, backend = counting_store()
    client = OfflineChatClient(script=[call("c1", "weather", city="Oslo")])
    agent = Agent(client, history_provider=HistoryProvider(store), tools=[weather, slow_clock])
    session = agent.create_session()
    response = agent.run_sync("Weather in Oslo?", session)
    assert roles(response.messages) == ["assistant", "tool", "assistant"]
    assert "tool results: {'city': 'Oslo', 'sky': 'sunny', 'temp': 21}" in response.text
    assert client.tool_names[0] == ["weather", "slow_clock"]
    assert len(backend.appends) == 1
    stored = read_messages(store, session.session_id)
    assert roles(stored) == ["user", "assistant", "tool", "assistant"]
    (call_content,) = stored[1].contents
    assert call_content == FunctionCallContent("c1", "weather", {"city": "Oslo"})
    (result_content,) = stored[2].contents
    assert isinstance(result_content, FunctionResultContent)
    assert result_content.result == {"city": "Oslo", "sky": "sunny", "temp": 21}
    # The next turn sends the whole exchange back.
    agent.run_sync("thanks", session)
    assert roles(client.requests[-1]) == ["user", "assistant", "tool", "assistant", "user"]


def test_tool_errors_and_unknown_tools_are_reported_to_the_model(
    counting_store: MakeStore,
) -> None:
    store, _ = counting_store()
    client = OfflineChatClient(
        script=[
            [
                FunctionCallContent("a", "broken", {"x": 1}),
                FunctionCallContent("b", "nope", {}),
                FunctionCallContent("c", "broken", '{"y": 1}'),
            ]
        ]
    )
    agent = Agent(client, history_provider=HistoryProvider(store), tools=[broken])
    session = agent.create_session()
    agent.run_sync("go", session)
    results = read_messages(store, session.session_id)[2].contents
    assert [getattr(r, "exception", None) for r in results] == [
        "ValueError: no such x",
        "unknown tool 'nope'",
        "unknown arguments: y",
    ]


def test_several_rounds_then_the_limit(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    client = OfflineChatClient(
        script=[call("1", "slow_clock"), call("2", "slow_clock"), call("3", "slow_clock")]
    )
    agent = Agent(client, history_provider=HistoryProvider(store), tools=[slow_clock])
    response = agent.run_sync("time?")
    assert roles(response.messages) == ["assistant", "tool"] * 3 + ["assistant"]

    client.add_script(*(call(str(n), "slow_clock") for n in range(5)))
    limited = Agent(
        client, history_provider=HistoryProvider(store), tools=[slow_clock], max_tool_iterations=2
    )
    appends = len(backend.appends)
    session = limited.create_session()
    with pytest.raises(ToolLoopLimit, match="after 2 rounds"):
        limited.run_sync("time?", session)
    assert len(backend.appends) == appends  # nothing of the failed turn is stored
    assert read_view(store, session.session_id) == []


def test_without_tools_a_function_call_just_ends_the_turn(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    client = OfflineChatClient(script=[call("1", "server_side_tool")])
    agent = Agent(client, history_provider=HistoryProvider(store))
    response = agent.run_sync("hi")
    assert roles(response.messages) == ["assistant"]
    assert len(client.requests) == 1


def test_service_managed_tool_rounds_send_only_the_results() -> None:
    client = OfflineChatClient(service_managed=True, script=[call("c1", "weather", city="Bergen")])
    agent = Agent(client, tools=[weather])
    session = agent.create_session()
    agent.run_sync("weather?", session)
    assert session.conversation_id is not None
    assert roles(client.requests[1]) == ["tool"]
    agent.run_sync("and now?", session)
    assert roles(client.requests[2]) == ["user"]


def test_fifty_turns_with_tools_store_no_duplicates(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    client = OfflineChatClient()
    agent = Agent(client, history_provider=HistoryProvider(store), tools=[weather])
    session = agent.create_session()
    for turn in range(50):
        if turn % 5 == 0:
            client.add_script(call(f"c{turn}", "weather", city=f"city {turn}"))
        agent.run_sync(f"turn {turn}", session)
    log = store.read(session.session_id)
    assert len({r.id for r in log}) == len(log) == 50 * 2 + 10 * 2
    assert len(backend.appends) == 50


# -- streaming ---------------------------------------------------------------------------------


async def collect(stream: Any) -> list[ChatResponseUpdate]:
    return [update async for update in stream]


def test_run_stream_yields_pieces_and_stores_the_turn_once(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    client = OfflineChatClient(script=[call("c1", "weather", city="Oslo")])
    agent = Agent(client, history_provider=HistoryProvider(store), tools=[weather])
    session = agent.create_session()
    stream = agent.run_stream("Weather?", session)
    updates = asyncio.run(collect(stream))
    assert len(updates) > 5
    assert len(backend.appends) == 1
    stored = read_messages(store, session.session_id)
    assert roles(stored) == ["user", "assistant", "tool", "assistant"]
    assert stored[-1].text == "".join(u.text for u in updates if u.role == "assistant")
    assert stored[1:] == stream.response.messages
    assert stored[-1].text.startswith("[seen 3] first: 'Weather?'")


def test_failed_stream_stores_nothing(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    client = OfflineChatClient(fail_stream_after=3)
    agent = Agent(client, history_provider=HistoryProvider(store))
    session = agent.create_session()
    seen: list[ChatResponseUpdate] = []

    async def consume() -> None:
        async for update in agent.run_stream("hello", session):
            seen.append(update)

    with pytest.raises(RuntimeError, match="mid-stream"):
        asyncio.run(consume())
    assert len(seen) == 3
    assert backend.appends == []
    client.fail_next = True
    with pytest.raises(RuntimeError, match="simulated model failure"):
        asyncio.run(consume())
    assert backend.appends == []
    asyncio.run(consume())  # and a good stream afterwards stores its turn
    assert len(backend.appends) == 1


def test_abandoned_stream_stores_nothing(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    agent = Agent(OfflineChatClient(), history_provider=HistoryProvider(store))

    async def first_only() -> None:
        stream = agent.run_stream("hello there, model")
        async for _ in stream:
            break
        await stream.aclose()
        with pytest.raises(RuntimeError, match="not completed"):
            _ = stream.response

    asyncio.run(first_only())
    assert backend.appends == []


def test_run_stream_with_a_client_that_cannot_stream(counting_store: MakeStore) -> None:
    store, _ = counting_store()

    class Plain:
        def get_response(
            self, messages: list[Message], *, conversation_id: str | None = None
        ) -> ChatResponse:
            return ChatResponse([Message.assistant("whole reply")])

    agent = Agent(Plain(), history_provider=HistoryProvider(store))
    session = agent.create_session()
    updates = asyncio.run(collect(agent.run_stream("hi", session)))
    assert [u.text for u in updates] == ["whole reply"]
    assert [m.text for m in read_messages(store, session.session_id)] == ["hi", "whole reply"]


def test_updates_merge_into_messages() -> None:
    updates = [
        ChatResponseUpdate([TextContent("Hel")], "assistant", "m1"),
        ChatResponseUpdate([TextContent("lo")]),
        ChatResponseUpdate([FunctionCallContent("c1", "f", '{"a"')], message_id="m1"),
        ChatResponseUpdate([FunctionCallContent("c1", "", ": 1}")]),
        ChatResponseUpdate([TextContent("next")], "assistant", "m2"),
        ChatResponseUpdate(conversation_id="conv-9"),
    ]
    response = ChatResponse.from_updates(updates)
    assert response.conversation_id == "conv-9"
    first, second = response.messages
    assert first.contents == [TextContent("Hello"), FunctionCallContent("c1", "f", '{"a": 1}')]
    assert (second.message_id, second.text) == ("m2", "next")


def test_async_streaming_client_generator_is_supported(counting_store: MakeStore) -> None:
    store, _ = counting_store()

    class Streamer:
        def get_response(self, messages: list[Message], **_: Any) -> ChatResponse:
            raise AssertionError("run_stream should stream")

        async def get_streaming_response(
            self, messages: list[Message], **_: Any
        ) -> AsyncIterator[ChatResponseUpdate]:
            for word in ["a", "b", "c"]:
                yield ChatResponseUpdate([TextContent(word)], "assistant")

    agent = Agent(Streamer(), history_provider=HistoryProvider(store))
    session = agent.create_session()
    asyncio.run(collect(agent.run_stream("hi", session)))
    assert read_messages(store, session.session_id)[-1].text == "abc"


# -- context providers -------------------------------------------------------------------------


class Facts(ContextProvider):
    source_id = "facts"

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    async def invoking(self, session: AgentSession, messages: Sequence[Message]) -> Context:
        return Context(
            messages=[Message.user("fact: the user likes tea")],
            instructions="Mention tea.",
            tools=[tool(slow_clock)],
        )

    async def invoked(
        self,
        session: AgentSession,
        request_messages: Sequence[Message],
        response_messages: Sequence[Message] = (),
        *,
        error: BaseException | None = None,
    ) -> None:
        self.calls.append((request_messages[-1].text, error))


@pytest.mark.parametrize("store_context", [False, True])
def test_context_messages_are_tagged_and_stored_only_when_asked(
    counting_store: MakeStore, store_context: bool
) -> None:
    store, _ = counting_store()
    client = OfflineChatClient()
    facts = Facts()
    agent = Agent(
        client,
        history_provider=HistoryProvider(store, store_context_messages=store_context),
        context_providers=[facts],
        instructions="Be brief.",
    )
    session = agent.create_session()
    agent.run_sync("hello", session)
    sent = client.requests[0]
    assert sent[0].role == "system" and sent[0].text == "Be brief.\n\nMention tea."
    assert [m.text for m in sent[1:]] == ["fact: the user likes tea", "hello"]
    assert sent[1].source is MessageSource.CONTEXT_PROVIDER and sent[1].source_id == "facts"
    assert client.tool_names[0] == ["slow_clock"]
    stored = [m.text for m in read_messages(store, session.session_id)]
    expected = ["hello"] if not store_context else ["fact: the user likes tea", "hello"]
    assert stored[:-1] == expected
    assert facts.calls == [("hello", None)]
    assert agent.get_service(Facts) is facts


def test_context_provider_sees_the_failure() -> None:
    facts = Facts()
    client = OfflineChatClient(fail_next=True)
    agent = Agent(client, context_providers=[facts])
    with pytest.raises(RuntimeError):
        agent.run_sync("hello")
    assert isinstance(facts.calls[0][1], RuntimeError)


# -- conflict policy ---------------------------------------------------------------------------


def test_conflict_policy_raise_and_clear(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    strict = Agent(
        OfflineChatClient(service_managed=True),
        history_provider=HistoryProvider(store),
        conflict_policy="raise",
    )
    with pytest.raises(HistoryConflict):
        strict.run_sync("hi")
    quiet = Agent(
        OfflineChatClient(service_managed=True),
        history_provider=HistoryProvider(store),
        conflict_policy="clear",
    )
    session = quiet.create_session()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet.run_sync("hi", session)
        quiet.run_sync("again", session)
    assert session.conversation_id is not None
    assert backend.appends == []
    with pytest.raises(ValueError, match="conflict_policy"):
        Agent(OfflineChatClient(), conflict_policy="ignore")  # type: ignore[arg-type]


def test_agent_arguments_are_checked() -> None:
    with pytest.raises(ValueError):
        Agent(OfflineChatClient(), max_tool_iterations=-1)
    with pytest.raises(ValueError, match="weather"):
        Agent(OfflineChatClient(), tools=[weather, tool(name="weather")(slow_clock)])
