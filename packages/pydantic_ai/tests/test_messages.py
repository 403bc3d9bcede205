"""Every ``ModelMessage`` comes back equal to Pydantic AI's own JSON round trip.

Mirrors the round-trip cases of Pydantic AI's ``tests/test_messages.py`` (usage with
arbitrary fields, file parts with ``BinaryImage``, ``run_id`` / ``conversation_id`` /
metadata kept, multimodal user content, deferred tool events) and adds what a store must
carry: tool calls with nested JSON, tool returns of any value (bytes included, which
Pydantic AI's JSON gives back as base64 text), thinking, native tools, non-BMP text. Each is
saved through the adapter and loaded back on every backend; a property test runs random
JSON arguments and text through it on SQLite. The stored messages are also chatkeep
messages with the right roles and text.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    BinaryImage,
    CompactionPart,
    DocumentUrl,
    FilePart,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryInfo,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    VideoUrl,
)
from pydantic_ai.usage import RequestUsage

from chatkeep.core import read_view
from chatkeep.pydantic_ai import ChatkeepConversationStore
from chatkeep.testing import example_count

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=timezone.utc)
T1 = datetime(2026, 3, 4, 7, 6, 7, tzinfo=timezone(timedelta(hours=2)))


def json_round_trip(messages: list[ModelMessage]) -> list[ModelMessage]:
    """What Pydantic AI's own serialization gives back."""
    return ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(messages))


MESSAGES: list[ModelMessage] = [
    ModelRequest(
        parts=[
            SystemPromptPart("Be brief.", timestamp=T0),
            UserPromptPart(
                [
                    "Look at these 😀 — ünïcödé",
                    TextContent("annotated", metadata={"source": "ui", "n": [1, 2]}),
                    ImageUrl("https://example.com/a.png"),
                    DocumentUrl("https://example.com/d.pdf", media_type="application/pdf"),
                    AudioUrl("https://example.com/s.mp3"),
                    VideoUrl("https://example.com/v.mp4"),
                    BinaryContent(b"\x00\x01\xffbinary", media_type="application/octet-stream"),
                    BinaryImage(data=b"fake", media_type="image/jpeg"),
                ],
                timestamp=T1,
            ),
        ],
        timestamp=T0,
        instructions="Answer in English.",
        run_id="run-123",
        conversation_id="conv-abc",
        metadata={"key": "value", "nested": {"list": [1, 2.5, None, True]}},
    ),
    ModelResponse(
        parts=[
            ThinkingPart("Let me think", signature="sig-1", provider_name="anthropic"),
            TextPart("Calling tools"),
            ToolCallPart("lookup", {"q": "Oslo", "deep": {"a": [1, {"b": None}]}}, "call-1"),
            ToolCallPart("raw", '{"as": "the model wrote it" }', "call-2"),
            NativeToolCallPart("web_search", {"query": "x"}, "native-1", provider_name="openai"),
            NativeToolReturnPart(
                "web_search", {"results": ["a", "b"]}, "native-1", provider_name="openai"
            ),
            FilePart(content=BinaryImage(data=b"fake", media_type="image/jpeg")),
        ],
        usage=RequestUsage(input_tokens=5, details={"reasoning_tokens": 3}, cache_read_tokens=2),
        model_name="test-model",
        timestamp=T0,
        provider_name="test",
        provider_response_id="resp-1",
        finish_reason="tool_call",
        run_id="run-123",
        metadata={"key": "value"},
    ),
    ModelRequest(
        parts=[
            ToolReturnPart("lookup", {"temperature": 21.5, "unit": "C"}, "call-1", timestamp=T0),
            ToolReturnPart("raw", b"bytes come back as their base64 text", "call-2", timestamp=T0),
            ToolReturnPart("lookup", "try again", "call-3", outcome="retried", timestamp=T0),
        ],
        timestamp=T0,
    ),
    ModelRequest(
        parts=[RetryFeedbackPart("plain retry", retry=RetryInfo(cause="no_output"), timestamp=T0)],
        timestamp=T0,
    ),
    ModelResponse(
        parts=[TextPart("It is 21.5 °C in Oslo. 𝄞"), CompactionPart("summary so far", id="cmp-1")],
        usage=RequestUsage(input_tokens=9, output_tokens=4),
        timestamp=T0,
    ),
]


async def test_every_message_comes_back_as_its_json_round_trip(
    conversation_store: ChatkeepConversationStore,
) -> None:
    conversation = Conversation(messages=list(MESSAGES), conversation_id="round-trip")
    await conversation_store.save(conversation)
    loaded = await conversation_store.load("round-trip")
    assert loaded is not None
    expected = json_round_trip(MESSAGES)
    assert loaded.messages == expected
    assert [type(part) for m in loaded.messages for part in m.parts] == [
        type(part) for m in expected for part in m.parts
    ]
    # The same through every read path: a window, one entry, the history of an entry.
    window = await conversation_store.load("round-trip", limit=2)
    assert window is not None and window.messages == expected[-2:]
    entries = await conversation_store.load_entries("round-trip")
    assert entries is not None
    assert (await conversation_store.read_entry(entries[1].id)).message == expected[1]
    history = await conversation_store.read_history(entries[2].id)
    assert [e.message for e in history] == expected[:3]


async def test_the_messages_are_chatkeep_messages(
    conversation_store: ChatkeepConversationStore,
) -> None:
    """``chatkeep sessions show``, export and search read the same conversation: roles,
    text, tool calls and results."""
    await conversation_store.save(Conversation(messages=list(MESSAGES), conversation_id="c"))
    messages = read_view(conversation_store.store, conversation_store.session_id("c"))
    assert [m.role for m in messages] == ["user", "assistant", "tool", "user", "assistant"]
    assert "Be brief." in messages[0].text and "Look at these 😀" in messages[0].text
    assert [c.type for c in messages[0].contents][:3] == ["text", "text", "text"]
    assert {"uri", "data"} <= {c.type for c in messages[0].contents}
    calls = [c for c in messages[1].contents if c.type == "function_call"]
    assert [(c.call_id, c.name) for c in calls] == [("call-1", "lookup"), ("call-2", "raw")]  # type: ignore[attr-defined]
    results = [c for c in messages[2].contents if c.type == "function_result"]
    assert results[0].call_id == "call-1" and "21.5" in str(results[0].result)  # type: ignore[attr-defined]
    assert "plain retry" in messages[3].text
    assert messages[4].text.startswith("It is 21.5 °C")
    assert messages[1].contents[0].type == "text_reasoning"


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(
    max_examples=example_count(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(text=st.text(), args=st.dictionaries(st.text(max_size=10), JSON, max_size=5), result=JSON)
async def test_any_text_and_json_round_trip(
    sqlite_url: str, text: str, args: dict[str, Any], result: Any
) -> None:
    store = ChatkeepConversationStore(url=sqlite_url, prefix=f"p{secrets.token_hex(4)}:")
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(text, timestamp=T0)], timestamp=T0),
        ModelResponse(parts=[TextPart(text), ToolCallPart("tool", args, "c1")], timestamp=T0),
        ModelRequest(parts=[ToolReturnPart("tool", result, "c1", timestamp=T0)], timestamp=T0),
    ]
    try:
        await store.save(Conversation(messages=messages, conversation_id="c"))
        loaded = await store.load("c")
        assert loaded is not None and loaded.messages == json_round_trip(messages)
    finally:
        await store.aclose()
