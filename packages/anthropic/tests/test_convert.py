"""chatkeep messages <-> Anthropic Messages wire format, without a server."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatkeep.anthropic import from_anthropic, message_from_response, to_anthropic
from chatkeep.anthropic.convert import tool_to_anthropic
from chatkeep.core import (
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ReasoningContent,
    TextContent,
    Tool,
    UnknownContent,
    UriContent,
)


def test_system_becomes_a_top_level_field() -> None:
    request = to_anthropic([Message.system("be brief"), Message.user("hi")])
    assert request.system == "be brief"
    assert request.messages == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    several = to_anthropic([Message.system("one"), Message.user("hi"), Message.system("two")])
    assert several.system == [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    assert to_anthropic([Message.user("hi")]).system is None


def test_tool_results_are_user_blocks_and_same_roles_merge() -> None:
    history = [
        Message.user("weather?"),
        Message(
            "assistant",
            [TextContent("checking"), FunctionCallContent("t1", "weather", '{"city": "Oslo"}')],
        ),
        Message("tool", [FunctionResultContent("t1", {"temp": 3})]),
        Message.user("thanks"),
    ]
    wire = to_anthropic(history).messages
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    assert wire[1]["content"][1] == {
        "type": "tool_use",
        "id": "t1",
        "name": "weather",
        "input": {"city": "Oslo"},
    }
    assert wire[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": '{"temp": 3}'},
        {"type": "text", "text": "thanks"},
    ]


def test_failed_tools_are_sent_as_errors() -> None:
    wire = to_anthropic([Message("tool", [FunctionResultContent("t1", exception="boom")])])
    assert wire.messages[0]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": True}
    ]


def test_arguments_that_are_not_an_object_are_wrapped_not_lost() -> None:
    wire = to_anthropic([Message("assistant", [FunctionCallContent("c", "f", "not json")])])
    assert wire.messages[0]["content"][0]["input"] == {"arguments": "not json"}
    empty = to_anthropic([Message("assistant", [FunctionCallContent("c", "f", None)])])
    assert empty.messages[0]["content"][0]["input"] == {}


def test_unsupported_roles_and_media_are_refused() -> None:
    with pytest.raises(ValueError, match="no 'critic' role"):
        to_anthropic([Message("critic", [TextContent("hmm")])])
    with pytest.raises(ValueError, match="audio/wav"):
        to_anthropic([Message("user", [DataContent(b"RIFF", "audio/wav")])])


def test_tools_become_input_schemas() -> None:
    def weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    entry = tool_to_anthropic(Tool.from_function(weather))
    assert entry["name"] == "weather"
    assert entry["description"] == "The weather in a city."
    assert entry["input_schema"]["type"] == "object"
    assert "city" in entry["input_schema"]["properties"]
    raw = {"type": "web_search_20250305", "name": "web_search"}
    assert tool_to_anthropic(raw) == raw


EXPRESSIBLE = [
    Message.system("You are terse."),
    Message(
        "user",
        [
            TextContent("and these"),
            DataContent(b"\x89PNG\r\n", "image/png"),
            DataContent(b"%PDF-1.4", "application/pdf"),
            DataContent("plain text é".encode(), "text/plain"),
            UriContent("https://example.com/cat.jpg"),
            UriContent("https://example.com/doc.pdf", "application/pdf"),
        ],
    ),
    Message(
        "assistant",
        [
            ReasoningContent("Let me think.", "sig-abc"),
            ReasoningContent(None, "opaque-redacted"),
            TextContent("Cited.", {"anthropic": {"citations": [{"type": "char_location"}]}}),
            FunctionCallContent("toolu_1", "lookup", {"q": "cats", "n": [1, 2]}),
            FunctionCallContent("toolu_2", "clock", {}),
        ],
    ),
    Message(
        "tool",
        [
            FunctionResultContent("toolu_1", "found 2"),
            FunctionResultContent("toolu_2", exception="clock broke"),
        ],
    ),
    Message.user("And now?"),
    Message("assistant", [UnknownContent({"type": "server_tool_use", "id": "s1", "name": "web"})]),
]


def test_expressible_history_round_trips() -> None:
    wire = to_anthropic(EXPRESSIBLE)
    assert json.loads(json.dumps(wire.messages)) == wire.messages  # plain JSON
    assert from_anthropic(wire.system, wire.messages) == EXPRESSIBLE


def test_consecutive_messages_of_one_role_merge() -> None:
    wire = to_anthropic([Message.user("one"), Message.user("two")])
    assert wire.messages == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        }
    ]
    assert from_anthropic(wire.system, wire.messages) == [
        Message("user", [TextContent("one"), TextContent("two")])
    ]


def test_content_may_be_a_plain_string_on_the_way_back() -> None:
    assert from_anthropic("sys", [{"role": "user", "content": "hi"}]) == [
        Message.system("sys"),
        Message.user("hi"),
    ]


def test_response_blocks_become_one_assistant_message() -> None:
    response: dict[str, Any] = {
        "id": "msg_1",
        "content": [
            {"type": "thinking", "thinking": "hm", "signature": "s"},
            {"type": "text", "text": "hello", "citations": None},
            {"type": "tool_use", "id": "toolu_9", "name": "f", "input": {"a": 1}},
        ],
    }
    assert message_from_response(response) == Message(
        "assistant",
        [
            ReasoningContent("hm", "s"),
            TextContent("hello"),
            FunctionCallContent("toolu_9", "f", {"a": 1}),
        ],
        message_id="msg_1",
    )


texts = st.text(min_size=1, max_size=20)
json_objects = st.dictionaries(
    st.text(max_size=5), st.one_of(st.integers(), texts, st.booleans(), st.none()), max_size=3
)


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Alternating histories the API can express: user, then assistant (text and/or
    calls), then the calls' results (with optional user text after them)."""
    history: list[Message] = []
    if draw(st.booleans()):
        history.append(Message.system(draw(texts)))
    history.append(Message.user(draw(texts)))
    for turn in range(draw(st.integers(0, 3))):
        contents: list[Any] = []
        if draw(st.booleans()):
            contents.append(ReasoningContent(draw(texts), draw(texts)))
        contents.append(TextContent(draw(texts)))
        calls = [
            FunctionCallContent(f"toolu_{turn}_{i}", draw(texts), draw(json_objects))
            for i in range(draw(st.integers(0, 2)))
        ]
        history.append(Message("assistant", contents + calls))
        if calls:
            results = [
                FunctionResultContent(c.call_id, draw(texts))
                if draw(st.booleans())
                else FunctionResultContent(c.call_id, exception=draw(texts))
                for c in calls
            ]
            history.append(Message("tool", list(results)))
        history.append(Message.user(draw(texts)))
    return history


@given(histories())
def test_generated_histories_round_trip(history: list[Message]) -> None:
    wire = to_anthropic(history)
    roles = [m["role"] for m in wire.messages]
    assert all(a != b for a, b in itertools.pairwise(roles))  # the API wants alternation
    assert from_anthropic(wire.system, wire.messages) == history
