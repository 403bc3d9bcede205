"""The fake model server, driven through the official ``openai`` SDK (sync and async).

Anthropic Messages and the cross-protocol checks are in ``test_fake_model_anthropic.py``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai
import pytest

from chatkeep.fake_model import FakeModelServer, parse_tool_requests

WEATHER_TOOL_CC: Any = {
    "type": "function",
    "function": {
        "name": "weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
WEATHER_TOOL_RESPONSES: Any = {
    "type": "function",
    "name": "weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as running:
        yield running


@pytest.fixture
def fake(server: FakeModelServer) -> FakeModelServer:
    server.reset()
    return server


@pytest.fixture
def client(fake: FakeModelServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=fake.base_url, api_key="sk-test-secret", max_retries=0) as sdk:
        yield sdk


def raw_request(
    server: FakeModelServer,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """A request without an SDK: (status, parsed JSON body)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


# -- the model ----------------------------------------------------------------------


def test_tool_requests_are_parsed_from_text() -> None:
    assert parse_tool_requests('please call:weather({"city": "Oslo (NO)"}) now') == [
        ("weather", '{"city":"Oslo (NO)"}')
    ]
    assert parse_tool_requests("call:clock() and call:a({}) call:bad([1])") == [
        ("clock", "{}"),
        ("a", "{}"),
    ]
    assert parse_tool_requests("no calls here") == []


# -- server basics ------------------------------------------------------------------


def test_requests_without_a_key_are_refused(fake: FakeModelServer) -> None:
    status, body = raw_request(
        fake,
        "POST",
        "/v1/chat/completions",
        {"model": "m", "messages": [{"role": "user", "content": "x"}]},
    )
    assert status == 401
    assert "API key" in body["error"]["message"]
    status, _ = raw_request(
        fake,
        "POST",
        "/v1/chat/completions",
        {"model": "m", "messages": [{"role": "user", "content": "x"}]},
        {"api-key": "azure-style"},
    )
    assert status == 200


def test_credentials_are_never_recorded(fake: FakeModelServer, client: openai.OpenAI) -> None:
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    (record,) = fake.requests
    assert "sk-test-secret" not in repr(record) + json.dumps(record.headers)
    assert "authorization" not in record.headers
    assert record.headers["content-type"] == "application/json"


def test_any_path_prefix_reaches_the_api(fake: FakeModelServer) -> None:
    with openai.OpenAI(
        base_url=fake.url + "/compatible-mode/v1", api_key="k", max_retries=0
    ) as sdk:
        answer = sdk.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
    assert answer.choices[0].message.content == "[seen 1] first: 'hi' | latest: 'hi'"
    assert fake.requests[-1].path == "/compatible-mode/v1/chat/completions"


def test_the_server_runs_as_a_command() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "chatkeep.fake_model", "--no-auth"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.startswith("FAKE_MODEL_URL=http://127.0.0.1:")
        url = line.split("=", 1)[1]
        body = json.dumps({"model": "m", "input": "hi"}).encode()
        request = urllib.request.Request(url + "/v1/responses", data=body, method="POST")
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert json.loads(answer.read())["output"][0]["content"][0]["text"].startswith(
                "[seen 1]"
            )
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_unknown_routes_are_404(fake: FakeModelServer) -> None:
    status, body = raw_request(fake, "GET", "/v1/nothing-here", headers={"x-api-key": "k"})
    assert status == 404
    assert fake.requests[-1].api == "unknown"
    assert "Unknown request URL" in body["error"]["message"]


def test_injected_failures_raise_then_clear(fake: FakeModelServer, client: openai.OpenAI) -> None:
    fake.fail_next(503, "try later")
    with pytest.raises(openai.InternalServerError, match="try later"):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    ok = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert ok.choices[0].message.content
    assert [r.status for r in fake.requests] == [503, 200]


