"""The byte format of a session segment: a sequence of self-delimiting frames.

Every ``append`` writes exactly one frame with one Append Block call, so a frame is the unit
of atomicity. A frame is::

    header   8 bytes   b"ck", format version (1), kind, body length (u32)
    body     ...       depends on the kind
    trailer  20 bytes  body length (u32), record count (u32),
                       records in the session up to and including this frame (u64),
                       CRC-32 of everything before it in the frame (u32)

The trailer lets a reader walk *backwards* from the end of a segment, so a tail read fetches
only the last bytes; the running total in each trailer gives the session's length and every
frame's record positions without scanning from the start.

Kinds:

``RECORDS``  the batch itself: per record, id length (u16), data length (u32), id (UTF-8), data.
``POINTER``  a batch too large for one block, stored as a block blob: its size (u64), CRC-32
             (u32), SHA-256 of its record ids (32 bytes) and the blob's token (u16 + UTF-8).
``ROLL``     the segment is full; the session continues in segment ``next`` (u32).

All integers are little-endian.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Sequence
from typing import NamedTuple

from chatkeep.core import InvalidRecord, Record

__all__ = [
    "FRAME_OVERHEAD",
    "KIND_POINTER",
    "KIND_RECORDS",
    "KIND_ROLL",
    "Frame",
    "FrameError",
    "Pointer",
    "Scan",
    "data_digest",
    "decode_id_digests",
    "decode_ids",
    "decode_pointer",
    "decode_records",
    "decode_roll",
    "encode_frame",
    "encode_pointer",
    "encode_records",
    "encode_roll",
    "ids_digest",
    "last_total",
    "scan_backward",
    "scan_forward",
]

MAGIC = b"ck"
VERSION = 1
KIND_RECORDS = 1
KIND_POINTER = 2
KIND_ROLL = 3
_KINDS = frozenset({KIND_RECORDS, KIND_POINTER, KIND_ROLL})

_HEADER = struct.Struct("<2sBBI")
_TRAILER = struct.Struct("<IIQI")
_TRAILER_FIELDS = struct.Struct("<IIQ")
_CRC = struct.Struct("<I")
_RECORD = struct.Struct("<HI")
_POINTER = struct.Struct("<QI32sH")
_ROLL = struct.Struct("<I")

HEADER_SIZE = _HEADER.size
TRAILER_SIZE = _TRAILER.size
#: Bytes a frame adds around its body.
FRAME_OVERHEAD = HEADER_SIZE + TRAILER_SIZE
#: Bytes each record adds to a RECORDS body besides its id and data.
RECORD_OVERHEAD = _RECORD.size
_MAX_DATA = 0xFFFFFFFF


class FrameError(ValueError):
    """Bytes that are not a valid frame where one should be (``offset`` in the segment;
    ``position`` in the log of the first record concerned, when known)."""

    def __init__(self, offset: int, reason: str, position: int | None = None) -> None:
        self.offset = offset
        self.reason = reason
        self.position = position
        super().__init__(f"invalid frame at byte {offset}: {reason}")


class Frame(NamedTuple):
    """One frame found in a segment."""

    kind: int
    start: int  #: offset of its first byte in the segment
    end: int  #: offset just past its trailer
    records: int  #: how many records it holds (0 for ROLL)
    total: int  #: records in the session up to and including this frame
    body: bytes

    @property
    def first(self) -> int:
        """Position in the session's log of this frame's first record."""
        return self.total - self.records


class Pointer(NamedTuple):
    """The body of a POINTER frame."""

    size: int
    crc: int
    digest: bytes
    token: str


class Scan(NamedTuple):
    """What a scan of a byte window found.

    ``frames`` in the order they were walked (backwards: newest first); ``reached`` the
    offset where the walk stopped; ``wanted`` the offset a further fetch must reach back (or
    forward) to for the next frame, or ``None`` when the walk hit the window's edge cleanly.
    """

    frames: list[Frame]
    reached: int
    wanted: int | None


def encode_records(records: Sequence[Record]) -> bytes:
    """The RECORDS body of ``records``."""
    parts: list[bytes] = []
    pack = _RECORD.pack
    for record in records:
        raw_id = record.id.encode("utf-8")
        data = record.data
        if len(data) > _MAX_DATA:
            raise InvalidRecord(f"record {record.id!r} is larger than 4 GiB")
        parts.append(pack(len(raw_id), len(data)))
        parts.append(raw_id)
        parts.append(data)
    return b"".join(parts)


def decode_records(body: bytes, count: int, offset: int = 0) -> list[Record]:
    """The records of a RECORDS body (``offset`` only labels errors)."""
    view = memoryview(body)
    records: list[Record] = []
    append = records.append
    unpack = _RECORD.unpack_from
    position = 0
    size = len(body)
    try:
        while position < size:
            id_length, data_length = unpack(body, position)
            position += RECORD_OVERHEAD
            id_end = position + id_length
            data_end = id_end + data_length
            if data_end > size:
                raise FrameError(offset, "a record runs past the end of its frame")
            append(Record(str(view[position:id_end], "utf-8"), bytes(view[id_end:data_end])))
            position = data_end
    except (struct.error, UnicodeDecodeError) as exc:
        raise FrameError(offset, f"undecodable record: {exc}") from None
    if len(records) != count:
        raise FrameError(offset, f"holds {len(records)} records, its trailer says {count}")
    return records


def decode_ids(body: bytes, count: int, offset: int = 0) -> list[str]:
    """Only the record ids of a RECORDS body (cheaper than :func:`decode_records`)."""
    ids: list[str] = []
    unpack = _RECORD.unpack_from
    position = 0
    size = len(body)
    try:
        while position < size:
            id_length, data_length = unpack(body, position)
            position += RECORD_OVERHEAD
            ids.append(body[position : position + id_length].decode("utf-8"))
            position += id_length + data_length
    except (struct.error, UnicodeDecodeError) as exc:
        raise FrameError(offset, f"undecodable record: {exc}") from None
    if position != size or len(ids) != count:
        raise FrameError(offset, "record lengths disagree with the frame")
    return ids


def data_digest(data: bytes) -> bytes:
    """A 16-byte digest of a record's data: what tells an exact retry from a reused id."""
    return hashlib.blake2b(data, digest_size=16).digest()


