"""The codec's JSON parser (msgspec where installed) parses exactly as ``json.loads``:
the same values where both accept a text, the stdlib's result or error elsewhere."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from chatkeep.core import InvalidMessage, decode_message, encode_message
from chatkeep.core.codec import parse_json
from chatkeep.core.messages import FunctionResultContent, Message

ACCEPTED = [
    b'{"a":123456789012345678901234567890}',  # past 64 bits: an int, never a float
    b'{"a":-9223372036854775809}',
    b'{"a":18446744073709551616}',
    b'{"a":1,"a":2}',  # the last duplicate wins
    b'{"a":1e400}',  # the stdlib reads inf
    b'{"a":"\\ud800"}',  # a lone surrogate
    b'{"a":NaN,"b":Infinity,"c":-Infinity}',  # MAF's file store writes these tokens
    b'\xef\xbb\xbf{"a":1}',  # a UTF-8 byte order mark
    '{"a":"é"}'.encode("utf-16"),  # the stdlib detects UTF-16 and UTF-32
    b'{"a":-0.0,"b":-0,"c":5e-324,"d":2.5e-324,"e":1.0000000000000002}',
    b'{"k":"\\/\\u00e9\\ud83d\\ude00\\u0000\\u2028"}',
    '{"a":"\U0001f600"}',  # str input too
]

REFUSED = [b'{"a":1}x', b'{"a":"\xff"}', b"", b"{", b"[" * 100_000 + b"]" * 100_000]


def _same(left: Any, right: Any) -> bool:
    if isinstance(left, float) and math.isnan(left):
        return isinstance(right, float) and math.isnan(right)
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(map(_same, left, right))
    if isinstance(left, float):
        return left == right and math.copysign(1, left) == math.copysign(1, right)
    return bool(left == right)


@pytest.mark.parametrize("text", ACCEPTED, ids=range(len(ACCEPTED)))
def test_parses_what_the_stdlib_parses_to_the_same_values(text: bytes | str) -> None:
    assert _same(parse_json(text), json.loads(text))


def test_deep_nesting_gets_the_stdlib_s_answer() -> None:
    # msgspec's depth limit and the stdlib's differ: whichever refuses, the stdlib decides.
    for depth in (500, 900, 980, 1100, 3000):
        deep = b"[" * depth + b"]" * depth
        try:
            expected = json.loads(deep)
        except RecursionError:
            with pytest.raises(RecursionError):
                parse_json(deep)
        else:
            assert parse_json(deep) == expected


@pytest.mark.parametrize("text", REFUSED, ids=range(len(REFUSED)))
def test_refuses_with_the_stdlib_error(text: bytes) -> None:
    try:
        json.loads(text)
    except (ValueError, RecursionError) as exc:
        expected: type[BaseException] = type(exc)
    else:  # pragma: no cover - the cases above are all refused
        raise AssertionError("the stdlib accepted it")
    with pytest.raises(expected):
        parse_json(text)


def test_big_integers_in_a_tool_result_survive_decoding() -> None:
    big = 2**100 + 1
    message = Message("tool", [FunctionResultContent("c1", {"n": big, "m": -big})], message_id="m")
    decoded = decode_message(encode_message(message))
    result = decoded.contents[0]
    assert isinstance(result, FunctionResultContent)
    assert result.result == {"n": big, "m": -big}
    assert type(result.result["n"]) is int


def test_damaged_records_still_raise_invalid_message() -> None:
    for data in (b'{"type":"message"', b"\xff\xfe\x00", b"[" * 100_000):
        with pytest.raises(InvalidMessage):
            decode_message(data)


def test_the_parser_is_imported_on_the_first_decode_not_with_the_core() -> None:
    import subprocess
    import sys

    program = (
        "import sys, chatkeep.core as core\n"
        "before = 'msgspec' in sys.modules\n"
        "core.decode_message(core.encode_message(core.Message.user('hi')))\n"
        "print(before, 'msgspec' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["False", "True"]
