"""Object bodies: records and the id summary round-trip; anything else is refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatkeep.core import Record
from chatkeep.s3 import frames
from chatkeep.s3.recordids import short_hash

records = st.lists(
    st.builds(
        Record,
        st.text(st.characters(blacklist_characters="\x00"), min_size=1, max_size=20),
        st.binary(max_size=50),
    ),
    min_size=1,
    max_size=8,
    unique_by=lambda r: r.id,
)


@given(records, st.integers(min_value=0, max_value=10**12))
def test_records_round_trip(batch: list[Record], start: int) -> None:
    body = frames.encode(start, batch)
    header, decoded = frames.decode(body)
    assert decoded == batch
    assert (header.start, header.end, header.size, header.base) == (
        start,
        start + len(batch),
        len(body),
        None,
    )
    # Any prefix holding the header parses; a shorter one says how much it needs.
    parsed = frames.parse_header(body[:10])
    assert isinstance(parsed, int) and parsed > 10
    assert frames.parse_header(body[: header.offsets[0]]) == header


def test_a_segment_carries_the_hashes_of_the_records_since_its_base() -> None:
    recent = frames.Recent().extended(10, [short_hash("a"), short_hash("b")])
    recent = recent.extended(12, [short_hash("c")])
    body = frames.encode(13, [Record("d", b"D")], base=10, recent=recent)
    header, _ = frames.decode(body)
    assert header.base == 10 and header.recent == recent
    assert header.recent.holders(short_hash("b")) == [10]
    assert header.recent.holders(short_hash("c")) == [12]
    assert header.recent.holders(short_hash("zz")) == []
    assert header.recent.since(12) == frames.Recent(((12, 1),), short_hash("c"))
    assert header.recent.since(13) == frames.Recent()


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"CKS2",
        b"CKS1\x00\x00\x00\x02{}",
        b"XXXX\x00\x00\x00\x02{}",
        b"CKS2\x00\x00\x00\x02{}",
        b'CKS2\x00\x00\x00\x1a{"start":0,"ids":[],"sizes":[]}',
        frames.encode(0, [Record("a", b"abc")])[:-1],
        frames.encode(0, [Record("a", b"abc")]) + b"x",
    ],
)
def test_anything_else_is_a_frame_error(body: bytes) -> None:
    with pytest.raises(frames.FrameError):
        frames.decode(body)


def test_a_summary_that_does_not_add_up_is_refused() -> None:
    with pytest.raises(frames.FrameError):
        frames.Recent(((0, 2),), short_hash("a"))
