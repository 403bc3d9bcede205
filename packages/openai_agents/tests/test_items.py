"""Items <-> chatkeep messages: exact both ways, and readable as chatkeep messages."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
from chatkeep.openai_agents import ITEM_KEY, item_to_message, message_to_items
from chatkeep.testing import example_count


def through_store(item: dict[str, Any]) -> tuple[Message, list[dict[str, Any]]]:
    """What a store gives back: the message encoded to bytes and decoded again."""
    message = decode_message(encode_message(item_to_message(item, message_id="rec-1")))
    return message, message_to_items(message)


# -- what the SDK writes -----------------------------------------------------------------------

USER = {"role": "user", "content": "What is the weather in Oslo?"}
ASSISTANT = {
    "id": "1",
    "content": [{"annotations": [], "text": "Sunny.", "type": "output_text", "logprobs": []}],
    "role": "assistant",
    "status": "completed",
    "type": "message",
}
CALL = {
    "arguments": '{"city":"Oslo"}',
    "call_id": "call_1",
    "name": "weather",
    "type": "function_call",
    "id": "fc_1",
    "status": "completed",
}
OUTPUT = {"call_id": "call_1", "output": "sunny", "type": "function_call_output"}
REASONING = {
    "id": "rs_1",
    "summary": [{"text": "The user wants weather.", "type": "summary_text"}],
    "type": "reasoning",
    "encrypted_content": "gAAAAB-opaque",
}
WEB_SEARCH = {
    "id": "ws_1",
    "action": {"query": "oslo weather", "type": "search"},
    "status": "completed",
    "type": "web_search_call",
}
IMAGES = {
    "role": "user",
    "content": [
        {"type": "input_text", "text": "What is this?"},
        {
            "type": "input_image",
            "image_url": "data:image/png;base64,iVBORw0KGgo=",
            "detail": "auto",
        },
        {"type": "input_image", "image_url": "https://example.com/cat.png", "detail": "high"},
        {
            "type": "input_file",
            "file_data": "data:application/pdf;base64,JVBERi0=",
            "filename": "a.pdf",
        },
        {"type": "input_file", "file_url": "https://example.com/a.pdf"},
        {"type": "input_image", "file_id": "file-123", "detail": "low"},
    ],
}


@pytest.mark.parametrize(
    ("item", "role", "kinds"),
    [
        (USER, "user", [TextContent]),
        (ASSISTANT, "assistant", [TextContent]),
        (CALL, "assistant", [FunctionCallContent]),
        (OUTPUT, "tool", [FunctionResultContent]),
        (REASONING, "assistant", [ReasoningContent]),
        (WEB_SEARCH, "assistant", [UnknownContent]),
        (
            IMAGES,
            "user",
            [TextContent, DataContent, UriContent, DataContent, UriContent, UnknownContent],
        ),
    ],
    ids=["user", "assistant", "call", "output", "reasoning", "web_search", "images"],
)
def test_sdk_items_round_trip_and_read_as_chatkeep_messages(
    item: dict[str, Any], role: str, kinds: list[type]
) -> None:
    message, items = through_store(item)
    assert items == [item]
    assert list(items[0]) == list(item)  # even the key order is the item's
    assert message.role == role
    assert [type(content) for content in message.contents] == kinds
    assert message.message_id == "rec-1"  # chatkeep's id, never the item's
    assert message.additional_properties[ITEM_KEY]["as"] != "verbatim"  # really mapped


def test_chatkeep_readers_see_the_data() -> None:
    user, _ = through_store(USER)
    assert user.text == "What is the weather in Oslo?"
    call, _ = through_store(CALL)
    assert call.contents == [FunctionCallContent("call_1", "weather", '{"city":"Oslo"}')]
    output, _ = through_store(OUTPUT)
    assert isinstance(output.contents[0], FunctionResultContent)
    assert (output.contents[0].call_id, output.contents[0].result) == ("call_1", "sunny")
    reasoning, _ = through_store(REASONING)
    assert isinstance(reasoning.contents[0], ReasoningContent)
    assert reasoning.contents[0].text == "The user wants weather."
    assert reasoning.contents[0].protected_data == "gAAAAB-opaque"
    images, _ = through_store(IMAGES)
    assert isinstance(images.contents[1], DataContent)
    assert images.contents[1].data == b"\x89PNG\r\n\x1a\n"
    assert images.contents[1].media_type == "image/png"


@pytest.mark.parametrize(
    "item",
    [
        {
            "role": "user",
            "content": [{"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo"}],
        },
        {
            "type": "reasoning",
            "id": "r",
            "summary": [
                {"type": "summary_text", "text": "a"},
                {"type": "summary_text", "text": "b"},
            ],
        },
        {"type": "function_call", "call_id": None, "name": "f", "arguments": None},
        {"type": "function_call_output", "call_id": "c", "output": None},
        {"type": "message", "content": "no role"},
        {"role": 7, "content": "odd role"},
        {"role": "user", "content": None},
        {"role": "user", "content": ["a bare string part", 3]},
        {"type": "custom_tool_call", "call_id": "c", "name": "grep", "input": "x"},
        {"type": "item_reference", "id": "msg_1"},
        {},
    ],
)
def test_unusual_items_round_trip(item: dict[str, Any]) -> None:
    assert through_store(item)[1] == [item]


def test_a_lone_surrogate_is_refused_with_a_typed_error() -> None:
    with pytest.raises(EncodeError):
        encode_message(item_to_message({"role": "user", "content": "\ud800"}))


def test_not_an_item() -> None:
    with pytest.raises(TypeError):
        item_to_message(["not", "a", "dict"])  # type: ignore[arg-type]


def test_messages_written_by_other_chatkeep_code_become_items() -> None:
    summary = Message.system("Summary: the user asked about Oslo.")
    assert message_to_items(summary) == [
        {"role": "system", "content": "Summary: the user asked about Oslo."}
    ]
    turn = Message(
        "assistant",
        [TextContent("Checking."), FunctionCallContent("c1", "weather", {"city": "Oslo"})],
    )
    assert message_to_items(turn) == [
        {"role": "assistant", "content": "Checking."},
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "weather",
            "arguments": '{"city": "Oslo"}',
        },
    ]
    result = Message("tool", [FunctionResultContent("c1", {"temp": 3})])
    assert message_to_items(result) == [
        {"type": "function_call_output", "call_id": "c1", "output": '{"temp": 3}'}
    ]


# -- every JSON item -------------------------------------------------------------------------

text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(text, children, max_size=3),
    max_leaves=8,
)
extra = st.dictionaries(
    st.sampled_from(["id", "status", "type", "annotations", "logprobs", "x"]),
    json_values,
    max_size=3,
)
parts = st.one_of(
    st.builds(lambda t, e: {**e, "type": "input_text", "text": t}, text, extra),
    st.builds(lambda t, e: {**e, "type": "output_text", "text": t}, text, extra),
    st.builds(lambda t: {"type": "refusal", "refusal": t}, text),
    st.builds(
        lambda b, d: {
            "type": "input_image",
            "image_url": "data:image/png;base64," + b,
            "detail": d,
        },
        st.binary(max_size=20).map(lambda raw: __import__("base64").b64encode(raw).decode()),
        st.sampled_from(["auto", "low", "high"]),
    ),
    st.dictionaries(text, json_values, max_size=3),
)
items = st.one_of(
    st.builds(
        lambda r, c, e: {**e, "role": r, "content": c},
        st.sampled_from(["user", "assistant", "system", "developer"]),
        text | st.lists(parts, max_size=4),
        extra,
    ),
    st.builds(
        lambda c, n, a, e: {**e, "type": "function_call", "call_id": c, "name": n, "arguments": a},
        text,
        text,
        text,
        extra,
    ),
    st.builds(
        lambda c, o, e: {**e, "type": "function_call_output", "call_id": c, "output": o},
        text,
        json_values,
        extra,
    ),
    st.builds(
        lambda s, enc: {
            "type": "reasoning",
            "id": "rs",
            "summary": s,
            **({"encrypted_content": enc} if enc else {}),
        },
        st.lists(st.builds(lambda t: {"type": "summary_text", "text": t}, text), max_size=3),
        st.none() | text,
    ),
    st.dictionaries(text, json_values, max_size=5),
)


@settings(max_examples=example_count(400), deadline=None)
@given(items)
def test_every_json_item_round_trips_through_a_store(item: dict[str, Any]) -> None:
    message, back = through_store(item)
    assert back == [item]
    assert message.message_id == "rec-1"


@settings(max_examples=example_count(150), deadline=None)
@given(st.lists(items, max_size=4))
def test_the_fast_read_path_agrees_with_the_view(batch: list[dict[str, Any]]) -> None:
    """get_items decodes plain records straight to items; the view path builds messages
    first: both give back exactly what was added."""
    import asyncio

    from chatkeep.core import open_store
    from chatkeep.openai_agents import ChatkeepSession

    session = ChatkeepSession("s", store=open_store("memory://"))
    asyncio.run(session.add_items(batch))  # type: ignore[arg-type]
    fast = session._read_items(None)
    slow = session._items(session._read(None), None)
    assert fast == slow == batch


def test_the_fast_read_path_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    import chatkeep.openai_agents.session as module
    from chatkeep.core import open_store
    from chatkeep.openai_agents import ChatkeepSession

    session = ChatkeepSession("s", store=open_store("memory://"))
    every = [USER, ASSISTANT, CALL, OUTPUT, REASONING, WEB_SEARCH, IMAGES]
    asyncio.run(session.add_items(every))  # type: ignore[arg-type]

    def no_view(*_: Any, **__: Any) -> Any:
        raise AssertionError("the view was walked")

    monkeypatch.setattr(module, "read_view_counted", no_view)
    monkeypatch.setattr(module, "aread_view_counted", no_view)
    assert asyncio.run(session.get_items()) == every
    assert asyncio.run(session.get_items(limit=2)) == [WEB_SEARCH, IMAGES]
