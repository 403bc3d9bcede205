"""The message codec: lossless round trips, MAF's JSON shape, and loud failures."""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatkeep.core import (
    DataContent,
    EncodeError,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ReasoningContent,
    Role,
    TextContent,
    UnknownContent,
    UriContent,
    decode_message,
    encode_message,
    message_from_dict,
    message_to_dict,
)
from chatkeep.core.codec import MARKER

KNOWN_TYPES = {"text", "function_call", "function_result", "data", "uri", "text_reasoning"}
ZONES = ["Europe/Oslo", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe", "UTC"]

# -- strategies ---------------------------------------------------------------------------

# Keys a user might pick, including every key the codec itself uses for its tags.
keys = st.one_of(
    st.text(max_size=10),
    st.sampled_from([MARKER, "value", "zone", "fold", "type", "$type", "_attribution"]),
)
texts = st.one_of(
    st.text(),
    st.text(alphabet=st.characters(min_codepoint=0x10000), min_size=1),  # non-BMP only
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)
fixed_offsets = st.integers(min_value=-86399, max_value=86399).map(
    lambda seconds: dt.timezone(dt.timedelta(seconds=seconds))
)
zone_infos = st.sampled_from(ZONES).map(ZoneInfo)
folds = st.integers(min_value=0, max_value=1)
datetimes = st.builds(
    lambda value, fold: value.replace(fold=fold),
    st.datetimes(
        timezones=st.one_of(st.none(), st.just(dt.timezone.utc), fixed_offsets, zone_infos)
    ),
    folds,
)
times = st.builds(
    lambda value, fold: value.replace(fold=fold),
    st.times(timezones=st.one_of(st.none(), fixed_offsets)),
    folds,
)
extended_leaves = st.one_of(json_scalars, st.binary(max_size=40), datetimes, st.dates(), times)
extended_values = st.recursive(
    extended_leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=4)
    ),
    max_leaves=12,
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=10,
)
properties = st.dictionaries(keys, extended_values, max_size=4)
optional_text = st.one_of(st.none(), texts)
media_types = st.from_regex(r"\A[a-z]{1,12}/[a-z0-9.+-]{1,20}(;[a-z]{1,8}=[a-z0-9-]{1,8})?\Z")

contents = st.one_of(
    st.builds(TextContent, texts, properties),
    st.builds(
        FunctionCallContent,
        texts,
        texts,
        st.one_of(st.none(), texts, st.dictionaries(keys, extended_values, max_size=4)),
        properties,
    ),
    st.builds(FunctionResultContent, texts, extended_values, optional_text, properties),
    st.builds(DataContent, st.binary(max_size=200), media_types, properties),
    st.builds(UriContent, texts, st.one_of(st.none(), media_types), properties),
    st.builds(ReasoningContent, optional_text, optional_text, properties),
    st.builds(
        UnknownContent,
        st.builds(
            lambda kind, rest: {**rest, "type": kind} if kind is not None else rest,
            st.one_of(st.none(), st.text().filter(lambda kind: kind not in KNOWN_TYPES)),
            st.dictionaries(st.text(max_size=8).filter(lambda k: k != "type"), json_values),
        ),
    ),
)
messages = st.builds(
    Message,
    st.one_of(st.sampled_from(["user", "assistant", "system", "tool"]), st.text(min_size=1)),
    st.lists(contents, max_size=5),
    optional_text,
    optional_text,
    properties,
)


def _strict_constant(name: str) -> Any:
    raise AssertionError(f"encoded output contains the non-JSON constant {name}")


def _strict_loads(data: bytes) -> Any:
    return json.loads(data.decode("utf-8"), parse_constant=_strict_constant)


def assert_same(decoded: Message, original: Message) -> None:
    """Equal, and equal in every detail == ignores (fold, bytes vs str, int vs float, order)."""
    assert decoded == original
    assert repr(decoded) == repr(original)


# -- round trips ----------------------------------------------------------------------------


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages)
def test_round_trip_is_lossless(message: Message) -> None:
    encoded = encode_message(message)
    assert_same(decode_message(encoded), message)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages)
