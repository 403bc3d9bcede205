"""The fake model server's Anthropic Messages API through the official ``anthropic`` SDK,
and the same conversation through every protocol giving the same replies."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai
import pytest

from chatkeep.core import Agent, HistoryProvider, OfflineChatClient
from chatkeep.fake_model import FakeModelServer

WEATHER: Any = {
    "name": "weather",
    "description": "The weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def raw_request(
    server: FakeModelServer,
    method: str,
    path: str,
    body: Any,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """A request without an SDK: (status, parsed JSON body)."""
    request = urllib.request.Request(
        server.url + path, data=json.dumps(body).encode(), method=method
    )
    request.add_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture(scope="module")
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as running:
        yield running


@pytest.fixture
def fake(server: FakeModelServer) -> FakeModelServer:
    server.reset()
    return server


@pytest.fixture
def client(fake: FakeModelServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(
        base_url=fake.anthropic_base_url, api_key="sk-ant-secret", max_retries=0
    ) as sdk:
        yield sdk


def test_messages_reply_and_top_level_system(
    fake: FakeModelServer, client: anthropic.Anthropic
) -> None:
    answer = client.messages.create(
        model="claude-test",
        max_tokens=100,
        system=[{"type": "text", "text": "be brief"}],
        messages=[
            {"role": "user", "content": "I am Ada"},
            {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]},
            {"role": "user", "content": "Who am I?"},
        ],
    )
    assert answer.stop_reason == "end_turn"
    assert answer.content[0].type == "text"
    assert answer.content[0].text == "[seen 3] first: 'I am Ada' | latest: 'Who am I?'"
    assert answer.usage.input_tokens > 0
    (record,) = fake.requests
    assert record.api == "messages" and record.path == "/v1/messages"
    assert "sk-ant-secret" not in repr(record) + json.dumps(record.headers)
    assert "x-api-key" not in record.headers


def test_max_tokens_is_required(fake: FakeModelServer) -> None:
    status, body = raw_request(
        fake,
        "POST",
        "/v1/messages",
        {"model": "c", "messages": [{"role": "user", "content": "hi"}]},
        {"x-api-key": "k"},
    )
    assert status == 400
    assert body == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"},
    }


def test_messages_without_a_key_are_refused(fake: FakeModelServer) -> None:
    status, body = raw_request(
        fake, "POST", "/v1/messages", {"model": "c", "max_tokens": 5, "messages": []}
    )
    assert status == 401 and body["error"]["type"] == "authentication_error"


def test_a_system_role_in_messages_is_refused(client: anthropic.Anthropic) -> None:
    system_message: Any = {"role": "system", "content": "x"}
    with pytest.raises(anthropic.BadRequestError, match="top-level `system`"):
        client.messages.create(model="c", max_tokens=10, messages=[system_message])


def test_tool_round_trip(client: anthropic.Anthropic) -> None:
    messages: list[Any] = [{"role": "user", "content": 'call:weather({"city": "Oslo"})'}]
    first = client.messages.create(model="c", max_tokens=50, messages=messages, tools=[WEATHER])
    assert first.stop_reason == "tool_use"
    (use,) = first.content
    assert use.type == "tool_use" and use.input == {"city": "Oslo"}
    messages.append({"role": "assistant", "content": [use.model_dump(exclude_none=True)]})
    messages.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}],
        }
    )
    second = client.messages.create(model="c", max_tokens=50, messages=messages, tools=[WEATHER])
    assert second.content[0].type == "text"
    assert second.content[0].text.startswith("[seen 3]")
    assert second.content[0].text.endswith("| tool results: 'sunny'")


def test_unpaired_tool_blocks_are_refused(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError, match="unexpected `tool_use_id`"):
        client.messages.create(
            model="c",
            max_tokens=5,
            messages=[
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "?"}],
                }
            ],
        )
    with pytest.raises(anthropic.BadRequestError, match="without `tool_result` blocks"):
        client.messages.create(
            model="c",
            max_tokens=5,
            messages=[
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}],
                },
                {"role": "user", "content": "ignored the call"},
            ],
        )


def test_thinking_signatures_are_checked(client: anthropic.Anthropic) -> None:
    first = client.messages.create(
        model="c",
        max_tokens=2000,
        thinking={"type": "enabled", "budget_tokens": 1024},
        messages=[{"role": "user", "content": "think"}],
    )
    thinking, text = first.content
    assert thinking.type == "thinking" and text.type == "text"
    history: list[Any] = [
        {"role": "user", "content": "think"},
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": "again"},
    ]
    again = client.messages.create(model="c", max_tokens=10, messages=history)
    assert again.content[0].type == "text"
    assert again.content[0].text == "[seen 3] first: 'think' | latest: 'again'"
    history[1]["content"][0]["thinking"] = "a different thought"
    with pytest.raises(anthropic.BadRequestError, match="signature"):
        client.messages.create(model="c", max_tokens=10, messages=history)


def test_separate_user_messages_are_separate_turns(client: anthropic.Anthropic) -> None:
    answer = client.messages.create(
        model="c",
        max_tokens=10,
        messages=[{"role": "user", "content": "one"}, {"role": "user", "content": "two"}],
    )
    assert answer.content[0].type == "text"
    assert answer.content[0].text == "[seen 2] first: 'one' | latest: 'two'"


def test_stream_helper_with_tool_and_thinking(client: anthropic.Anthropic) -> None:
    with client.messages.stream(
        model="c",
        max_tokens=2000,
        thinking={"type": "enabled", "budget_tokens": 1024},
        tools=[WEATHER],
        messages=[{"role": "user", "content": 'call:weather({"city": "Oslo"})'}],
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    thinking, use = final.content
    assert thinking.type == "thinking" and thinking.signature.startswith("sig_")
    assert use.type == "tool_use" and use.input == {"city": "Oslo"}
    assert final.stop_reason == "tool_use"


def test_async_stream_text(fake: FakeModelServer) -> None:
    async def run() -> tuple[str, str]:
        async with anthropic.AsyncAnthropic(
            base_url=fake.anthropic_base_url, api_key="k", max_retries=0
        ) as sdk:
            events = await sdk.messages.create(
                model="c",
                max_tokens=50,
                messages=[{"role": "user", "content": "async hello"}],
                stream=True,
            )
            text = ""
            async for event in events:
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    text += event.delta.text
            async with sdk.messages.stream(
                model="c", max_tokens=50, messages=[{"role": "user", "content": "helper"}]
            ) as stream:
                helper = await stream.get_final_text()
            return text, helper

    text, helper = asyncio.run(run())
    assert text == "[seen 1] first: 'async hello' | latest: 'async hello'"
    assert helper == "[seen 1] first: 'helper' | latest: 'helper'"
    assert all(r.stream for r in fake.requests)


def test_count_tokens(client: anthropic.Anthropic) -> None:
    counted = client.messages.count_tokens(
        model="c", messages=[{"role": "user", "content": "one two three"}]
    )
    assert counted.input_tokens > 0


# -- the same conversation through every protocol -----------------------------------

TURNS = ["I am Ada", 'call:weather({"city": "Oslo"})', "thanks"]
TOOL_OUTPUT = "sunny in Oslo"
WEATHER_CC: Any = {"type": "function", "function": {"name": "weather", "parameters": {}}}
WEATHER_RESPONSES: Any = {"type": "function", "name": "weather", "parameters": {}}


def via_chat_completions(sdk: openai.OpenAI) -> list[str]:
    messages: list[Any] = []
    replies = []
    for text in TURNS:
        messages.append({"role": "user", "content": text})
        while True:
            answer = sdk.chat.completions.create(model="m", messages=messages, tools=[WEATHER_CC])
            message = answer.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                break
            for call in message.tool_calls:
                messages.append({"role": "tool", "tool_call_id": call.id, "content": TOOL_OUTPUT})
        replies.append(message.content or "")
    return replies


def via_responses(sdk: openai.OpenAI, mode: str) -> list[str]:
    """``chain``: previous_response_id; ``stateless``: store=False and the whole history;
    ``conversation``: a Conversations API conversation."""
    replies = []
    previous: str | None = None
    history: list[Any] = []
    conversation = sdk.conversations.create().id if mode == "conversation" else None
    for text in TURNS:
        new_input: list[Any] = [{"role": "user", "content": text}]
        while True:
            kwargs: dict[str, Any] = {"tools": [WEATHER_RESPONSES]}
            if mode == "chain":
                kwargs["input"] = new_input
                if previous:
                    kwargs["previous_response_id"] = previous
            elif mode == "conversation":
                kwargs["input"], kwargs["conversation"] = new_input, conversation
            else:
                history.extend(new_input)
                kwargs["input"], kwargs["store"] = history, False
            answer = sdk.responses.create(model="m", **kwargs)
            previous = answer.id
            if mode == "stateless":
                history.extend(item.model_dump(exclude_none=True) for item in answer.output)
            calls = [item for item in answer.output if item.type == "function_call"]
            if not calls:
                break
            new_input = [
                {"type": "function_call_output", "call_id": c.call_id, "output": TOOL_OUTPUT}
                for c in calls
            ]
        replies.append(answer.output_text)
    return replies


def via_messages(sdk: anthropic.Anthropic) -> list[str]:
    messages: list[Any] = []
    replies = []
    for text in TURNS:
        messages.append({"role": "user", "content": text})
        while True:
            answer = sdk.messages.create(
                model="c", max_tokens=100, messages=messages, tools=[WEATHER]
            )
            blocks = [b.model_dump(exclude_none=True) for b in answer.content]
            messages.append({"role": "assistant", "content": blocks})
            uses = [b for b in blocks if b["type"] == "tool_use"]
            if not uses:
                break
            results = [
                {"type": "tool_result", "tool_use_id": b["id"], "content": TOOL_OUTPUT}
                for b in uses
            ]
            messages.append({"role": "user", "content": results})
        replies.append("".join(b["text"] for b in blocks if b["type"] == "text"))
    return replies


def test_every_protocol_gives_the_same_conversation(
    fake: FakeModelServer, client: anthropic.Anthropic
) -> None:
    with openai.OpenAI(base_url=fake.base_url, api_key="k", max_retries=0) as sdk:
        runs: dict[str, Callable[[], list[str]]] = {
            "chat completions": lambda: via_chat_completions(sdk),
            "responses chain": lambda: via_responses(sdk, "chain"),
            "responses store=false": lambda: via_responses(sdk, "stateless"),
            "conversations": lambda: via_responses(sdk, "conversation"),
            "messages": lambda: via_messages(client),
        }
        results = {name: run() for name, run in runs.items()}
    expected = [
        "[seen 1] first: 'I am Ada' | latest: 'I am Ada'",
        "[seen 5] first: 'I am Ada' | latest: 'call:weather({\"city\": \"Oslo\"})'"
        " | tool results: 'sunny in Oslo'",
        "[seen 7] first: 'I am Ada' | latest: 'thanks'",
    ]
    assert results == dict.fromkeys(runs, expected)
    assert all(r.status == 200 for r in fake.requests)


def test_replies_match_the_offline_client(fake: FakeModelServer) -> None:
    """The fake server's model and chatkeep's OfflineChatClient agree on the same history."""

    async def offline() -> list[str]:
        agent = Agent(OfflineChatClient(), history_provider=HistoryProvider("memory://"))
        session = agent.create_session()
        return [(await agent.run(text, session)).text for text in ["a", "b", "c"]]

    with openai.OpenAI(base_url=fake.base_url, api_key="k", max_retries=0) as sdk:
        messages: list[Any] = []
        served = []
        for text in ["a", "b", "c"]:
            messages.append({"role": "user", "content": text})
            answer = sdk.chat.completions.create(model="m", messages=messages)
            served.append(answer.choices[0].message.content)
            messages.append({"role": "assistant", "content": served[-1]})
    assert served == asyncio.run(offline())