def decode_id_digests(body: bytes, count: int, offset: int = 0) -> list[tuple[str, bytes]]:
    """The record ids of a RECORDS body, each with :func:`data_digest` of its data."""
    return [(record.id, data_digest(record.data)) for record in decode_records(body, count, offset)]


def last_total(window: bytes, window_start: int, end: int) -> int | None:
    """The running total in the trailer ending at ``end``, if the window holds it (not yet
    checksum-verified: the frame itself is checked when it is scanned)."""
    at = end - TRAILER_SIZE - window_start
    if at < 0 or end - window_start > len(window):
        return None
    return int(_TRAILER.unpack_from(window, at)[2])


def ids_digest(records: Sequence[Record]) -> bytes:
    """SHA-256 of a batch's record ids, naming the batch in a POINTER frame."""
    return hashlib.sha256("\x00".join(record.id for record in records).encode("utf-8")).digest()


def encode_pointer(pointer: Pointer) -> bytes:
    """The POINTER body for ``pointer``."""
    token = pointer.token.encode("utf-8")
    return _POINTER.pack(pointer.size, pointer.crc, pointer.digest, len(token)) + token


def decode_pointer(body: bytes, offset: int = 0) -> Pointer:
    """The :class:`Pointer` in a POINTER body."""
    try:
        size, crc, digest, token_length = _POINTER.unpack_from(body)
        token = body[_POINTER.size : _POINTER.size + token_length].decode("utf-8")
    except (struct.error, UnicodeDecodeError) as exc:
        raise FrameError(offset, f"undecodable pointer: {exc}") from None
    if _POINTER.size + token_length != len(body) or not token:
        raise FrameError(offset, "malformed pointer")
    return Pointer(size, crc, digest, token)


def encode_roll(next_segment: int) -> bytes:
    """The ROLL body naming the segment that follows."""
    return _ROLL.pack(next_segment)


def decode_roll(body: bytes, offset: int = 0) -> int:
    """The next segment number in a ROLL body."""
    if len(body) != _ROLL.size:
        raise FrameError(offset, "malformed roll frame")
    (next_segment,) = _ROLL.unpack(body)
    return int(next_segment)


