"""Unit tests of the key layout, the element format and the slice-to-LRANGE mapping."""

from __future__ import annotations

import struct

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from redis.crc import key_slot

from chatkeep.core import Record
from chatkeep.redis.layout import (
    SLOTS,
    BadElement,
    Layout,
    decode_member,
    decode_records,
    element_body,
    encode_session_id,
    lrange_bounds,
    prefix_range,
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
    layout = Layout("ns:", None)
    if first != second:
        assert set(layout.keys(first)).isdisjoint(layout.keys(second))


@pytest.mark.parametrize(
    ("one", "two"),
    [(None, "acme"), ("acme", "acme/eu"), ("acme", "acmecorp"), ("a", "a:b"), ("a/b", "a")],
)
def test_namespaces_never_share_keys_or_scan_patterns(one: str | None, two: str | None) -> None:
    first, second = Layout("chatkeep:", one), Layout("chatkeep:", two)
    assert set(first.keys("s")).isdisjoint(second.keys("s"))
    assert first.index_keys() != second.index_keys()
    assert second.session_of(first.keys("s")[0]) is None
    assert first.session_of(second.keys("s")[0]) is None


@given(session_ids)
@example("{")
@example("}")
@example("a}b{c")
@example("%7B")
def test_keys_share_a_hash_tag_and_decode_back(session_id: str) -> None:
    layout = Layout("tenant:", "acme", cluster=True)
    log_key, digests_key, ids_key = layout.keys(session_id)
    tag = log_key[log_key.index("{") + 1 : log_key.index("}")]
    assert tag  # a non-empty hash tag ...
    for other in (digests_key, ids_key):  # ... shared by every key of the session
        assert other.startswith(log_key[: log_key.index("}") + 1])
        assert key_slot(log_key.encode()) == key_slot(other.encode())
    assert not set(tag) & set("{}*?[]\\:")
    assert layout.session_of(log_key) == session_id
    assert layout.session_of(log_key.encode()) == session_id
    binary = layout.binary_keys(session_id)
    assert binary[:3] == (log_key.encode(), digests_key.encode(), ids_key.encode())
    # The session's index lives on its slot, so one script updates both.
    assert key_slot(binary[3]) == key_slot(log_key.encode())
    assert decode_member(binary[4]) == session_id


def test_every_cluster_slot_has_an_index_key() -> None:
    keys = Layout("p:", None, cluster=True).index_keys()
    assert [key_slot(key) for key in keys] == list(range(SLOTS))
    assert Layout("p:", None).index_keys() == [b"p:{}:sessions"]


@given(session_ids, session_ids)
def test_encoding_preserves_prefixes(session_id: str, prefix: str) -> None:
    # list_sessions(prefix) is a lexicographic range of the index of encoded ids.
    member = encode_session_id(session_id).encode()
    low, high = prefix_range(prefix)
    assert (low[1:] <= member <= high[1:]) == session_id.startswith(prefix)


def test_scan_pattern_escapes_the_prefix() -> None:
    assert Layout("a*b?[c]\\:", None).scan_pattern() == "a\\*b\\?\\[c\\]\\\\:{*}:log"
    assert Layout("n:", "t/x").scan_pattern() == "n:t/x{*}:log"


def test_foreign_keys_in_the_namespace_are_ignored() -> None:
    layout = Layout("n:", None)
    assert layout.session_of("n:{abc}:ids") is None
    assert layout.session_of("n:{}:sessions") is None
    assert layout.session_of("other:{abc}:log") is None
    assert layout.session_of("n:{}:log") is None
    assert layout.session_of("n:{%zz}:log") is None  # not valid percent-encoding
    assert layout.session_of("n:{%C3}:log") is None  # not UTF-8
    assert layout.session_of("n:{a b}:log") is None  # not the canonical encoding
    assert layout.session_of(b"n:{\xff}:log") is None
    assert layout.session_of("n:{abc}:log") == "abc"


def test_a_non_ascii_key_prefix_keeps_sessions_listable() -> None:
    layout = Layout("café:", None)
    assert layout.session_of(layout.keys("s")[0].encode()) == "s"


record_ids = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=256,
)


def as_stored(batch: list[Record], first_position: int = 0) -> list[bytes]:
    """The elements the append script writes for ``batch`` (head + body)."""
    return [
        struct.pack(">BQ", 2, first_position + n) + element_body(record)
        for n, record in enumerate(batch)
    ]


def old_element(record: Record) -> bytes:
    """A chatkeep-redis 0.1 element (format 1)."""
    raw = record.id.encode()
    return b"\x01" + len(raw).to_bytes(2, "big") + raw + record.data


@given(st.lists(st.tuples(record_ids, st.binary(max_size=300)), max_size=20))
def test_elements_round_trip(pairs: list[tuple[str, bytes]]) -> None:
    batch = [Record(record_id, data) for record_id, data in pairs]
    assert decode_records(as_stored(batch), 0) == batch
    assert decode_records(as_stored(batch, 7)[2:], -5) == batch[2:]  # a tail read


def test_format_1_elements_are_still_read() -> None:
    old = [Record("a", b"1"), Record("b", b"2")]
    new = [Record("c", b"3")]
    elements = [old_element(r) for r in old] + as_stored(new, 2)
    assert decode_records(elements, 0) == old + new
    assert decode_records(elements[1:], -2) == old[1:] + new


def test_a_missing_record_is_a_gap_at_its_position() -> None:
    batch = [Record(str(n), b"x") for n in range(6)]
    elements = as_stored(batch)
    del elements[3]
    with pytest.raises(BadElement) as caught:
        decode_records(elements, 0)
    assert caught.value.position == 3 and "missing" in caught.value.reason
    with pytest.raises(BadElement) as caught:
        decode_records(elements[1:], -4)  # the gap inside a tail read
    assert caught.value.position == 3
    with pytest.raises(BadElement):
        decode_records(elements[3:], 3)  # a positive read past the gap: shifted
    assert decode_records(elements[3:], -2) == batch[4:]  # the true tail, nothing lost


@pytest.mark.parametrize(
    ("element", "reason"),
    [
        (b"", "empty"),
        (b"\x01\x00", "shorter than the 3-byte header"),
        (b"\x02\x00\x01ab", "shorter than its header"),
        (b"\x03\x00\x01ab", "unknown element format 3"),
        (b"\x01\x00\x09ab", "runs past the end"),
        (b"\x01\x00\x01\xff", "not valid UTF-8"),
        (struct.pack(">BQ", 2, 2) + element_body(Record("c", b"xyz"))[:-1], "header says 3"),
        (struct.pack(">BQIH", 2, 2, 0, 1) + b"\xff", "not valid UTF-8"),
    ],
)
def test_damaged_elements_are_named(element: bytes, reason: str) -> None:
    good = as_stored([Record("a", b"x"), Record("b", b"y"), Record("c", b"z"), Record("d", b"w")])
    with pytest.raises(BadElement) as caught:
        decode_records([good[0], good[1], element, good[3]], 0)
    assert caught.value.offset == 2
    assert reason in caught.value.reason
