"""``ChatMessage`` round-trips through every backend by LlamaIndex's own equality: roles,
text, image, audio, video and document blocks (inline bytes, URLs), tool calls (blocks, and
dicts or pydantic objects in ``additional_kwargs``), thinking, citations, cache points."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from llama_index.core.base.llms.types import (
    AudioBlock,
    CacheControl,
    CachePoint,
    ChatMessage,
    CitableBlock,
    DocumentBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    VideoBlock,
)
from openai.types.chat import ChatCompletionMessageToolCall

from chatkeep.core import (
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    Store,
    TextContent,
    encode_records,
    new_id,
    read_view,
)
from chatkeep.llama_index import ChatkeepChatStore, chat_message_to_message

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))

CASES: dict[str, Any] = {
    "text": lambda: ChatMessage(role="user", content="hello ☃ 𝄞"),
    "empty-text": lambda: ChatMessage(role="user", content=""),
    "no-blocks": lambda: ChatMessage(role="assistant", blocks=[]),
    "system": lambda: ChatMessage(role="system", content="be brief"),
    "images": lambda: ChatMessage(
        role="user",
        blocks=[
            TextBlock(text="what is this?"),
            ImageBlock(image=PNG, detail="low"),
            ImageBlock(url="https://example.com/cat.png"),
        ],
    ),
    "audio-video-document": lambda: ChatMessage(
        role="user",
        blocks=[
            AudioBlock(audio=b"RIFF\x00\x00\x00\x00WAVEfmt ", format="wav"),
            AudioBlock(url="https://example.com/a.mp3"),
            VideoBlock(video=b"\x00\x00\x00\x18ftypmp42", video_mimetype="video/mp4"),
            DocumentBlock(data=b"%PDF-1.4 hello", title="notes.pdf"),
        ],
    ),
    "tool-call-blocks": lambda: ChatMessage(
        role="assistant",
        blocks=[
            ThinkingBlock(content="look it up", additional_information={"signature": "s1"}),
            ToolCallBlock(tool_call_id="c1", tool_name="weather", tool_kwargs={"city": "Oslo"}),
            ToolCallBlock(tool_name="raw", tool_kwargs='{"x": 1}'),
        ],
    ),
    "tool-result": lambda: ChatMessage(
        role="tool", content="21C", additional_kwargs={"tool_call_id": "c1", "name": "weather"}
    ),
    "kwargs-tool-calls-dicts": lambda: ChatMessage(
        role="assistant",
        content=None,
        additional_kwargs={
            "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "f"}}],
            "raw": b"\x00\xff",
            "at": dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc),
        },
    ),
    "kwargs-tool-calls-pydantic": lambda: ChatMessage(
        role="assistant",
        content=None,
        additional_kwargs={
            "tool_calls": [
                ChatCompletionMessageToolCall(
                    id="call_1", type="function", function={"name": "f", "arguments": "{}"}
                )
            ]
        },
    ),
    "citations-cache": lambda: ChatMessage(
        role="assistant",
        blocks=[
            CitableBlock(content=[TextBlock(text="quoted")], source="doc-1", title="Doc"),
            CachePoint(cache_control=CacheControl(type="ephemeral", ttl="1h")),
        ],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_round_trip_by_llama_index_equality(store: Store, sid: str, case: str) -> None:
    message = CASES[case]()
    chat_store = ChatkeepChatStore(store=store)
    chat_store.add_message(sid, message)
    await chat_store.async_add_message(sid, message)
    chat_store.add_message(sid, message, idx=1)
    got = chat_store.get_messages(sid)
    assert got == [message, message, message]
    assert type(got[0].additional_kwargs.get("tool_calls", [None])[0]) is type(
        message.additional_kwargs.get("tool_calls", [None])[0]
    )
    chat_store.set_messages(sid, [*got, message])
    assert await chat_store.aget_messages(sid) == [message] * 4


def test_other_chatkeep_readers_see_a_normal_conversation(store: Store, sid: str) -> None:
    chat_store = ChatkeepChatStore(store=store)
    chat_store.add_message(sid, CASES["images"]())
    chat_store.add_message(sid, CASES["tool-call-blocks"]())
    image, calls = read_view(store, sid)
    assert image.text == "what is this?"
    assert isinstance(image.contents[1], DataContent) and image.contents[1].data == PNG
    assert image.contents[1].media_type == "image/png"
    assert [c.name for c in calls.contents if isinstance(c, FunctionCallContent)] == [
        "weather",
        "raw",
    ]
    mapped = chat_message_to_message(CASES["text"]())
    assert mapped.role == "user" and mapped.contents == [TextContent("hello ☃ 𝄞")]


def test_messages_other_chatkeep_code_wrote(store: Store, sid: str) -> None:
    """A conversation written by chatkeep's own agent (or any adapter) reads as
    LlamaIndex messages: text, data, tool calls, tool results."""
    store.append(
        sid,
        encode_records(
            [
                Message.user("hi", message_id=new_id()),
                Message(
                    "assistant",
                    [FunctionCallContent("c9", "lookup", {"q": "x"})],
                    message_id=new_id(),
                ),
                Message("tool", [FunctionResultContent("c9", {"a": 1})], message_id=new_id()),
                Message("user", [DataContent(PNG, "image/png")], message_id=new_id()),
            ]
        ),
    )
    got = ChatkeepChatStore(store=store).get_messages(sid)
    assert [m.role.value for m in got] == ["user", "assistant", "tool", "user"]
    assert got[0].content == "hi"
    call = got[1].blocks[0]
    assert isinstance(call, ToolCallBlock) and call.tool_kwargs == {"q": "x"}
    assert got[2].content == "{'a': 1}"
    image = got[3].blocks[0]
    assert isinstance(image, ImageBlock) and image.image_mimetype == "image/png"
