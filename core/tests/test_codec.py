"""The message codec: lossless round trips, MAF's JSON shape, and loud failures."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatkeep.core import (
    ChatkeepError,
    Content,
    DataContent,
    EncodeError,
    FunctionCallContent,
    FunctionResultContent,
    InvalidMessage,
    Message,
    MessageSource,
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
from chatkeep.core.codec import (
    MARKER,
    content_from_dict,
    content_to_dict,
    encode_message_adding,
)
from chatkeep.testing import example_count

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
    st.floats(),  # NaN and the infinities included: they round-trip too
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

# The fields each known type models (the codec's own table, restated so a change shows).
MODELED = {
    "text": {"type", "text", "additional_properties"},
    "function_call": {"type", "call_id", "name", "arguments", "additional_properties"},
    "function_result": {"type", "call_id", "result", "exception", "additional_properties"},
    "data": {"type", "uri", "media_type", "additional_properties"},
    "uri": {"type", "uri", "media_type", "additional_properties"},
    "text_reasoning": {"type", "text", "protected_data", "additional_properties"},
    "message": {"type", "role", "contents", "author_name", "message_id", "additional_properties"},
}


def extras(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    """``extra`` fields for type ``kind``: any name it does not model, any value."""
    names = st.one_of(
        st.text(max_size=10),
        st.sampled_from(["annotations", "hosted", "items", "status", "id", MARKER, "value"]),
    ).filter(lambda name: name not in MODELED[kind])
    return st.dictionaries(names, extended_values, max_size=3)


contents = st.one_of(
    st.builds(TextContent, texts, properties, extras("text")),
    st.builds(
        FunctionCallContent,
        texts,
        texts,
        st.one_of(st.none(), texts, st.dictionaries(keys, extended_values, max_size=4)),
        properties,
        extras("function_call"),
    ),
    st.builds(
        FunctionResultContent,
        texts,
        extended_values,
        optional_text,
        properties,
        extras("function_result"),
    ),
    st.builds(
        DataContent,
        st.binary(max_size=200),
        media_types,
        properties,
        extras("data").filter(lambda extra: "uri" not in extra),
    ),
    st.builds(UriContent, texts, st.one_of(st.none(), media_types), properties, extras("uri")),
    st.builds(ReasoningContent, optional_text, optional_text, properties, extras("text_reasoning")),
    st.builds(
        UnknownContent,
        st.builds(
            lambda kind, rest: {**rest, "type": kind} if kind is not None else rest,
            st.one_of(st.none(), st.text().filter(lambda kind: kind not in KNOWN_TYPES)),
            st.dictionaries(keys.filter(lambda k: k != "type"), extended_values, max_size=4),
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
    extras("message"),
)


def _strict_constant(name: str) -> Any:
    raise AssertionError(f"encoded output contains the non-JSON constant {name}")


def _strict_loads(data: bytes) -> Any:
    return json.loads(data.decode("utf-8"), parse_constant=_strict_constant)


class _NaN:
    """Stands for NaN in a comparison (NaN is unequal to itself, so == cannot see it)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _NaN)

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "NaN"


