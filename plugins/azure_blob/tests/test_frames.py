"""The frame format: round trips, walking both ways, and damage detection."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatkeep.azure_blob import frames as fmt
from chatkeep.core import InvalidRecord, Record

record_lists = st.lists(
    st.builds(Record, st.text(min_size=1, max_size=20), st.binary(max_size=50)),
    min_size=1,
    max_size=8,
)


def one_record_frame(record_id: str, data: bytes, total: int) -> bytes:
    body = fmt.encode_records([Record(record_id, data)])
    return fmt.encode_frame(fmt.KIND_RECORDS, body, 1, total)


@given(st.lists(record_lists, min_size=1, max_size=6))
def test_frames_walk_forwards_and_backwards(batches: list[list[Record]]) -> None:
    segment = b""
    total = 0
    for records in batches:
        total += len(records)
        body = fmt.encode_records(records)
        segment += fmt.encode_frame(fmt.KIND_RECORDS, body, len(records), total)
    forward = fmt.scan_forward(segment, 0, 0)
    backward = fmt.scan_backward(segment, 0, len(segment))
    assert forward.wanted is None and backward.wanted is None
    assert [f.start for f in forward.frames] == [f.start for f in reversed(backward.frames)]
    decoded = [fmt.decode_records(f.body, f.records) for f in forward.frames]
    assert decoded == batches
    assert [fmt.decode_ids(f.body, f.records) for f in forward.frames] == [
        [r.id for r in records] for records in batches
    ]
    assert forward.frames[-1].total == total
    assert fmt.last_total(segment, 0, len(segment)) == total


def test_windows_that_cut_a_frame_say_what_they_need() -> None:
    frames = [one_record_frame(f"r{n}", b"x" * 30, total=n + 1) for n in range(3)]
    segment = b"".join(frames)
    size = len(frames[0])
    cut = fmt.scan_backward(segment[size + 5 :], size + 5, len(segment))
    assert len(cut.frames) == 1 and cut.wanted == size
    head = fmt.scan_forward(segment[: size + 10], 0, 0)
    assert len(head.frames) == 1 and head.wanted == 2 * size
    stopped = fmt.scan_backward(segment, 0, len(segment), first=1)
    assert [f.first for f in stopped.frames] == [2, 1]


def test_damage_is_detected() -> None:
    frame = bytearray(one_record_frame("a", b"1", total=1))
    for index in range(len(frame)):
        damaged = bytearray(frame)
        damaged[index] ^= 0x01
        with pytest.raises(fmt.FrameError):
            scan = fmt.scan_backward(bytes(damaged), 0, len(damaged))
            if scan.wanted is not None or not scan.frames:
                raise fmt.FrameError(0, "incomplete")
    lenient = fmt.scan_backward(bytes(frame[:-1]) + b"\x00", 0, len(frame), lenient=True)
    assert lenient.frames == []


def test_pointer_and_roll_bodies() -> None:
    body = fmt.encode_records([Record("a", b"x" * 10)])
    pointer = fmt.Pointer(len(body), zlib.crc32(body), fmt.ids_digest([Record("a", b"")]), "t0k3n")
    assert fmt.decode_pointer(fmt.encode_pointer(pointer)) == pointer
    assert fmt.decode_roll(fmt.encode_roll(7)) == 7
    with pytest.raises(fmt.FrameError):
        fmt.decode_pointer(fmt.encode_pointer(pointer)[:-1])


def test_oversized_record_data_is_refused() -> None:
    class Huge(bytes):
        def __len__(self) -> int:
            return 2**32

    with pytest.raises(InvalidRecord):
        fmt.encode_records([Record("a", Huge())])