def test_concurrent_clients_keep_their_own_branches(fake: FakeModelServer) -> None:
    def chain(worker: int) -> str:
        with openai.OpenAI(base_url=fake.base_url, api_key="k", max_retries=0) as sdk:
            previous = sdk.responses.create(model="m", input=f"w{worker} start").id
            for turn in range(4):
                answer = sdk.responses.create(
                    model="m", input=f"w{worker} t{turn}", previous_response_id=previous
                )
                previous = answer.id
            return answer.output_text

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(chain, range(6)))
    assert results == [f"[seen 9] first: 'w{w} start' | latest: 'w{w} t3'" for w in range(6)]


def test_reset_forgets_state_and_log(fake: FakeModelServer, client: openai.OpenAI) -> None:
    first = client.responses.create(model="m", input="hi")
    fake.reset()
    assert fake.requests == []
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)


# -- Chat Completions ---------------------------------------------------------------


def test_chat_completions_reply_reveals_the_history(client: openai.OpenAI) -> None:
    answer = client.chat.completions.create(
        model="m",
        messages=[
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "I am Ada"},
            {"role": "assistant", "content": "Hello Ada"},
            {"role": "user", "content": [{"type": "text", "text": "Who am I?"}]},
        ],
    )
    choice = answer.choices[0]
    assert choice.message.content == "[seen 3] first: 'I am Ada' | latest: 'Who am I?'"
    assert choice.finish_reason == "stop"
    assert answer.usage is not None and answer.usage.total_tokens > 0


def test_chat_completions_requests_grow_with_the_history(
    fake: FakeModelServer, client: openai.OpenAI
) -> None:
    messages: list[Any] = []
    for turn in range(4):
        messages.append({"role": "user", "content": f"turn {turn}"})
        answer = client.chat.completions.create(model="m", messages=messages)
        messages.append({"role": "assistant", "content": answer.choices[0].message.content})
        assert (answer.choices[0].message.content or "").startswith(f"[seen {2 * turn + 1}]")
    sizes = [r.size for r in fake.requests_for("chat.completions")]
    assert sizes == sorted(sizes) and len(set(sizes)) == 4


def test_chat_completions_tool_round_trip(client: openai.OpenAI) -> None:
    messages: list[Any] = [{"role": "user", "content": 'call:weather({"city": "Oslo"})'}]
    first = client.chat.completions.create(model="m", messages=messages, tools=[WEATHER_TOOL_CC])
    assert first.choices[0].finish_reason == "tool_calls"
    (call,) = first.choices[0].message.tool_calls or []
    assert call.type == "function"
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "weather",
        {"city": "Oslo"},
    )
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny"})
    second = client.chat.completions.create(model="m", messages=messages, tools=[WEATHER_TOOL_CC])
    assert second.choices[0].message.content == (
        '[seen 3] first: \'call:weather({"city": "Oslo"})\' | latest: '
        "'call:weather({\"city\": \"Oslo\"})' | tool results: 'sunny'"
    )


def test_chat_completions_tool_not_offered_is_text(client: openai.OpenAI) -> None:
    answer = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "call:weather({})"}]
    )
    assert answer.choices[0].message.tool_calls is None
    assert (answer.choices[0].message.content or "").endswith("| tool not offered: 'weather'")


def test_chat_completions_refuses_unpaired_tool_messages(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="preceeding message with 'tool_calls'"):
        client.chat.completions.create(
            model="m",
            messages=[
                {"role": "user", "content": "hi"},
                {"role": "tool", "tool_call_id": "call_x", "content": "?"},
            ],
        )
    with pytest.raises(openai.BadRequestError, match="did not have response messages: call_1"):
        client.chat.completions.create(
            model="m",
            messages=[
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "user", "content": "and?"},
            ],
        )


