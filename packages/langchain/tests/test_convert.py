"""LangChain messages <-> chatkeep messages: equal under LangChain's ``==`` after a trip
through the store's bytes, and readable as chatkeep messages."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from chatkeep.core import (
    DataContent,
    EncodeError,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ReasoningContent,
    TextContent,
    UnknownContent,
    UriContent,
    decode_message,
    encode_message,
)
from chatkeep.langchain import MESSAGE_KEY, from_chatkeep, to_chatkeep
from chatkeep.testing import example_count

PNG = "iVBORw0KGgo="


def through_store(message: BaseMessage) -> tuple[Message, BaseMessage]:
    stored = decode_message(encode_message(to_chatkeep(message, message_id="rec-1")))
    return stored, from_chatkeep(stored)


CASES: list[tuple[BaseMessage, str, list[type]]] = [
    (SystemMessage("You are terse."), "system", [TextContent]),
    (HumanMessage("hi", id="h-1", name="ada"), "user", [TextContent]),
    (
        HumanMessage(
            content=[
                {"type": "text", "text": "what is this?"},
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "high"},
                },
                {"type": "image_url", "image_url": "https://example.com/cat.png"},
                {"type": "image", "base64": PNG, "mime_type": "image/png"},
                {"type": "image", "source_type": "base64", "data": PNG, "mime_type": "image/png"},
                {"type": "image", "url": "https://example.com/dog.png"},
                {"type": "file", "source_type": "url", "url": "https://example.com/a.pdf"},
                {"type": "audio", "base64": "UklGRg==", "mime_type": "audio/wav"},
                "a bare string",
                {"type": "video", "file_id": "file-1"},
            ]
        ),
        "user",
        [
            TextContent,
            DataContent,
            UriContent,
            DataContent,
            DataContent,
            UriContent,
            UriContent,
            DataContent,
            TextContent,
            UnknownContent,
        ],
    ),
    (
        AIMessage(
            content="",
            tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "call-1"}],
            usage_metadata={"input_tokens": 12, "output_tokens": 5, "total_tokens": 17},
            response_metadata={"model_name": "fake", "finish_reason": "tool_calls"},
            additional_kwargs={"refusal": None},
            id="run-1",
        ),
        "assistant",
        [TextContent, FunctionCallContent],
    ),
    (
        AIMessage(
            content=[
                {"type": "reasoning", "reasoning": "The user wants weather.", "id": "rs-1"},
                {"type": "thinking", "thinking": "deep", "signature": "c2ln"},
                {
                    "type": "text",
                    "text": "Sunny.",
                    "annotations": [{"type": "citation", "url": "u"}],
                },
            ]
        ),
        "assistant",
        [ReasoningContent, ReasoningContent, TextContent],
    ),
    (ToolMessage("sunny", tool_call_id="call-1"), "tool", [FunctionResultContent]),
    (
        ToolMessage("boom", tool_call_id="call-2", status="error", artifact={"trace": [1, 2]}),
        "tool",
        [FunctionResultContent],
    ),
    (ChatMessage(role="critic", content="meh"), "critic", [TextContent]),
    (FunctionMessage(name="lookup", content="42"), "tool", [TextContent]),
    (AIMessageChunk(content="partial", id="chunk-1"), "assistant", [TextContent]),
    (
        AIMessage(
            content="x",
            invalid_tool_calls=[
                {
                    "name": "f",
                    "args": "{oops",
                    "id": "i-1",
                    "error": "bad JSON",
                    "type": "invalid_tool_call",
                }
            ],
        ),
        "assistant",
        [TextContent],
    ),
    (
        AIMessage(content="no id", tool_calls=[{"name": "f", "args": {}, "id": None}]),
        "assistant",
        [TextContent, FunctionCallContent],
    ),
]


@pytest.mark.parametrize(
    ("message", "role", "kinds"),
    CASES,
    ids=[f"{type(c[0]).__name__}-{i}" for i, c in enumerate(CASES)],
)
def test_messages_round_trip_and_read_as_chatkeep_messages(
    message: BaseMessage, role: str, kinds: list[type]
) -> None:
    stored, back = through_store(message)
    assert back == message
    assert type(back) is type(message)
    assert stored.role == role
    assert [type(content) for content in stored.contents] == kinds
    assert stored.message_id == "rec-1"
    assert stored.additional_properties[MESSAGE_KEY]["type"] != "verbatim"  # really mapped


def test_chatkeep_readers_see_the_data() -> None:
    stored, _ = through_store(CASES[3][0])
    call = stored.contents[1]
    assert call == FunctionCallContent(
        "call-1", "weather", {"city": "Oslo"}, call.additional_properties
    )
    image, _ = through_store(CASES[2][0])
    assert isinstance(image.contents[1], DataContent)
    assert image.contents[1].data == b"\x89PNG\r\n\x1a\n"
    thinking, _ = through_store(CASES[4][0])
    assert isinstance(thinking.contents[1], ReasoningContent)
    assert (thinking.contents[1].text, thinking.contents[1].protected_data) == ("deep", "c2ln")
    failed, _ = through_store(CASES[6][0])
    result = failed.contents[0]
    assert isinstance(result, FunctionResultContent)
    assert (result.call_id, result.result, result.exception) == ("call-2", "boom", "boom")
    named, _ = through_store(CASES[1][0])
    assert (named.author_name, named.text) == ("ada", "hi")


def test_an_artifact_that_is_not_json_is_refused() -> None:
    with pytest.raises(EncodeError):
        encode_message(to_chatkeep(ToolMessage("x", tool_call_id="c", artifact=object())))


def test_not_a_message() -> None:
    with pytest.raises(TypeError):
        to_chatkeep({"role": "user"})  # type: ignore[arg-type]


def test_messages_written_by_other_chatkeep_code() -> None:
    assert from_chatkeep(Message.user("hi")) == HumanMessage("hi")
    assert from_chatkeep(Message.system("be brief")) == SystemMessage("be brief")
    turn = Message(
        "assistant",
        [TextContent("Checking."), FunctionCallContent("c1", "weather", '{"city": "Oslo"}')],
    )
    assert from_chatkeep(turn) == AIMessage(
        "Checking.", tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "c1"}]
    )
    result = Message("tool", [FunctionResultContent("c1", "sunny")])
    assert from_chatkeep(result) == ToolMessage("sunny", tool_call_id="c1")
    image = Message("user", [TextContent("see"), DataContent(b"\x89PNG", "image/png")])
    assert from_chatkeep(image) == HumanMessage(
        content=[
            {"type": "text", "text": "see"},
            {"type": "image", "base64": "iVBORw==", "mime_type": "image/png"},
        ]
    )


# -- every message ---------------------------------------------------------------------------

text = st.text(st.characters(exclude_categories=("Cs",)), max_size=10)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(text, children, max_size=3),
    max_leaves=6,
)
kwargs = st.dictionaries(text, json_values, max_size=2)
blocks = st.one_of(
    text,
    st.builds(lambda t, e: {**e, "type": "text", "text": t}, text, kwargs),
    st.builds(lambda t: {"type": "reasoning", "reasoning": t}, text),
    st.builds(
        lambda d: {"type": "image", "base64": d, "mime_type": "image/png"},
        st.sampled_from([PNG, "", "AAAA"]),
    ),
    st.dictionaries(text, json_values, max_size=3).map(lambda d: {**d, "type": "custom"}),
)
content = text | st.lists(blocks, max_size=3)
common = {
    "additional_kwargs": kwargs,
    "response_metadata": kwargs,
    "id": st.none() | text,
    "name": st.none() | text,
}
calls = st.lists(
    st.builds(lambda n, a, i: {"name": n, "args": a, "id": i}, text, kwargs, st.none() | text),
    max_size=2,
)
messages = st.one_of(
    st.builds(HumanMessage, content=content, **common),
    st.builds(SystemMessage, content=content, **common),
    st.builds(AIMessage, content=content, tool_calls=calls, **common),
    st.builds(
        ToolMessage,
        content=content,
        tool_call_id=text,
        status=st.sampled_from(["success", "error"]),
        artifact=json_values,
        **common,
    ),
    st.builds(ChatMessage, content=content, role=text.filter(bool), **common),
)


@settings(max_examples=example_count(300), deadline=None)
@given(messages)
def test_every_message_round_trips_through_a_store(message: BaseMessage) -> None:
    stored, back = through_store(message)
    assert back == message
    assert stored.message_id == "rec-1"


@settings(max_examples=example_count(150), deadline=None)
@given(st.lists(messages, max_size=4))
def test_the_fast_read_path_agrees_with_the_view(batch: list[BaseMessage]) -> None:
    """``messages`` decodes plain records straight to LangChain messages; the view path
    builds chatkeep messages first: both give back what was added."""
    from chatkeep.core import open_store, read_view
    from chatkeep.langchain import ChatkeepChatMessageHistory

    store = open_store("memory://")
    history = ChatkeepChatMessageHistory("s", store=store)
    history.add_messages(batch)
    slow = [from_chatkeep(message) for message in read_view(store, "s")]
    assert history.messages == slow == batch


def test_the_fast_read_path_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    import chatkeep.langchain.history as module
    from chatkeep.core import open_store
    from chatkeep.langchain import ChatkeepChatMessageHistory

    history = ChatkeepChatMessageHistory("s", store=open_store("memory://"))
    every = [case[0] for case in CASES]
    history.add_messages(every)

    def no_view(*_: object, **__: object) -> None:
        raise AssertionError("the view was walked")

    monkeypatch.setattr(module, "read_view", no_view)
    assert history.messages == every
    window = ChatkeepChatMessageHistory("s", store=history.store, max_messages=2)
    assert window.messages == every[-2:]