def test_encoded_output_is_strict_utf8_json_in_maf_shape(message: Message) -> None:
    encoded = encode_message(message)
    assert isinstance(encoded, bytes)
    raw = _strict_loads(encoded)
    assert raw["type"] == "message"
    assert raw["role"] == message.role
    assert isinstance(raw["contents"], list)
    assert len(raw["contents"]) == len(message.contents)
    for item, content in zip(raw["contents"], message.contents, strict=True):
        assert item.get("type") == content.type or isinstance(content, UnknownContent)
    # The dict form round-trips too (it is what MAF users and session state see).
    assert_same(message_from_dict(json.loads(json.dumps(message_to_dict(message)))), message)


@settings(max_examples=150, deadline=None)
@given(datetimes)
def test_datetimes_keep_offset_zone_and_fold(value: dt.datetime) -> None:
    message = Message("tool", [FunctionResultContent("c", {"at": value})])
    back = decode_message(encode_message(message)).contents[0]
    assert isinstance(back, FunctionResultContent)
    result = back.result["at"]
    assert result == value
    assert result.fold == value.fold
    assert result.utcoffset() == value.utcoffset()
    assert getattr(result.tzinfo, "key", None) == getattr(value.tzinfo, "key", None)


def test_zoneinfo_ambiguous_time_keeps_fold() -> None:
    oslo = ZoneInfo("Europe/Oslo")
    first = dt.datetime(2024, 10, 27, 2, 30, tzinfo=oslo)  # CEST, before clocks go back
    second = first.replace(fold=1)  # the same wall time an hour later, CET
    message = Message("user", "x", additional_properties={"times": [first, second]})
    back = decode_message(encode_message(message)).additional_properties["times"]
    assert [t.fold for t in back] == [0, 1]
    assert [t.utcoffset() for t in back] == [dt.timedelta(hours=2), dt.timedelta(hours=1)]
    assert back[1].astimezone(dt.timezone.utc) - back[0].astimezone(dt.timezone.utc) == (
        dt.timedelta(hours=1)
    )
    assert back[0].tzinfo is oslo


def test_every_content_type_round_trips_example() -> None:
    when = dt.datetime(2025, 3, 30, 2, 30, tzinfo=ZoneInfo("Europe/Oslo"), fold=1)
    message = Message(
        Role.ASSISTANT,
        [
            TextContent("Hei 🌍 𝄞 — non-BMP too", {"lang": "nb"}),
            FunctionCallContent("call_1", "weather", {"city": "Oslo", "days": [1, 2.5, None]}),
            FunctionCallContent("call_2", "search", '{"q": "not parsed"}'),
            FunctionResultContent(
                "call_1",
                {"blob": b"\x00\xff", "when": when, "day": dt.date(2024, 2, 29), "n": [True]},
            ),
            FunctionResultContent("call_2", None, exception="timeout"),
            DataContent(b"\x89PNG\r\n\x1a\n\x00", "image/png"),
            UriContent("https://example.com/a.pdf", "application/pdf"),
            ReasoningContent("because", protected_data="opaque=="),
            UnknownContent({"type": "hosted_file", "file_id": "f1", "extra": {"x": [1]}}),
        ],
        author_name="bot",
        message_id="m-1",
        additional_properties={MARKER: "bytes", "value": "not really bytes"},
    )
    assert message.role == "assistant"
    assert_same(decode_message(encode_message(message)), message)


@pytest.mark.parametrize(
    "user_dict",
    [
        {MARKER: "bytes", "value": "AAAA"},
        {MARKER: "datetime", "value": "2024-01-01T00:00:00"},
        {MARKER: "dict", "value": {MARKER: "bytes", "value": "AA=="}},
        {MARKER: None},
        {MARKER: {"nested": b"real bytes"}},
    ],
)
def test_user_dicts_with_the_marker_key_stay_dicts(user_dict: dict[str, Any]) -> None:
    message = Message(
        "tool",
        [FunctionResultContent("c", user_dict, additional_properties={"p": user_dict})],
        additional_properties={"meta": user_dict, "top": [user_dict]},
    )
    back = decode_message(encode_message(message))
    assert_same(back, message)
    result = back.contents[0]
    assert isinstance(result, FunctionResultContent)
    assert result.result == user_dict


def test_tuples_come_back_as_lists() -> None:
    message = Message("user", "x", additional_properties={"t": (1, (2, 3))})
    assert decode_message(encode_message(message)).additional_properties == {"t": [1, [2, 3]]}


