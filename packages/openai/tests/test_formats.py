"""Message conversion to and from Chat Completions messages and Responses items: both
directions keep what each format can express."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
from chatkeep.openai import from_chat_messages, from_items, to_chat_messages, to_items
from chatkeep.openai.chat_format import to_chat_tools
from chatkeep.openai.responses_format import split_instructions, to_response_tools
from chatkeep.testing import example_count

PNG = b"\x89PNG\r\n\x1a\n\x00\x01binary\xff"


def conversation() -> list[Message]:
    """A conversation using everything both formats can express."""
    return [
        Message.system("Be brief."),
        Message("user", [TextContent("Hi 👋 I'm Ada."), TextContent(" Two parts.")]),
        Message.assistant("Hello Ada!"),
        Message(
            "user",
            [
                TextContent("What is in this picture?"),
                DataContent(PNG, "image/png", {"detail": "high"}),
                UriContent("https://example.com/cat.jpg", "image/*"),
                DataContent(b"%PDF-1.7 ...", "application/pdf", {"filename": "report.pdf"}),
            ],
        ),
        Message(
            "assistant",
            [
                TextContent("Let me check the weather and the time."),
                FunctionCallContent("call_1", "weather", '{"city": "Oslo"}'),
                FunctionCallContent("call_2", "clock", "{}"),
            ],
        ),
        Message(
            "tool",
            [
                FunctionResultContent("call_1", '{"temp": 21}'),
                FunctionResultContent("call_2", "12:00"),
            ],
        ),
        Message.assistant("Sunny, 21 °C, at noon. 𝄞"),
    ]


def test_chat_messages_round_trip_core_to_chat_to_core() -> None:
    original = conversation()
    assert from_chat_messages(to_chat_messages(original)) == original


def test_chat_messages_round_trip_chat_to_core_to_chat() -> None:
    wire = to_chat_messages(conversation())
    assert to_chat_messages(from_chat_messages(wire)) == wire


def test_chat_format_shapes() -> None:
    wire = to_chat_messages(conversation())
    assert wire[0] == {"role": "system", "content": "Be brief."}
    assert wire[1]["content"] == [
        {"type": "text", "text": "Hi 👋 I'm Ada."},
        {"type": "text", "text": " Two parts."},
    ]
    assert wire[2] == {"role": "assistant", "content": "Hello Ada!"}
    image = wire[3]["content"][1]
    assert image["type"] == "image_url" and image["image_url"]["detail"] == "high"
    assert image["image_url"]["url"].startswith("data:image/png;base64,")
    assert wire[3]["content"][3]["file"]["filename"] == "report.pdf"
    calls = wire[4]["tool_calls"]
    assert [c["id"] for c in calls] == ["call_1", "call_2"]
    assert calls[0]["function"] == {"name": "weather", "arguments": '{"city": "Oslo"}'}
    # One tool message per result: the only form the format has.
    assert wire[5:7] == [
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
        {"role": "tool", "tool_call_id": "call_2", "content": "12:00"},
    ]


def test_chat_results_and_arguments_that_are_not_text_are_sent_as_json() -> None:
    messages = [
        Message("assistant", [FunctionCallContent("c", "f", {"a": [1, "ü"]})]),
        Message(
            "tool",
            [
                FunctionResultContent("c", {"nested": {"bytes": b"\x00\x01", "n": None}}),
            ],
        ),
        Message("assistant", [FunctionCallContent("d", "g", None)]),
        Message("tool", [FunctionResultContent("d", exception="boom")]),
    ]
    wire = to_chat_messages(messages)
    assert json.loads(wire[0]["tool_calls"][0]["function"]["arguments"]) == {"a": [1, "ü"]}
    assert json.loads(wire[1]["content"]) == {"nested": {"bytes": "AAE=", "n": None}}
    assert wire[2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert wire[3]["content"] == "Error: boom"


def test_chat_reasoning_and_refusal_and_author() -> None:
    completion_message = {
        "role": "assistant",
        "content": "The answer is 4.",
        "reasoning_content": "2 + 2 = 4",
        "refusal": None,
        "name": "calc",
    }
    message = from_chat_messages([completion_message])[0]
    assert message.contents == [ReasoningContent("2 + 2 = 4"), TextContent("The answer is 4.")]
    assert message.author_name == "calc"
    # Reasoning is sent back only to vendors that ask for it.
    assert "reasoning_content" not in to_chat_messages([message])[0]
    sent = to_chat_messages([message], reasoning_field="reasoning_content")[0]
    assert sent["reasoning_content"] == "2 + 2 = 4"
    refused = from_chat_messages([{"role": "assistant", "content": None, "refusal": "No."}])[0]
    assert refused.contents == [TextContent("No.", {"refusal": True})]
    assert to_chat_messages([refused]) == [{"role": "assistant", "content": "", "refusal": "No."}]


def test_chat_unknown_parts_are_kept_verbatim() -> None:
    part = {"type": "file", "file": {"file_id": "file-123"}}
    wire = [{"role": "user", "content": [{"type": "text", "text": "see"}, part]}]
    message = from_chat_messages(wire)[0]
    assert isinstance(message.contents[1], UnknownContent)
    assert to_chat_messages([message]) == wire


def test_chat_audio_input_round_trips() -> None:
    message = Message("user", [DataContent(b"RIFF....WAVE", "audio/wav")])
    wire = to_chat_messages([message])
    assert wire[0]["content"][0]["input_audio"]["format"] == "wav"
    assert from_chat_messages(wire) == [message]


def test_responses_items_round_trip_core_to_items_to_core() -> None:
    instructions, rest = split_instructions(conversation())
    assert instructions == "Be brief."
    assert from_items(to_items(rest)) == rest


def test_responses_items_round_trip_items_to_core_to_items() -> None:
    items = to_items(conversation()[1:])
    assert to_items(from_items(items)) == items


def test_responses_item_shapes() -> None:
    items = to_items(conversation()[1:])
    assert items[0] == {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "Hi 👋 I'm Ada."},
            {"type": "input_text", "text": " Two parts."},
        ],
    }
    assert items[1]["role"] == "assistant"
    assert items[1]["content"] == [{"type": "output_text", "text": "Hello Ada!", "annotations": []}]
    kinds = [item["type"] for item in items]
    assert kinds == [
        "message",
        "message",
        "message",
        "message",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "message",
    ]
    assert items[4] == {
        "type": "function_call",
        "call_id": "call_1",
        "name": "weather",
        "arguments": '{"city": "Oslo"}',
    }
    assert items[7] == {"type": "function_call_output", "call_id": "call_2", "output": "12:00"}
    # No service item ids: with store=False the service rejects ids it did not keep.
    assert not any("id" in item for item in items)


def reasoning_output() -> list[dict[str, Any]]:
    """A response's output the way the service returns it."""
    return [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [
                {"type": "summary_text", "text": "Think about Oslo."},
                {"type": "summary_text", "text": "Then answer."},
            ],
            "encrypted_content": "gAAAA-opaque",
        },
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [
                {
                    "type": "output_text",
                    "text": "Oslo it is.",
                    "annotations": [{"type": "url_citation", "url": "https://x.example"}],
                }
            ],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_9",
            "name": "weather",
            "arguments": "{}",
        },
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    ]


