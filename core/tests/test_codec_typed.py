"""The codec's typed one-step decoder (msgspec structures) against its general path.

``plain_decoder()`` may only ever decode a record to exactly what the general path
(``json`` semantics, ``_message_from_dict``) gives, or refuse it (``None``). These tests
feed both the same bytes, from the usual shape and from its edges (other content types,
extra fields, wrong types, duplicated keys, tags, damage), and pin the bytes the encoder
writes, which the decoder's speed work must not change.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatkeep.core import (
    FunctionCallContent,
    FunctionResultContent,
    InvalidMessage,
    Message,
    TextContent,
    codec,
    decode_message,
    encode_message,
)
from chatkeep.core.codec import plain_decoder
from chatkeep.testing import example_count


def general(data: bytes) -> Message:
    """What the general path (no typed decoder) decodes ``data`` to."""
    raw = json.loads(data)
    if type(raw) is not dict:
        raise InvalidMessage("not an object")
    unpack = codec._unpack if codec._MARKER_BYTES in data else codec._as_parsed
    try:
        return codec._message_from_dict(raw, unpack)
    except InvalidMessage:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InvalidMessage(str(exc)) from None


def fields(message: Message) -> list[Any]:
    """Every attribute of a message and its contents, with its type (``==`` alone would
    take ``1 == 1.0 == True`` and a ``Role`` for its string)."""
    out: list[Any] = []
    for name in ("role", "author_name", "message_id", "additional_properties", "extra"):
        value = getattr(message, name)
        out.append((name, type(value), repr(value)))
    for content in message.contents:
        out.append(type(content))
        for name in content.__dataclass_fields__:
            value = getattr(content, name)
            out.append((name, type(value), repr(value)))
    return out


def check(data: bytes) -> Message | None:
    """Assert the typed decoder agrees with the general path on ``data``."""
    typed = plain_decoder()(data)
    try:
        expected = general(data)
    except (InvalidMessage, ValueError, RecursionError):
        assert typed is None, data
        with pytest.raises(InvalidMessage):
            decode_message(data)
        return None
    if typed is not None:
        assert fields(typed) == fields(expected), data
        assert encode_message(typed) == encode_message(expected)
    decoded = decode_message(data)
    assert fields(decoded) == fields(expected)
    return typed


# -- strategies -------------------------------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
# Mostly the value the field should have, sometimes anything at all.
strings = st.one_of(st.text(max_size=12), st.text(max_size=12), values)
props = st.one_of(
    st.just({}), st.dictionaries(st.text(max_size=5), values, max_size=3), st.none(), values
)


@st.composite
def contents(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["text", "function_call", "function_result", "uri", "other"]))
    out: dict[str, Any] = {"type": kind}
    if kind == "text":
        out["text"] = draw(strings)
    elif kind == "function_call":
        out["call_id"] = draw(strings)
        out["name"] = draw(strings)
        if draw(st.booleans()):
            out["arguments"] = draw(values)
    elif kind == "function_result":
        out["call_id"] = draw(strings)
        for key in ("result", "exception"):
            if draw(st.booleans()):
                out[key] = draw(values)
    elif kind == "uri":
        out["uri"] = draw(strings)
    if draw(st.booleans()):
        out["additional_properties"] = draw(props)
    if draw(st.integers(0, 5)) == 0:
        out[draw(st.sampled_from(["annotations", "zz", "type"]))] = draw(values)
    return out


@st.composite
def raw_messages(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": draw(st.sampled_from(["message", "message", "chat_message", "other", ""])),
        "role": draw(st.one_of(st.sampled_from(["user", "assistant", "tool", ""]), values)),
    }
    if draw(st.integers(0, 9)):
        out["contents"] = draw(st.lists(contents(), max_size=3))
    for key in ("author_name", "message_id"):
        if draw(st.booleans()):
            out[key] = draw(st.one_of(st.text(max_size=8), values))
    if draw(st.booleans()):
        out["additional_properties"] = draw(props)
    if draw(st.integers(0, 5)) == 0:
        out["extra_field"] = draw(values)
    return out


@settings(max_examples=example_count(600))
@given(raw_messages())
def test_typed_decoder_agrees_with_the_general_path(raw: dict[str, Any]) -> None:
    check(json.dumps(raw, ensure_ascii=False, separators=(",", ":")).encode())
    check(json.dumps(raw, ensure_ascii=True, indent=1).encode())  # escapes, whitespace


TYPICAL = (
    b'{"type":"message","role":"user","contents":[{"type":"text","text":"hi"}],'
    b'"message_id":"m1","additional_properties":{}}'
)


@pytest.mark.parametrize(
    "data",
    [
        TYPICAL,
        b'{"type":"chat_message","role":"user","contents":[]}',
        b'{"role":"user","type":"message"}',  # no contents: []
        b'{"type":"message","role":"user","contents":[{"text":"late tag","type":"text"}]}',
        b'{"type":"message","role":"user","contents":[{"type":"text","text":"a","text":"b"}]}',
        b'{"type":"message","role":"user","role":"tool","contents":[]}',
        b'{"type":"message","type":"other","role":"user"}',
        b'{"type":"other","type":"message","role":"user"}',
        b'{"type":"message","role":"user","contents":[{"type":"text","type":"uri","uri":"x"}]}',
        b'{"type":"message","role":"user","contents":[{"type":"text","text":1,"text":"a"}]}',
        b'{"type":"message","role":"","contents":[]}',
        b'{"type":"message","role":{"type":"role","value":"user"},"contents":[]}',
        b'{"type":"message","role":"user","contents":null}',
        b'{"type":"message","role":"user","contents":["text"]}',
        b'{"type":"message","role":"user","contents":[{"type":"text"}]}',
        b'{"type":"message","role":"user","contents":[{"type":"text","text":null}]}',
        b'{"type":"message","role":"user","contents":[{"type":"text","text":"a","zz":1}]}',
        b'{"type":"message","role":"user","contents":[{"type":"data","uri":"data:,a"}]}',
        b'{"type":"message","role":"user","contents":[{"type":"mcp","x":1}]}',
        b'{"type":"message","role":"user","contents":[],"annotations":[1]}',
        b'{"type":"message","role":"user","message_id":7}',
        b'{"type":"message","role":"user","author_name":null,"message_id":null}',
        b'{"type":"message","role":"user","additional_properties":null}',
        b'{"type":"message","role":"user","additional_properties":[]}',
        b'{"type":"message","role":"user","additional_properties":[1]}',
        b'{"type":"message","role":"user","additional_properties":{"n":123456789012345678901234567890}}',
        b'{"type":"message","role":"user","additional_properties":{"f":1e400}}',
        b'{"type":"message","role":"user","additional_properties":{"f":NaN}}',
        b'{"type":"message","role":"user","additional_properties":{"f":-0.0,"g":1E5}}',
        b'{"type":"message","role":"user","contents":[{"type":"text","text":"\\ud800"}]}',
        b'{"type":"message","role":"user","contents":[{"type":"text","text":"\\u00e9\\ud83d\\ude00"}]}',
        b'\xef\xbb\xbf{"type":"message","role":"user"}',
        b'{"type":"message","role":"user","contents":[{"type":"function_call","call_id":"c",'
        b'"name":"f","arguments":{"__chatkeep__":"bytes","value":"AA=="}}]}',
        b'{"type":"message","role":"tool","contents":[{"type":"function_result","call_id":"c",'
        b'"result":[1,{"a":null}],"exception":"boom"}]}',
        b'{"type":"message","role":"tool","contents":[{"type":"function_result","call_id":"c",'
        b'"exception":{"not":"a string"}}]}',
        b'{"type":"message","role":"assistant","contents":[{"type":"function_call","call_id":"c",'
        b'"name":"f","arguments":null,"additional_properties":{"k":[1,2]}}]}',
        b'{"type":"message","role":"user","contents":[{"type":"text","text":"x"}] trailing',
        b'[{"type":"message","role":"user"}]',
        b"",
        b'{"type":"message","role":"user","contents":[' + b"[" * 5000 + b"]" * 5000 + b"]}",
    ],
)
def test_typed_decoder_edges(data: bytes) -> None:
    check(data)


def test_typed_decoder_takes_the_usual_shape() -> None:
    """The shapes chatkeep writes for text, tool calls and results are decoded in one step
    (the point of it), into the same classes as always."""
    messages = [
        Message("user", [TextContent("hi")], message_id="a"),
        Message("assistant", [FunctionCallContent("c1", "lookup", '{"q":1}')], message_id="b"),
        Message("tool", [FunctionResultContent("c1", {"rows": [1, 2]})], message_id="c"),
        Message(
            "assistant",
            [TextContent("x", {"k": 1}), FunctionCallContent("c2", "f")],
            author_name="bot",
            message_id="d",
            additional_properties={"chatkeep.stored_at": "2026-12-01T00:00:00+00:00"},
        ),
    ]
    for message in messages:
        data = encode_message(message)
        typed = check(data)
        assert typed is not None, data
        assert typed == message
        assert encode_message(typed) == data


# -- the bytes on disk ------------------------------------------------------------------------

PINNED = [
    (
        Message("user", [TextContent("Hello, é ☃")], message_id="m-1"),
        b'{"type":"message","role":"user","contents":[{"type":"text","text":"Hello, \xc3\xa9 '
        b'\xe2\x98\x83"}],"message_id":"m-1","additional_properties":{}}',
    ),
    (
        Message(
            "assistant",
            [FunctionCallContent("call_1", "lookup_order", '{"order":7}')],
            author_name="bot",
            message_id="m-2",
            additional_properties={"chatkeep.stored_at": "2026-12-01T19:00:00.000001+00:00"},
        ),
        b'{"type":"message","role":"assistant","contents":[{"type":"function_call",'
        b'"call_id":"call_1","name":"lookup_order","arguments":"{\\"order\\":7}"}],'
        b'"author_name":"bot","message_id":"m-2","additional_properties":'
        b'{"chatkeep.stored_at":"2026-12-01T19:00:00.000001+00:00"}}',
    ),
    (
        Message(
            "tool",
            [FunctionResultContent("call_1", {"total": 12.5, "big": 2**70, "raw": b"\x00"})],
            message_id="m-3",
        ),
        b'{"type":"message","role":"tool","contents":[{"type":"function_result",'
        b'"call_id":"call_1","result":{"total":12.5,"big":1180591620717411303424,'
        b'"raw":{"__chatkeep__":"bytes","value":"AA=="}}}],"message_id":"m-3",'
        b'"additional_properties":{}}',
    ),
    (
        Message("user", [TextContent("nan", {"x": float("nan")})]),
        b'{"type":"message","role":"user","contents":[{"type":"text","text":"nan",'
        b'"additional_properties":{"x":{"__chatkeep__":"float","value":"NaN"}}}],'
        b'"additional_properties":{}}',
    ),
]


@pytest.mark.parametrize(("message", "data"), PINNED)
def test_the_bytes_on_disk_are_pinned(message: Message, data: bytes) -> None:
    """The MAF-shaped JSON chatkeep writes, byte for byte; decoding and encoding again gives
    the same bytes."""
    assert encode_message(message) == data
    assert encode_message(decode_message(data)) == data
