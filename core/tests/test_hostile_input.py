"""Hostile input gets a typed error and loses nothing (issue 16, item 4): the codec and the
history provider fuzzed with Hypothesis (deep nesting, lone surrogates, NaN, huge strings,
arbitrary bytes), and every failure must be a chatkeep error, never a RecursionError, a
UnicodeError or a crash."""

from __future__ import annotations

import asyncio
import contextlib
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatkeep.core import (
    AgentSession,
    ChatkeepError,
    CorruptRecord,
    FunctionCallContent,
    FunctionResultContent,
    HistoryProvider,
    Message,
    Record,
    TextContent,
    decode_message,
    encode_message,
    open_store,
    read_view,
)
from chatkeep.testing import example_count

FUZZ = settings(
    max_examples=example_count(150),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)

# Text with everything Python strings allow, lone surrogates included.
hostile_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | hostile_text
    | st.binary(max_size=16),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(hostile_text | st.integers(), children, max_size=4)
    ),
    max_leaves=30,
)


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": [value]}
    return value


@st.composite
def hostile_messages(draw: st.DrawFn) -> Message:
    contents = draw(
        st.lists(
            st.one_of(
                st.builds(TextContent, hostile_text),
                st.builds(FunctionCallContent, hostile_text, hostile_text, json_like),
                st.builds(FunctionResultContent, hostile_text, json_like),
            ),
            max_size=3,
        )
    )
    properties = draw(st.dictionaries(hostile_text, json_like, max_size=3))
    # (an empty role is refused by Message itself, with a TypeError, before any storing)
    role = draw(
        st.sampled_from(["user", "assistant", "tool", "system"]) | hostile_text.filter(bool)
    )
    return Message(role, contents, message_id="m1", additional_properties=properties)


def equal(one: Any, two: Any) -> bool:
    """Equality in which NaN equals NaN (the codec keeps NaN)."""
    if isinstance(one, float) and isinstance(two, float) and math.isnan(one):
        return math.isnan(two)
    if isinstance(one, dict) and isinstance(two, dict):
        return one.keys() == two.keys() and all(equal(one[k], two[k]) for k in one)
    if isinstance(one, (list, tuple)) and isinstance(two, (list, tuple)):
        return len(one) == len(two) and all(equal(a, b) for a, b in zip(one, two, strict=True))
    return bool(one == two)


@FUZZ
@given(hostile_messages())
def test_encoding_anything_round_trips_or_raises_a_typed_error(message: Message) -> None:
    try:
        data = encode_message(message)
    except ChatkeepError:
        return  # refused, with a chatkeep error: fine
    back = decode_message(data)
    assert back.role == message.role and back.message_id == message.message_id
    assert equal(back.additional_properties, message.additional_properties)


@FUZZ
@given(st.binary(max_size=400) | st.text(max_size=200).map(str.encode))
def test_decoding_any_bytes_returns_a_message_or_raises_a_typed_error(data: bytes) -> None:
    with contextlib.suppress(ChatkeepError):
        decode_message(data)


@pytest.mark.parametrize("depth", [100, 1_000, 20_000])
def test_deep_nesting_is_a_typed_error_everywhere(depth: int) -> None:
    deep = Message("tool", [FunctionResultContent("c1", nested(depth))], message_id="deep")
    shallow_enough = depth <= 100
    if shallow_enough:
        assert decode_message(encode_message(deep)) == deep
    else:
        with pytest.raises(ChatkeepError):
            encode_message(deep)
    raw = b'{"type":"message","role":"user","contents":[],"additional_properties":'
    raw += b'{"a":' * depth + b"1" + b"}" * depth + b"}"
    if not shallow_enough:
        with pytest.raises(ChatkeepError):
            decode_message(raw)
    provider = HistoryProvider(open_store("memory://"))
    session = AgentSession("s")
    if not shallow_enough:
        with pytest.raises(ChatkeepError):
            asyncio.run(provider.invoked(session, [deep], []))
        assert provider.store.read("s") == []  # nothing half-stored


def test_a_ten_megabyte_string_round_trips() -> None:
    big = Message.user("x" * 10_000_000, message_id="big")
    assert decode_message(encode_message(big)) == big


def test_lone_surrogates_are_refused_with_a_typed_error_and_store_nothing() -> None:
    provider = HistoryProvider(open_store("memory://"))
    session = AgentSession("s")
    good = Message.user("fine", message_id="ok")
    bad = Message.assistant("broken \ud800 text", message_id="bad")
    with pytest.raises(ChatkeepError):
        asyncio.run(provider.invoked(session, [good], [bad]))
    assert provider.store.read("s") == []  # the turn is stored whole or not at all


@FUZZ
@given(st.lists(st.binary(max_size=200), min_size=1, max_size=8))
def test_views_over_undecodable_records_raise_corrupt_record(blobs: list[bytes]) -> None:
    store = open_store("memory://")
    store.append("s", [Record(f"r{n}", blob) for n, blob in enumerate(blobs)])
    try:
        read_view(store, "s")
    except CorruptRecord as error:
        assert error.session_id == "s" and 0 <= error.position < len(blobs)
    except ChatkeepError:
        pass