def test_chat_completions_stream(fake: FakeModelServer, client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "hello there"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "[seen 1] first: 'hello there' | latest: 'hello there'"
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 3
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert fake.requests[-1].stream is True


def test_chat_completions_stream_tool_call_arrives_in_pieces(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": 'call:weather({"city": "Oslo"})'}],
        tools=[WEATHER_TOOL_CC],
        stream=True,
    )
    arguments = ""
    names = []
    finish = None
    for chunk in stream:
        delta = chunk.choices[0].delta
        for piece in delta.tool_calls or []:
            if piece.function and piece.function.name:
                names.append(piece.function.name)
            arguments += (piece.function.arguments or "") if piece.function else ""
        finish = chunk.choices[0].finish_reason or finish
    assert names == ["weather"]
    assert json.loads(arguments) == {"city": "Oslo"}
    assert finish == "tool_calls"


def test_chat_completions_async_stream(fake: FakeModelServer) -> None:
    async def run() -> str:
        async with openai.AsyncOpenAI(base_url=fake.base_url, api_key="k", max_retries=0) as sdk:
            stream = await sdk.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "async hi"}], stream=True
            )
            return "".join([c.choices[0].delta.content or "" async for c in stream])

    assert asyncio.run(run()) == "[seen 1] first: 'async hi' | latest: 'async hi'"


# -- Responses ----------------------------------------------------------------------


def test_responses_chain_sends_constant_size_requests(
    fake: FakeModelServer, client: openai.OpenAI
) -> None:
    previous: str | None = None
    replies = []
    for turn in range(5):
        kwargs: Any = {"previous_response_id": previous} if previous else {}
        answer = client.responses.create(model="m", input=f"turn {turn}", **kwargs)
        replies.append(answer.output_text)
        previous = answer.id
    assert replies[0] == "[seen 1] first: 'turn 0' | latest: 'turn 0'"
    assert replies[4] == "[seen 9] first: 'turn 0' | latest: 'turn 4'"
    sizes = [r.size for r in fake.requests_for("responses")]
    assert len(set(sizes[1:])) == 1, sizes  # only the new input and the id travel


def test_responses_fork_from_an_earlier_response(client: openai.OpenAI) -> None:
    root = client.responses.create(model="m", input="root")
    left = client.responses.create(model="m", input="left", previous_response_id=root.id)
    right = client.responses.create(model="m", input="right", previous_response_id=root.id)
    assert right.output_text == "[seen 3] first: 'root' | latest: 'right'"
    deeper = client.responses.create(model="m", input="left again", previous_response_id=left.id)
    assert deeper.output_text == "[seen 5] first: 'root' | latest: 'left again'"
    assert client.responses.retrieve(right.id).previous_response_id == root.id
    assert client.responses.retrieve(root.id).output_text == root.output_text


def test_responses_instructions_are_not_inherited(
    fake: FakeModelServer, client: openai.OpenAI
) -> None:
    first = client.responses.create(model="m", input="hi", instructions="be brief")
    assert first.output_text == "[seen 1] first: 'hi' | latest: 'hi'"
    assert first.instructions == "be brief"
    second = client.responses.create(model="m", input="again", previous_response_id=first.id)
    assert second.instructions is None
    assert second.output_text == "[seen 3] first: 'hi' | latest: 'again'"


def test_responses_store_false_cannot_be_continued(client: openai.OpenAI) -> None:
    unstored = client.responses.create(model="m", input="secret", store=False)
    assert unstored.model_dump()["store"] is False  # (not a typed field in every SDK)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)
    with pytest.raises(openai.BadRequestError, match="not found") as caught:
        client.responses.create(model="m", input="more", previous_response_id=unstored.id)
    assert caught.value.code == "previous_response_not_found"


def test_responses_store_false_with_client_managed_history(
    fake: FakeModelServer, client: openai.OpenAI
) -> None:
    history: list[Any] = []
    for turn in range(3):
        history.append({"role": "user", "content": f"turn {turn}"})
        answer = client.responses.create(model="m", input=history, store=False)
        history.extend(item.model_dump(exclude_none=True) for item in answer.output)
    assert answer.output_text == "[seen 5] first: 'turn 0' | latest: 'turn 2'"
    sizes = [r.size for r in fake.requests_for("responses")]
    assert sizes == sorted(sizes) and len(set(sizes)) == 3