def encode_frame(kind: int, body: bytes, count: int, total: int) -> bytes:
    """A complete frame around ``body``."""
    header = _HEADER.pack(MAGIC, VERSION, kind, len(body))
    fields = _TRAILER_FIELDS.pack(len(body), count, total)
    crc = zlib.crc32(fields, zlib.crc32(body, zlib.crc32(header)))
    return b"".join((header, body, fields, _CRC.pack(crc)))


def _check(window: bytes, at: int, start: int, body_length: int) -> tuple[int, int, int, int]:
    """Validate the frame at window index ``at``; return (kind, count, total, crc-ok end)."""
    magic, version, kind, header_length = _HEADER.unpack_from(window, at)
    if magic != MAGIC or version != VERSION or kind not in _KINDS:
        raise FrameError(start, "bad header (not a chatkeep frame, or a newer format)")
    if header_length != body_length:
        raise FrameError(start, "header and trailer disagree on the body length")
    trailer_at = at + HEADER_SIZE + body_length
    _, count, total, crc = _TRAILER.unpack_from(window, trailer_at)
    computed = zlib.crc32(memoryview(window)[at : trailer_at + _TRAILER_FIELDS.size])
    if computed != crc:
        raise FrameError(start, "checksum mismatch")
    if count > total:
        raise FrameError(start, "record count exceeds the running total")
    return kind, count, total, trailer_at + TRAILER_SIZE


def scan_backward(
    window: bytes,
    window_start: int,
    end: int,
    *,
    floor: int = 0,
    first: int | None = None,
    lenient: bool = False,
) -> Scan:
    """Walk frames backwards from segment offset ``end`` through ``window`` (which holds the
    segment's bytes from ``window_start``).

    Stops at the window's start, at offset ``floor``, after the frame holding record
    ``first`` (when given), or, if ``lenient``, quietly before a damaged frame.
    """
    frames: list[Frame] = []
    reached = end
    while reached > floor:
        trailer_at = reached - TRAILER_SIZE - window_start
        if trailer_at < 0:
            return Scan(frames, reached, reached - TRAILER_SIZE)
        body_length = _TRAILER.unpack_from(window, trailer_at)[0]
        start = reached - FRAME_OVERHEAD - body_length
        at = start - window_start
        if start >= 0 and at < 0:
            return Scan(frames, reached, start)
        try:
            if start < 0:
                raise FrameError(reached, "a frame's length points before the segment start")
            kind, count, total, _ = _check(window, at, start, body_length)
        except FrameError:
            if lenient:
                return Scan(frames, reached, None)
            raise
        body = bytes(window[at + HEADER_SIZE : at + HEADER_SIZE + body_length])
        frames.append(Frame(kind, start, reached, count, total, body))
        reached = start
        if first is not None and total - count <= first:
            break
    return Scan(frames, reached, None)


def scan_forward(window: bytes, window_start: int, start: int, lenient: bool = False) -> Scan:
    """Walk frames forwards from segment offset ``start`` through ``window`` to its end;
    ``wanted`` is the end offset of a frame the window cuts off. With ``lenient``, stops
    quietly before a damaged frame."""
    frames: list[Frame] = []
    reached = start
    window_end = window_start + len(window)
    while reached < window_end:
        at = reached - window_start
        if reached + HEADER_SIZE > window_end:
            return Scan(frames, reached, reached + HEADER_SIZE)
        body_length = _HEADER.unpack_from(window, at)[3]
        frame_end = reached + FRAME_OVERHEAD + body_length
        if frame_end > window_end:
            return Scan(frames, reached, frame_end)
        try:
            trailer_length = _TRAILER.unpack_from(window, at + HEADER_SIZE + body_length)[0]
            kind, count, total, _ = _check(window, at, reached, trailer_length)
        except FrameError:
            if lenient:
                return Scan(frames, reached, None)
            raise
        body = bytes(window[at + HEADER_SIZE : at + HEADER_SIZE + body_length])
        frames.append(Frame(kind, reached, frame_end, count, total, body))
        reached = frame_end
    return Scan(frames, reached, None)
