"""The object body format: header first, exact round trips, damage detected."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatkeep.core import Record
from chatkeep.s3 import segments

record_lists = st.lists(
    st.builds(Record, st.text(min_size=1, max_size=20), st.binary(max_size=64)),
    min_size=1,
    max_size=20,
    unique_by=lambda r: r.id,
)


@given(st.integers(min_value=0, max_value=10**12), record_lists)
def test_round_trip(start: int, records: list[Record]) -> None:
    body = segments.encode(start, records)
    header, decoded = segments.decode(body)
    assert decoded == records
    assert header.start == start and header.end == start + len(records)
    assert all(type(r.data) is bytes for r in decoded)


def test_ids_with_lone_surrogates_and_emoji_round_trip() -> None:
    records = [Record("\ud800x", b"a"), Record("\U0001f600", b""), Record('q"\\', b"\x00")]
    assert segments.decode(segments.encode(0, records))[1] == records


def test_header_parses_from_a_prefix_and_asks_for_more() -> None:
    records = [Record(f"id-{n}", bytes([n]) * 100) for n in range(50)]
    body = segments.encode(7, records)
    assert segments.parse_header(body[:3]) == 8
    needed = segments.parse_header(body[:20])
    assert isinstance(needed, int) and needed > 20
    header = segments.parse_header(body[:needed])
    assert isinstance(header, segments.Header)
    # A ranged read of records 40..49 needs only their bytes.
    first, last = header.offsets[40], header.offsets[50]
    assert header.records(body[first:last], 40, 50, base=first) == records[40:]


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"XXXX\x00\x00\x00\x02{}",
        b"CKS1\x00\x00\x00\x05[1,2]",
        b"CKS1\x00\x00\x00\x02{}",
        segments.encode(0, [Record("a", b"xyz")])[:-1],
        segments.encode(0, [Record("a", b"xyz")]) + b"!",
    ],
)
def test_damage_is_reported(body: bytes) -> None:
    with pytest.raises(segments.SegmentFormatError):
        segments.decode(body)