def test_responses_tool_round_trip_service_managed(client: openai.OpenAI) -> None:
    first = client.responses.create(
        model="m", input='call:weather({"city": "Oslo"})', tools=[WEATHER_TOOL_RESPONSES]
    )
    (call,) = first.output
    assert call.type == "function_call"
    assert json.loads(call.arguments) == {"city": "Oslo"}
    second = client.responses.create(
        model="m",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
        tools=[WEATHER_TOOL_RESPONSES],
    )
    assert second.output_text.endswith("| tool results: 'sunny'")
    assert second.output_text.startswith("[seen 3]")


def test_responses_refuse_unpaired_function_items(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="No tool call found"):
        client.responses.create(
            model="m",
            input=[{"type": "function_call_output", "call_id": "call_nope", "output": "x"}],
        )
    tool: Any = {"type": "function", "name": "f"}
    first = client.responses.create(model="m", input="call:f()", tools=[tool])
    with pytest.raises(openai.BadRequestError, match="No tool output found"):
        client.responses.create(model="m", input="ignore the call", previous_response_id=first.id)


def test_responses_stream_events(fake: FakeModelServer, client: openai.OpenAI) -> None:
    first = client.responses.create(model="m", input="one")
    events = list(
        client.responses.create(model="m", input="two", previous_response_id=first.id, stream=True)
    )
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert "response.output_item.added" in kinds and "response.output_text.done" in kinds
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "[seen 3] first: 'one' | latest: 'two'"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    completed = events[-1]
    assert completed.type == "response.completed"
    assert client.responses.retrieve(completed.response.id).output_text == deltas


def test_responses_stream_helper_and_tool_call(client: openai.OpenAI) -> None:
    with client.responses.stream(
        model="m", input='call:weather({"city": "Oslo"})', tools=[WEATHER_TOOL_RESPONSES]
    ) as stream:
        argument_deltas = [
            e.delta for e in stream if e.type == "response.function_call_arguments.delta"
        ]
        final = stream.get_final_response()
    assert len(argument_deltas) == 2
    (call,) = final.output
    assert call.type == "function_call" and json.loads(call.arguments) == {"city": "Oslo"}


def test_responses_async_stream_and_fork(fake: FakeModelServer) -> None:
    async def run() -> tuple[str, str]:
        async with openai.AsyncOpenAI(base_url=fake.base_url, api_key="k", max_retries=0) as sdk:
            root = await sdk.responses.create(model="m", input="root")
            stream = await sdk.responses.create(
                model="m", input="branch", previous_response_id=root.id, stream=True
            )
            text = "".join(
                [e.delta async for e in stream if e.type == "response.output_text.delta"]
            )
            other = await sdk.responses.create(
                model="m", input="other", previous_response_id=root.id
            )
            return text, other.output_text

    text, other = asyncio.run(run())
    assert text == "[seen 3] first: 'root' | latest: 'branch'"
    assert other == "[seen 3] first: 'root' | latest: 'other'"


def test_responses_encrypted_reasoning_round_trips(client: openai.OpenAI) -> None:
    first = client.responses.create(
        model="m",
        input="think",
        store=False,
        reasoning={"effort": "low"},
        include=["reasoning.encrypted_content"],
    )
    reasoning, message = first.output
    assert message.type == "message"
    assert reasoning.type == "reasoning" and reasoning.encrypted_content
    history: list[Any] = [{"role": "user", "content": "think"}]
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history.append({"role": "user", "content": "again"})
    again = client.responses.create(model="m", input=history, store=False)
    assert again.output_text == "[seen 3] first: 'think' | latest: 'again'"
    history[1]["encrypted_content"] = "tampered"
    with pytest.raises(openai.BadRequestError, match="could not be verified"):
        client.responses.create(model="m", input=history, store=False)