def nan_safe(value: Any) -> Any:
    """``value`` with every NaN replaced by a :class:`_NaN`, types kept (for ==)."""
    if isinstance(value, float) and math.isnan(value):
        return _NaN()
    if isinstance(value, list):
        return [nan_safe(item) for item in value]
    if isinstance(value, dict):
        return {key: nan_safe(item) for key, item in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return (type(value), tuple(nan_safe(getattr(value, f.name)) for f in fields))
    return value


def assert_same(decoded: Message, original: Message) -> None:
    """Equal (NaN where NaN was), and equal in every detail == ignores (fold, bytes vs str,
    int vs float, order)."""
    assert nan_safe(decoded) == nan_safe(original)
    assert repr(decoded) == repr(original)


# -- round trips ----------------------------------------------------------------------------


@settings(
    max_examples=example_count(200),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(messages)
def test_round_trip_is_lossless(message: Message) -> None:
    encoded = encode_message(message)
    assert_same(decode_message(encoded), message)


@settings(
    max_examples=example_count(100),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
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


@settings(max_examples=example_count(150), deadline=None)
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


# -- NaN and the infinities ----------------------------------------------------------------


@pytest.mark.parametrize(("value", "tag"), [(math.nan, "NaN"), (math.inf, "Infinity"),
                                            (-math.inf, "-Infinity")])  # fmt: skip
def test_non_finite_floats_round_trip_as_strict_json(value: float, tag: str) -> None:
    message = Message(
        "tool",
        [
            FunctionCallContent("c", "f", {"x": value}),
            FunctionResultContent("c", [1, value], extra={"score": value}),
            UnknownContent({"type": "future", "v": value}),
        ],
        additional_properties={"deep": [{"v": value}]},
        extra={"top": value},
    )
    encoded = encode_message(message)
    raw = _strict_loads(encoded)  # no NaN/Infinity tokens: any JSON reader accepts it
    tagged = {MARKER: "float", "value": tag}
    assert raw["additional_properties"] == {"deep": [{"v": tagged}]}
    assert raw["top"] == tagged
    assert raw["contents"][0]["arguments"] == {"x": tagged}
    assert raw["contents"][1]["result"] == [1, tagged]
    assert raw["contents"][1]["score"] == tagged
    assert raw["contents"][2] == {"type": "future", "v": tagged}
    back = decode_message(encoded)
    assert_same(back, message)
    result = back.contents[1]
    assert isinstance(result, FunctionResultContent)
    assert isinstance(result.result[1], float)
    assert repr(result.result[1]) == repr(value)


def test_reads_the_nan_tokens_maf_file_store_writes() -> None:
    # MAF's FileHistoryProvider falls back to Python's json for non-finite floats, which
    # writes NaN/Infinity tokens; such a line is read, and written back as strict JSON.
    line = (
        b'{"type":"message","role":"user","contents":[{"type":"text","text":"hi",'
        b'"additional_properties":{}}],"additional_properties":{"a":NaN,"b":-Infinity}}'
    )
    message = decode_message(line)
    assert math.isnan(message.additional_properties["a"])
    assert message.additional_properties["b"] == -math.inf
    assert _strict_loads(encode_message(message))["additional_properties"]["a"] == {
        MARKER: "float",
        "value": "NaN",
    }


@pytest.mark.parametrize("bad", ["nan", "inf", 1.5, None, ["NaN"]])
def test_a_damaged_float_tag_is_refused(bad: object) -> None:
    data = _message_json(additional_properties={"x": {MARKER: "float", "value": bad}})
    with pytest.raises(InvalidMessage):
        decode_message(data)


# -- fields chatkeep does not model ---------------------------------------------------------


def test_unmodeled_fields_of_known_contents_are_kept_verbatim() -> None:
    raw = {
        "type": "message",
        "role": "assistant",
        "contents": [
            {
                "type": "text",
                "text": "see [1]",
                "annotations": [{"type": "citation", "url": "https://e.org", "title": "E"}],
                "additional_properties": {},
            },
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}",
             "hosted": False, "informational_only": True},
            {"type": "function_result", "call_id": "c", "result": "ok", "status": "completed",
             "id": "fc_1", "items": [{"type": "text", "text": "ok"}]},
            {"type": "data", "uri": "data:image/png;base64,AAE=", "media_type": "image/png",
             "name": "dot.png", "file_id": "file_1"},
            {"type": "uri", "uri": "https://e.org/a.pdf", "name": "a.pdf"},
            {"type": "text_reasoning", "text": "hm", "id": "rs_1"},
        ],
        "message_id": "m1",
        "created_at": "2026-01-01T00:00:00Z",
        "additional_properties": {},
    }  # fmt: skip
    message = message_from_dict(raw)
    text, call, result, data, uri, reasoning = message.contents
    assert isinstance(text, TextContent)
    assert text.extra == {"annotations": raw["contents"][0]["annotations"]}
    assert isinstance(call, FunctionCallContent)
    assert call.extra == {"hosted": False, "informational_only": True}
    assert isinstance(result, FunctionResultContent)
    assert result.result == "ok"
    items = [{"type": "text", "text": "ok"}]
    assert result.extra == {"status": "completed", "id": "fc_1", "items": items}
    assert isinstance(data, DataContent)
    assert data.data == b"\x00\x01"
    assert data.extra == {"name": "dot.png", "file_id": "file_1"}
    assert isinstance(uri, UriContent)
    assert uri.extra == {"name": "a.pdf"}
    assert isinstance(reasoning, ReasoningContent)
    assert reasoning.extra == {"id": "rs_1"}
    assert message.extra == {"created_at": "2026-01-01T00:00:00Z"}
    written = _strict_loads(encode_message(message))
    # Everything comes back; only the empty per-content additional_properties are left out.
    del raw["contents"][0]["additional_properties"]
    assert written == raw


@pytest.mark.parametrize(
    "content",
    [
        TextContent("x", extra={"text": "other"}),
        FunctionCallContent("c", "f", extra={"arguments": "{}"}),
        FunctionResultContent("c", extra={"type": "text"}),
        UriContent("https://e.org", extra={"media_type": "text/html"}),
        ReasoningContent("r", extra={"additional_properties": {}}),
        DataContent(b"x", extra={"media_type": "a/b"}),
    ],
    ids=repr,
)
def test_extra_may_not_shadow_a_modeled_field(content: Content) -> None:
    with pytest.raises(EncodeError, match="set the attribute"):
        encode_message(Message("user", [content]))


def test_message_extra_may_not_shadow_a_modeled_field() -> None:
    with pytest.raises(EncodeError, match="set the attribute"):
        encode_message(Message("user", "x", extra={"role": "system"}))


def test_tagged_and_untagged_copies_keep_extra() -> None:
    message = Message("user", "x", message_id="m", extra={"created_at": "now"})
    tagged = message.tagged(MessageSource.CHAT_HISTORY, "p")
    assert tagged.extra == {"created_at": "now"}
    assert tagged.untagged().extra == {"created_at": "now"}
    assert tagged.untagged() == message


@pytest.mark.parametrize(
    ("uri", "media_type", "data"),
    [
        ("data:text/plain;charset=utf-8;base64,aGk=", "text/plain", b"hi"),  # MAF's from_uri
        ("data:,Hello%2C%20World", "text/plain", b"Hello, World"),  # not base64 (RFC 2397)
        ("data:image/png;base64,AAE=", "image/jpeg", b"\x00\x01"),  # header != media_type
        # base64 with non-zero padding bits ("AAE=" is the canonical form of the same bytes)
        ("data:application/octet-stream;base64,AAF=", "application/octet-stream", b"\x00\x01"),
    ],
)
def test_data_uris_in_other_forms_come_back_as_they_were(
    uri: str, media_type: str, data: bytes
) -> None:
    raw = {"type": "data", "uri": uri, "media_type": media_type}
    message = message_from_dict({"type": "message", "role": "user", "contents": [raw]})
    content = message.contents[0]
    assert isinstance(content, DataContent)
    assert content.data == data
    assert content.media_type == media_type
    assert _strict_loads(encode_message(message))["contents"][0] == raw
    assert_same(decode_message(encode_message(message)), message)
    # Once the data changes, the kept URI no longer holds it: the canonical form is written.
    changed = dataclasses.replace(content, data=b"new")
    written = content_to_dict(changed)
    assert written["uri"] == f"data:{media_type};base64,bmV3"


def test_data_uri_without_media_type_takes_the_uris() -> None:
    raw = {"type": "data", "uri": "data:image/gif;base64,R0lG"}
    content = content_from_dict(raw)
    assert isinstance(content, DataContent)
    assert content.media_type == "image/gif"
    assert content.extra == {}
    assert content_to_dict(content) == {**raw, "media_type": "image/gif"}


# -- untagged dicts (a framework's own to_dict()) -----------------------------------------


def test_untagged_dicts_hold_python_values_and_no_tags() -> None:
    # A framework's to_dict() holds NaN, bytes and application dicts as they are; with
    # tagged=False nothing in it is read as a tag, and message_to_dict gives it back so.
    raw = {
        "type": "message",
        "role": "tool",
        "contents": [
            {"type": "function_result", "call_id": "c", "result": {MARKER: []},
             "status": {MARKER: "bytes", "value": "not a tag"}},
            {"type": "future", "blob": b"\x00", "score": math.nan},
        ],
        "additional_properties": {MARKER: None, "inf": math.inf},
    }  # fmt: skip
    message = message_from_dict(raw, tagged=False)
    result = message.contents[0]
    assert isinstance(result, FunctionResultContent)
    assert result.result == {MARKER: []}
    assert result.extra == {"status": {MARKER: "bytes", "value": "not a tag"}}
    assert message.additional_properties == {MARKER: None, "inf": math.inf}
    assert_same(decode_message(encode_message(message)), message)
    back = message_to_dict(decode_message(encode_message(message)), tagged=False)
    assert back["contents"][0] == raw["contents"][0]
    assert back["contents"][1]["blob"] == b"\x00"
    assert math.isnan(back["contents"][1]["score"])
    assert back["additional_properties"] == raw["additional_properties"]


def test_untagged_conversion_copies_containers() -> None:
    raw = {"type": "message", "role": "user", "contents": [], "additional_properties": {"l": [1]}}
    message = message_from_dict(raw, tagged=False)
    raw["additional_properties"]["l"].append(2)  # type: ignore[index]
    assert message.additional_properties == {"l": [1]}
    out = message_to_dict(message, tagged=False)
    out["additional_properties"]["l"].append(3)
    assert message.additional_properties == {"l": [1]}


# -- what is not a message ------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        {"role": "user", "content": "Hello"},  # an OpenAI-style dict: no "type"
        {"role": "user", "contents": [{"type": "text", "text": "Hello"}]},
        {},
        {"type": "function_call", "call_id": "c", "name": "f"},
        {"type": "chatkeep.retract", "target": "x"},
        {"type": None, "role": "user"},
    ],
)
def test_a_dict_that_is_not_a_message_is_refused(raw: dict[str, Any]) -> None:
    with pytest.raises(InvalidMessage, match="not a message"):
        message_from_dict(raw)
    with pytest.raises(InvalidMessage):
        decode_message(json.dumps(raw).encode())


