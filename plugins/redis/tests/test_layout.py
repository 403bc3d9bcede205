"""Unit tests of the key layout, the element format and the slice-to-LRANGE mapping."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from redis.crc import key_slot

from chatkeep.core import Record
from chatkeep.redis.layout import (
    FORMAT_VERSION,
    BadElement,
    Layout,
    decode_records,
    encode_record,
    lrange_bounds,
)

# Session ids as the core admits them: 1..512 characters, no NUL, no lone surrogates.
session_ids = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=512,
)


def redis_lrange(log: list[int], start: int, end: int) -> list[int]:
    """Redis's LRANGE, transcribed from its C source (t_list.c, lrangeCommand)."""
    length = len(log)
    if start < 0:
        start = length + start
    if end < 0:
        end = length + end
    start = max(start, 0)
    if start > end or start >= length:
        return []
    end = min(end, length - 1)
    return log[start : end + 1]


@given(
    length=st.integers(0, 40),
    start=st.integers(-60, 60) | st.sampled_from([10**30, -(10**30)]),
    stop=st.none() | st.integers(-60, 60) | st.sampled_from([10**30, -(10**30)]),
)
@example(length=5, start=-5, stop=0)
@example(length=5, start=0, stop=0)
@example(length=5, start=-2, stop=4)
@example(length=0, start=-1, stop=None)
def test_lrange_bounds_reproduce_python_slicing(length: int, start: int, stop: int | None) -> None:
    log = list(range(length))
    bounds = lrange_bounds(start, stop)
    got = [] if bounds is None else redis_lrange(log, *bounds)
    assert got == log[start:stop]


def test_tail_reads_map_to_negative_lrange_indices() -> None:
    # Redis walks from the nearer end: a tail read must stay a negative range.
    assert lrange_bounds(-50, None) == (-50, -1)
    assert lrange_bounds(-50, -10) == (-50, -11)


@given(session_ids, session_ids)
def test_distinct_ids_never_share_keys(first: str, second: str) -> None:
    layout = Layout("ns:")
    if first != second:
        assert set(layout.keys(first)).isdisjoint(layout.keys(second))


@given(session_ids)
@example("{")
@example("}")
@example("a}b{c")
@example("%7B")
def test_keys_share_a_hash_tag_and_decode_back(session_id: str) -> None:
    layout = Layout("tenant:")
    log_key, ids_key = layout.keys(session_id)
    tag = log_key[log_key.index("{") + 1 : log_key.index("}")]
    assert tag  # a non-empty hash tag ...
    assert ids_key.startswith(log_key[: log_key.index("}") + 1])  # ... shared by both keys
    assert key_slot(log_key.encode()) == key_slot(ids_key.encode())
    assert not set(tag) & set("{}*?[]\\:")
    assert layout.session_of(log_key) == session_id
    assert layout.session_of(log_key.encode()) == session_id
    assert layout.binary_keys(session_id) == (log_key.encode(), ids_key.encode())


@given(session_ids, session_ids)
def test_encoding_preserves_prefixes(session_id: str, prefix: str) -> None:
    # list_sessions(prefix) filters on the server by the encoded prefix.
    layout = Layout("")
    encoded_id = layout.keys(session_id)[0][1:-5]
    encoded_prefix = layout.scan_pattern(prefix)[1:-6]
    assert encoded_id.startswith(encoded_prefix) == session_id.startswith(prefix)


def test_scan_pattern_escapes_the_namespace() -> None:
    assert Layout("a*b?[c]\\:").scan_pattern() == "a\\*b\\?\\[c\\]\\\\:{*}:log"
    assert Layout("n:").scan_pattern("x*{") == "n:{x%2A%7B*}:log"


def test_foreign_keys_in_the_namespace_are_ignored() -> None:
    layout = Layout("n:")
    assert layout.session_of("n:{abc}:ids") is None
    assert layout.session_of("other:{abc}:log") is None
    assert layout.session_of("n:{}:log") is None
    assert layout.session_of("n:{%zz}:log") is None  # not valid percent-encoding
    assert layout.session_of("n:{%C3}:log") is None  # not UTF-8
    assert layout.session_of("n:{a b}:log") is None  # not the canonical encoding
    assert layout.session_of(b"n:{\xff}:log") is None
    assert layout.session_of("n:{abc}:log") == "abc"


@pytest.mark.parametrize("namespace", ["{", "}", "a{b}"])
def test_namespace_may_not_contain_braces(namespace: str) -> None:
    with pytest.raises(ValueError, match="hash tag"):
        Layout(namespace)


record_ids = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=256,
)


@given(st.lists(st.tuples(record_ids, st.binary(max_size=300)), max_size=20))
def test_elements_round_trip(pairs: list[tuple[str, bytes]]) -> None:
    batch = [Record(record_id, data) for record_id, data in pairs]
    elements = [encode_record(record) for record in batch]
    assert all(element[0] == FORMAT_VERSION for element in elements)
    assert decode_records(elements) == batch


@pytest.mark.parametrize(
    ("element", "reason"),
    [
        (b"", "shorter than the 3-byte header"),
        (b"\x01\x00", "shorter than the 3-byte header"),
        (b"\x02\x00\x01ab", "unknown element format 2"),
        (b"\x01\x00\x09ab", "runs past the end"),
        (b"\x01\x00\x01\xff", "not valid UTF-8"),
    ],
)
def test_damaged_elements_are_named(element: bytes, reason: str) -> None:
    good = encode_record(Record("a", b"x"))
    with pytest.raises(BadElement) as caught:
        decode_records([good, good, element, good])
    assert caught.value.offset == 2
    assert reason in caught.value.reason