def test_responses_input_items_and_delete(client: openai.OpenAI) -> None:
    first = client.responses.create(model="m", input=[{"role": "user", "content": "a"}])
    items = client.responses.input_items.list(first.id)
    assert [item.type for item in items] == ["message"]
    client.responses.delete(first.id)
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="m", input="b", previous_response_id=first.id)


# -- Conversations ------------------------------------------------------------------


def test_conversation_stays_linear(fake: FakeModelServer, client: openai.OpenAI) -> None:
    conversation = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "I am Ada"}]
    )
    replies = []
    for text in ["question 1", "question 2", "question 3"]:
        answer = client.responses.create(model="m", input=text, conversation=conversation.id)
        assert answer.conversation is not None and answer.conversation.id == conversation.id
        replies.append(answer.output_text)
    assert replies == [
        "[seen 2] first: 'I am Ada' | latest: 'question 1'",
        "[seen 4] first: 'I am Ada' | latest: 'question 2'",
        "[seen 6] first: 'I am Ada' | latest: 'question 3'",
    ]
    items = list(client.conversations.items.list(conversation.id, order="asc"))
    roles = [getattr(item, "role", None) for item in items]
    assert roles == ["user"] + ["user", "assistant"] * 3
    assert len(fake.conversation_items(conversation.id)) == 7
    sizes = [r.size for r in fake.requests_for("responses")]
    assert len(set(sizes)) == 1, sizes


def test_conversation_items_api(client: openai.OpenAI) -> None:
    conversation = client.conversations.create(metadata={"topic": "demo"})
    assert client.conversations.retrieve(conversation.id).metadata == {"topic": "demo"}
    added = client.conversations.items.create(
        conversation.id,
        items=[
            {"type": "message", "role": "user", "content": "one"},
            {"type": "message", "role": "user", "content": "two"},
            {"type": "message", "role": "user", "content": "three"},
        ],
    )
    ids = [str(item.id) for item in added.data]
    newest_first = client.conversations.items.list(conversation.id, limit=2)
    assert [i.id for i in newest_first.data] == [ids[2], ids[1]]
    assert newest_first.has_more is True
    every = list(client.conversations.items.list(conversation.id, limit=1, order="asc"))
    assert [i.id for i in every] == ids  # the SDK pages with `after`
    assert client.conversations.items.retrieve(ids[1], conversation_id=conversation.id).id == ids[1]
    client.conversations.items.delete(ids[1], conversation_id=conversation.id)
    answer = client.responses.create(model="m", input="four", conversation=conversation.id)
    assert answer.output_text == "[seen 3] first: 'one' | latest: 'four'"
    client.conversations.delete(conversation.id)
    with pytest.raises(openai.NotFoundError):
        client.conversations.retrieve(conversation.id)


def test_conversation_refuses_mixing_and_unknown_ids(client: openai.OpenAI) -> None:
    first = client.responses.create(model="m", input="hi")
    conversation = client.conversations.create()
    with pytest.raises(openai.BadRequestError, match="Mutually exclusive"):
        client.responses.create(
            model="m", input="x", previous_response_id=first.id, conversation=conversation.id
        )
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="m", input="x", conversation="conv_missing")


def test_conversation_with_async_client(fake: FakeModelServer) -> None:
    async def run() -> list[str]:
        async with openai.AsyncOpenAI(base_url=fake.base_url, api_key="k", max_retries=0) as sdk:
            conversation = await sdk.conversations.create()
            texts = []
            for text in ["a", "b"]:
                answer = await sdk.responses.create(
                    model="m", input=text, conversation={"id": conversation.id}
                )
                texts.append(answer.output_text)
            return texts

    assert asyncio.run(run()) == [
        "[seen 1] first: 'a' | latest: 'a'",
        "[seen 3] first: 'a' | latest: 'b'",
    ]