def test_the_refusal_names_the_keys_it_found() -> None:
    with pytest.raises(InvalidMessage) as caught:
        message_from_dict({"role": "user", "content": "Hello"})
    assert "content, role" in str(caught.value)
    assert isinstance(caught.value, ChatkeepError)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("raw", [None, "message", 5, ["type", "message"]])
def test_a_non_dict_is_refused(raw: Any) -> None:
    with pytest.raises(InvalidMessage):
        message_from_dict(raw)
    with pytest.raises(InvalidMessage):
        content_from_dict(raw)


# -- refusing what would not round-trip ----------------------------------------------------


class _Thing:
    pass


@pytest.mark.parametrize(
    "message",
    [
        Message("user", "x", additional_properties={"d": {1: "int key"}}),
        Message("tool", [FunctionResultContent("c", {(1, 2): "tuple key"})]),
        Message("tool", [FunctionResultContent("c", {1, 2, 3})]),
        Message("tool", [FunctionResultContent("c", frozenset())]),
        Message("user", "x", additional_properties={"obj": _Thing()}),
        Message("user", [TextContent("x", {"obj": object()})]),
        Message("user", "lone surrogate \ud800 in text"),
        Message("user", [UnknownContent({"type": "future", "v": {"obj": _Thing()}})]),
        Message("user", [TextContent("x", extra={"annotations": [{1, 2}]})]),
        Message("user", "x", extra={"created_at": object()}),
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
    assert issubclass(EncodeError, ChatkeepError)


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
def test_corrupt_input_raises_invalid_message(data: bytes) -> None:
    with pytest.raises(InvalidMessage):
        decode_message(data)


def test_deeply_nested_input_raises_value_error_not_recursion_error() -> None:
    # A hostile or damaged record must give the typed error callers turn into CorruptRecord.
    depth = 100_000
    data = b'{"type":"message","role":"user","contents":[],"additional_properties":{"a":'
    data += b"[" * depth + b"]" * depth + b"}}"
    with pytest.raises(ValueError):
        decode_message(data)


@given(
    messages,
    st.sampled_from(
        [
            {},
            {"chatkeep.stored_at": "2026-12-01T00:00:00.000000Z"},
            {"chatkeep.count": {"n": 3, "after": None, "k": 1}, "chatkeep.stored_at": "t"},
            {MARKER: "a tag key", "x": 1},
        ]
    ),
)
@settings(max_examples=example_count(300), suppress_health_check=[HealthCheck.too_slow])
def test_encoding_with_added_properties_is_encoding_a_copy_that_has_them(
    message: Message, added: dict[str, Any]
) -> None:
    keys_before = list(message.additional_properties)
    copy = dataclasses.replace(
        message, additional_properties={**message.additional_properties, **added}
    )
    try:
        expected: bytes | type[Exception] = encode_message(copy)
    except EncodeError:
        expected = EncodeError
    if expected is EncodeError:
        with pytest.raises(EncodeError):
            encode_message_adding(message, added)
    else:
        assert encode_message_adding(message, added) == expected
    assert list(message.additional_properties) == keys_before  # the message is not changed


def test_pack_value_keeps_what_a_message_field_keeps() -> None:
    """``pack_value``/``unpack_value``: an adapter's own values (outside any message) as
    the codec keeps a message's fields: plain JSON out, the same values back."""
    from chatkeep.core.codec import pack_value, unpack_value

    value = {
        "when": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=ZoneInfo("Europe/Oslo")),
        "raw": b"\x00\xff",
        "nan": math.inf,
        "tag": {"__chatkeep__": "bytes", "value": "not a tag"},
        "plain": [1, "a", None, {"b": True}],
    }
    packed = pack_value(value)
    assert json.loads(json.dumps(packed, allow_nan=False)) == packed  # strict JSON
    assert unpack_value(json.loads(json.dumps(packed))) == value
    assert pack_value({"k": [1, 2]}) == {"k": [1, 2]}  # plain JSON stays as it is
    with pytest.raises(EncodeError):
        pack_value({"k": object()})
    with pytest.raises(InvalidMessage, match="malformed tagged value"):
        unpack_value({"__chatkeep__": "bytes", "value": "%%"})