def test_responses_output_becomes_one_assistant_message_in_order() -> None:
    (message,) = from_items(reasoning_output())
    assert message.role == "assistant"
    reasoning, text, call, hosted = message.contents
    assert isinstance(reasoning, ReasoningContent)
    assert reasoning.text == "Think about Oslo.\n\nThen answer."
    assert reasoning.protected_data == "gAAAA-opaque"
    assert reasoning.additional_properties["item_id"] == "rs_1"
    assert text == TextContent(
        "Oslo it is.", {"annotations": [{"type": "url_citation", "url": "https://x.example"}]}
    )
    assert call == FunctionCallContent("call_9", "weather", "{}")
    assert isinstance(hosted, UnknownContent) and hosted.raw["item"]["id"] == "ws_1"


def test_responses_reasoning_goes_back_with_its_encrypted_content() -> None:
    items = to_items(from_items(reasoning_output()))
    assert items[0] == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [
            {"type": "summary_text", "text": "Think about Oslo."},
            {"type": "summary_text", "text": "Then answer."},
        ],
        "encrypted_content": "gAAAA-opaque",
    }
    assert items[1]["content"][0]["annotations"] == [
        {"type": "url_citation", "url": "https://x.example"}
    ]
    assert items[3] == {"type": "web_search_call", "id": "ws_1", "status": "completed"}


