"""Pydantic AI's own runner on the adapter: ``Agent.run`` with ``TestModel`` and
``FunctionModel`` over a multi-turn conversation with a tool call, a second process that
resumes the conversation by id, and the Vercel AI and AG-UI UI adapters with
``conversation_store=``, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.ui.ag_ui import AGUIAdapter
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from chatkeep.core import read_view
from chatkeep.pydantic_ai import ChatkeepConversationStore

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("error::ResourceWarning")]


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest) -> str:
    value: str = request.getfixturevalue(f"{request.param}_url")
    return value


def weather_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Calls the weather tool for a new question, then answers from its result; answers a
    follow-up from what the history holds (so a lost history shows)."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    for part in last.parts:
        if isinstance(part, ToolReturnPart):
            return ModelResponse(parts=[TextPart(f"It is {part.content}.")])
    prompt = next(p.content for p in last.parts if isinstance(p, UserPromptPart))
    if isinstance(prompt, str) and prompt.startswith("Weather in "):
        city = prompt.removeprefix("Weather in ").rstrip("?")
        return ModelResponse(parts=[ToolCallPart("weather", {"city": city}, "call-1")])
    asked = [
        p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    ]
    return ModelResponse(parts=[TextPart(f"You asked {len(asked)} questions; first: {asked[0]}")])


async def weather_stream(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    """:func:`weather_model`, streamed (the UI adapters stream the run)."""
    response = weather_model(messages, info)
    for part in response.parts:
        if isinstance(part, ToolCallPart):
            yield {
                0: DeltaToolCall(
                    part.tool_name, json.dumps(part.args), tool_call_id=part.tool_call_id
                )
            }
        elif isinstance(part, TextPart):
            yield part.content


def make_agent() -> Agent[None, str]:
    agent = Agent(FunctionModel(weather_model, stream_function=weather_stream))

    @agent.tool_plain
    def weather(city: str) -> str:
        """Today's weather in a city."""
        return f"sunny in {city}"

    return agent


async def turn(store: ChatkeepConversationStore, agent: Agent[None, str], prompt: str) -> str:
    conversation = await store.load("trip") or Conversation(conversation_id="trip")
    result = await agent.run(prompt, conversation=conversation)
    await store.save(result)
    return result.output


async def test_a_conversation_with_a_tool_call(url: str) -> None:
    agent = make_agent()
    async with ChatkeepConversationStore(url=url, prefix="agent-test:") as store:
        await store.delete("trip")
        assert await turn(store, agent, "Weather in Oslo?") == "It is sunny in Oslo."
        assert await turn(store, agent, "And what did I ask?") == (
            "You asked 2 questions; first: Weather in Oslo?"
        )
        loaded = await store.load("trip")
        assert loaded is not None
        assert len(loaded.messages) == 6  # ask, call, return, answer, ask, answer
        assert loaded.usage.requests == 3 and loaded.usage.tool_calls == 1
        view = read_view(store.store, store.session_id("trip"))
        assert [m.role for m in view] == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
        ]
        assert view[1].contents[0].type == "function_call"


async def test_test_model_runs_and_a_stale_copy_conflicts(url: str) -> None:
    agent = Agent(TestModel())

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    async with ChatkeepConversationStore(url=url, prefix="agent-test:") as store:
        await store.delete("tm")
        first = await agent.run("one", conversation=Conversation(conversation_id="tm"))
        await store.save(first)
        loaded = await store.load("tm")
        stale = await store.load("tm")
        assert loaded is not None and stale is not None
        second = await agent.run("two", conversation=loaded)
        await store.save(second)
        assert second.conversation.revision == (await store.read_record("tm")).revision  # type: ignore[union-attr]
        third = await agent.run("three", conversation=stale)
        from pydantic_ai.conversation_store import ConversationConflict

        with pytest.raises(ConversationConflict):
            await store.save(third)
        final = await store.load("tm")
        assert final is not None and final.messages == second.all_messages()


RESUME = textwrap.dedent(
    """
    import asyncio, json, sys
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, UserPromptPart
    from pydantic_ai.models.function import FunctionModel
    from chatkeep.pydantic_ai import ChatkeepConversationStore

    def weather_model(messages, info):
        asked = [p.content for m in messages if m.kind == "request"
                 for p in m.parts if isinstance(p, UserPromptPart)]
        text = f"You asked {{len(asked)}} questions; first: {{asked[0]}}"
        return ModelResponse(parts=[TextPart(text)])

    async def main():
        agent = Agent(FunctionModel(weather_model))
        async with ChatkeepConversationStore(url=sys.argv[1], prefix="agent-test:") as store:
            conversation = await store.load("trip")
            result = await agent.run("Anything else?", conversation=conversation)
            await store.save(result)
            print(json.dumps({{"output": result.output, "messages": len(conversation.messages)}}))

    asyncio.run(main())
    """
)