@pytest.mark.parametrize(
    "media_type",
    ["image/png", "text/plain;charset=utf-8", "audio/L16;rate=16000", 'text/plain;name="a,b"'],
)
def test_data_content_media_types_round_trip(media_type: str) -> None:
    message = Message("user", [DataContent(b"\x00binary,with,commas\xff", media_type)])
    assert_same(decode_message(encode_message(message)), message)


# -- the MAF JSON shape ---------------------------------------------------------------------


def test_simple_message_has_maf_shape() -> None:
    raw = _strict_loads(encode_message(Message.user("hi", message_id="m1")))
    assert raw.pop("additional_properties", {}) == {}
    assert raw == {
        "type": "message",
        "role": "user",
        "contents": [{"type": "text", "text": "hi"}],
        "message_id": "m1",
    }


def test_content_shapes_match_maf() -> None:
    raw = message_to_dict(
        Message(
            "assistant",
            [
                FunctionCallContent("c1", "f", '{"a": 1}'),
                DataContent(b"hi", "text/plain"),
                ReasoningContent("r"),
            ],
        )
    )
    call, data, reasoning = raw["contents"]
    assert call == {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a": 1}'}
    assert data["type"] == "data"
    assert data["uri"] == "data:text/plain;base64,aGk="
    assert data["media_type"] == "text/plain"
    assert reasoning == {"type": "text_reasoning", "text": "r"}


# What MAF's Python ``to_dict()`` writes: contents carry ``additional_properties: {}``,
# older releases wrote the role as an object and the type as "chat_message".
MAF_TOOL_TURN = {
    "type": "chat_message",
    "role": {"type": "role", "value": "assistant"},
    "contents": [
        {"type": "text", "text": "Checking the weather.", "additional_properties": {}},
        {
            "type": "function_call",
            "call_id": "call_abc",
            "name": "get_weather",
            "arguments": '{"location": "Oslo"}',
            "additional_properties": {},
        },
        {"type": "hosted_file", "file_id": "file_9", "additional_properties": {}},
    ],
    "author_name": "weather_agent",
    "message_id": "msg_123",
    "additional_properties": {},
}
MAF_TOOL_RESULT = {
    "type": "message",
    "role": "tool",
    "contents": [
        {
            "type": "function_result",
            "call_id": "call_abc",
            "result": {"temperature": 3.5, "unit": "C"},
            "additional_properties": {},
        },
        {
            "type": "data",
            "uri": "data:image/png;base64,iVBORw0KGgo=",
            "media_type": "image/png",
            "additional_properties": {},
        },
        {"type": "uri", "uri": "https://example.com/x.png", "media_type": "image/png"},
        {"type": "text_reasoning", "text": "hmm", "protected_data": "enc"},
    ],
    "additional_properties": {},
}


def test_decodes_literal_maf_output() -> None:
    turn = decode_message(json.dumps(MAF_TOOL_TURN).encode())
    assert turn.role == "assistant"
    assert turn.author_name == "weather_agent"
    assert turn.message_id == "msg_123"
    assert turn.additional_properties == {}
    text, call, unknown = turn.contents
    assert text == TextContent("Checking the weather.")
    assert call == FunctionCallContent("call_abc", "get_weather", '{"location": "Oslo"}')
    assert isinstance(unknown, UnknownContent)
    assert unknown.type == "hosted_file"
    assert unknown.raw == MAF_TOOL_TURN["contents"][2]  # kept verbatim
    # An unknown content is written back exactly as it was read.
    again = _strict_loads(encode_message(turn))
    assert again["contents"][2] == MAF_TOOL_TURN["contents"][2]

    result = decode_message(json.dumps(MAF_TOOL_RESULT).encode())
    assert result.role == "tool"
    fr, data, uri, reasoning = result.contents
    assert fr == FunctionResultContent("call_abc", {"temperature": 3.5, "unit": "C"})
    assert data == DataContent(b"\x89PNG\r\n\x1a\n", "image/png")
    assert uri == UriContent("https://example.com/x.png", "image/png")
    assert reasoning == ReasoningContent("hmm", "enc")
    assert_same(decode_message(encode_message(result)), result)


# -- refusing what would not round-trip ----------------------------------------------------


class _Thing:
    pass


@pytest.mark.parametrize(
    "message",
    [
        Message("user", "x", additional_properties={"score": math.nan}),
        Message("user", "x", additional_properties={"deep": [{"v": math.inf}]}),
        Message("assistant", [FunctionCallContent("c", "f", {"x": -math.inf})]),
        Message("tool", [FunctionResultContent("c", [1, math.nan])]),
        Message("user", "x", additional_properties={"d": {1: "int key"}}),
        Message("tool", [FunctionResultContent("c", {(1, 2): "tuple key"})]),
        Message("tool", [FunctionResultContent("c", {1, 2, 3})]),
        Message("tool", [FunctionResultContent("c", frozenset())]),
        Message("user", "x", additional_properties={"obj": _Thing()}),
        Message("user", [TextContent("x", {"obj": object()})]),
        Message("user", "lone surrogate \ud800 in text"),
        Message("user", [UnknownContent({"type": "future", "v": math.nan})]),
        Message("user", [UnknownContent({"type": "future", "v": b"bytes"})]),
    ],
    ids=lambda m: repr(m)[:60],
)
def test_unstorable_values_raise_encode_error(message: Message) -> None:
    with pytest.raises(EncodeError):
        encode_message(message)


def test_unknown_content_with_non_str_keys_is_refused() -> None:
    # json would silently turn 1 into "1": the message would not come back equal.
    message = Message("user", [UnknownContent({"type": "future", 1: "one"})])
    with pytest.raises(EncodeError):
        encode_message(message)


def test_encode_error_is_both_type_and_value_error() -> None:
    assert issubclass(EncodeError, TypeError)
    assert issubclass(EncodeError, ValueError)


# -- corrupt input --------------------------------------------------------------------------


def _message_json(**overrides: Any) -> bytes:
    raw: dict[str, Any] = {"type": "message", "role": "user", "contents": []}
    raw.update(overrides)
    return json.dumps(raw).encode()


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"\xff\xfe\x00garbage",
        b'{"role": "user", "contents": [',
        b"[]",
        b'"a string"',
        b"null",
        b"42",
        _message_json(type="function_call"),
        _message_json(role=5),
        _message_json(role=""),
        _message_json(role={"type": "role"}),
        _message_json(contents={"type": "text"}),
        _message_json(contents="hello"),
        _message_json(contents=[5]),
        _message_json(contents=["text"]),
        _message_json(contents=[{"type": "text"}]),
        _message_json(contents=[{"type": "text", "text": 5}]),
        _message_json(contents=[{"type": "function_call", "call_id": "c"}]),
        _message_json(contents=[{"type": "function_result", "call_id": None}]),
        _message_json(contents=[{"type": "data", "uri": "data:image/png;base64,@@@"}]),
        _message_json(contents=[{"type": "data", "uri": "data:image/png;base64,AAA"}]),
        _message_json(contents=[{"type": "data", "uri": "https://not-a-data-uri"}]),
        _message_json(contents=[{"type": "data", "uri": 7}]),
        _message_json(contents=[{"type": "uri"}]),
        _message_json(contents=[{"type": "text", "text": "x", "additional_properties": [1]}]),
        _message_json(additional_properties="nope"),
        _message_json(additional_properties={"b": {MARKER: "bytes", "value": "!!"}}),
        _message_json(additional_properties={"b": {MARKER: "bytes", "value": 5}}),
        _message_json(additional_properties={"d": {MARKER: "datetime", "value": "yesterday"}}),
        _message_json(additional_properties={"d": {MARKER: "datetime", "value": None}}),
        _message_json(
            additional_properties={
                "d": {MARKER: "datetime", "value": "2024-01-01T00:00:00", "zone": "No/Such_Zone"}
            }
        ),
        _message_json(additional_properties={"d": {MARKER: "dict", "value": [1]}}),
        _message_json(additional_properties={"d": {MARKER: "martian", "value": 1}}),
    ],
)
def test_corrupt_input_raises_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode_message(data)


def test_deeply_nested_input_raises_value_error_not_recursion_error() -> None:
    # A hostile or damaged record must give the typed error callers turn into CorruptRecord.
    depth = 100_000
    data = b'{"type":"message","role":"user","contents":[],"additional_properties":{"a":'
    data += b"[" * depth + b"]" * depth + b"}}"
    with pytest.raises(ValueError):
        decode_message(data)