def test_reasoning_from_other_vendors_is_not_sent_as_a_responses_item() -> None:
    message = Message("assistant", [ReasoningContent("thinking"), TextContent("ok")])
    assert [item["type"] for item in to_items([message])] == ["message"]


def test_split_instructions_takes_only_leading_system_messages() -> None:
    messages = [
        Message.system("A"),
        Message("developer", [TextContent("B")]),
        Message.user("hi"),
        Message.system("late"),
    ]
    instructions, rest = split_instructions(messages)
    assert instructions == "A\n\nB"
    assert [m.text for m in rest] == ["hi", "late"]
    assert to_items(rest)[1]["role"] == "system"
    assert split_instructions([Message.user("x")]) == (None, [Message.user("x")])


def test_tools_as_function_schemas() -> None:
    def weather(city: str, unit: str = "C") -> str:
        """Today's weather."""
        return city

    tool = Tool.from_function(weather)
    chat = to_chat_tools([tool])[0]
    assert chat["type"] == "function"
    assert chat["function"]["name"] == "weather"
    assert chat["function"]["description"] == "Today's weather."
    assert chat["function"]["parameters"]["required"] == ["city"]
    response = to_response_tools([tool])[0]
    assert response == {
        "type": "function",
        "name": "weather",
        "description": "Today's weather.",
        "parameters": tool.parameters,
        "strict": False,
    }


@pytest.mark.parametrize(
    "message",
    [
        Message.user("plain"),
        Message("user", [UriContent("https://example.com/a.png", "image/*", {"detail": "low"})]),
        Message("assistant", [FunctionCallContent("c1", "f", '{"x": 1}')]),
        Message("tool", [FunctionResultContent("c1", "result text")]),
    ],
)
def test_single_messages_round_trip_both_formats(message: Message) -> None:
    prior = (
        [Message("assistant", [FunctionCallContent("c1", "f", "{}")])]
        if message.role == "tool"
        else []
    )
    assert from_chat_messages(to_chat_messages([*prior, message]))[len(prior) :] == [message]
    assert from_items(to_items([*prior, message]))[len(prior) :] == [message]


texts = st.text(min_size=1, max_size=40)
call_ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=12)


@st.composite
def exchanges(draw: st.DrawFn) -> list[Message]:
    """Alternating user and assistant turns, some with a tool call and its result."""
    messages: list[Message] = []
    for _ in range(draw(st.integers(1, 4))):
        messages.append(
            Message("user", [TextContent(t) for t in draw(st.lists(texts, min_size=1, max_size=3))])
        )
        if draw(st.booleans()):
            call_id = draw(call_ids)
            arguments = json.dumps({"q": draw(texts)}, ensure_ascii=False)
            messages.append(
                Message("assistant", [FunctionCallContent(call_id, "lookup", arguments)])
            )
            messages.append(Message("tool", [FunctionResultContent(call_id, draw(texts))]))
        messages.append(Message.assistant(draw(texts)))
    return messages


@settings(max_examples=example_count(60), deadline=None)
@given(exchanges())
def test_generated_conversations_round_trip_both_formats(messages: list[Message]) -> None:
    assert from_chat_messages(to_chat_messages(messages)) == messages
    assert from_items(to_items(messages)) == messages