async def test_a_second_process_resumes_by_id(url: str) -> None:
    agent = make_agent()
    async with ChatkeepConversationStore(url=url, prefix="agent-test:") as store:
        await store.delete("trip")
        await turn(store, agent, "Weather in Bergen?")
    code = RESUME.format()
    done = subprocess.run(
        [sys.executable, "-c", code, url], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    assert report == {"output": "You asked 2 questions; first: Weather in Bergen?", "messages": 4}
    async with ChatkeepConversationStore(url=url, prefix="agent-test:") as store:
        loaded = await store.load("trip")
        assert loaded is not None and len(loaded.messages) == 6


async def test_the_vercel_ui_adapter_keeps_the_conversation(url: str) -> None:
    """``VercelAIAdapter.dispatch_request(..., conversation_store=...)``: the server holds
    the history; each request brings only the new user message."""
    agent = make_agent()
    async with ChatkeepConversationStore(url=url, prefix="ui-test:") as store:
        await store.delete("chat-1")

        async def chat(request: Request) -> Response:
            return await VercelAIAdapter.dispatch_request(
                request, agent=agent, conversation_store=store, conversation_scope="user-7"
            )

        app = Starlette(routes=[Route("/chat", chat, methods=["POST"])])
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://t"
        ) as client:
            for number, text in enumerate(["Weather in Oslo?", "What did I ask?"]):
                body = {
                    "trigger": "submit-message",
                    "id": "chat-1",
                    "messages": [
                        {
                            "id": f"u{number}",
                            "role": "user",
                            "parts": [{"type": "text", "text": text}],
                        }
                    ],
                }
                response = await client.post("/chat", json=body)
                assert response.status_code == 200, response.text
                assert "error" not in response.text.lower()
        loaded = await store.load("chat-1", scope="user-7")
        assert loaded is not None
        texts = [p.content for m in loaded.messages for p in m.parts if isinstance(p, TextPart)]
        assert texts == ["It is sunny in Oslo.", "You asked 2 questions; first: Weather in Oslo?"]
        assert await store.load("chat-1", scope="someone-else") is None
        listed = await store.list_conversations(scope="user-7")
        assert [r.conversation_id for r in listed] == ["chat-1"]


async def test_the_ag_ui_adapter_keeps_the_conversation(url: str) -> None:
    """``AGUIAdapter.dispatch_request(..., conversation_store=...)``: the AG-UI thread is the
    conversation; each run input brings only the new user message, the server loads the
    rest from the store and saves the run (announcing the saved entries to the client)."""
    agent = make_agent()
    async with ChatkeepConversationStore(url=url, prefix="agui-test:") as store:
        await store.delete("thread-1", scope="user-9")

        async def run(request: Request) -> Response:
            return await AGUIAdapter.dispatch_request(
                request, agent=agent, conversation_store=store, conversation_scope="user-9"
            )

        app = Starlette(routes=[Route("/agui", run, methods=["POST"])])
        saved: list[list[str]] = []
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://t"
        ) as client:
            for number, text in enumerate(["Weather in Lima?", "What did I ask?"]):
                body = {
                    "threadId": "thread-1",
                    "runId": f"run-{number}",
                    "state": None,
                    "messages": [{"id": f"u{number}", "role": "user", "content": text}],
                    "tools": [],
                    "context": [],
                    "forwardedProps": None,
                }
                response = await client.post(
                    "/agui", json=body, headers={"accept": "text/event-stream"}
                )
                assert response.status_code == 200, response.text
                events = [
                    json.loads(line.removeprefix("data: "))
                    for line in response.text.splitlines()
                    if line.startswith("data: ")
                ]
                kinds = [event["type"] for event in events]
                assert "RUN_ERROR" not in kinds, events
                assert kinds[-1] == "RUN_FINISHED"
                saved += [
                    event["value"]["entry_ids"]
                    for event in events
                    if event["type"] == "CUSTOM"
                    and event.get("name") == "pydantic_ai_conversation_saved"
                ]
        loaded = await store.load("thread-1", scope="user-9")
        assert loaded is not None
        texts = [p.content for m in loaded.messages for p in m.parts if isinstance(p, TextPart)]
        assert texts == ["It is sunny in Lima.", "You asked 2 questions; first: Weather in Lima?"]
        # The entry ids the client was told are the stored history's, in order.
        record = await store.read_record("thread-1")
        assert record is not None and record.scope == "user-9"
        history = await store.read_history(record.head_id)
        assert [entry_id for ids in saved for entry_id in ids] == [e.id for e in history]
        assert await store.load("thread-1", scope="someone-else") is None
        # chatkeep's own readers see the same conversation (roles and text).
        view = read_view(store.store, store.session_id("thread-1"))
        assert view[0].role == "user" and view[-1].role == "assistant"
        assert view[-1].text == "You asked 2 questions; first: Weather in Lima?"
