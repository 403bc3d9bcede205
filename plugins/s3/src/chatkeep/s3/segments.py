"""The body of a segment or chunk object.

::

    b"CKS1"                      magic and format version
    uint32 big-endian            length of the header
    header (JSON, ASCII)         {"start": 42, "ids": ["m1", "m2"], "sizes": [120, 88]}
    data                         the records' bytes, concatenated in order

The header comes first and lists every record's size, so a ranged GET of the header tells
which byte range holds any run of records: a tail read of a large chunk fetches only the
records it returns. JSON escapes every non-ASCII character, so record ids (any ``str``)
round-trip exactly. A zero-byte object in the segment namespace is a *guard* left behind by
compaction (see :mod:`chatkeep.s3.compaction`), never a segment.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from chatkeep.core import Record

__all__ = [
    "HEADER_PROBE_BYTES",
    "MAGIC",
    "Header",
    "Loaded",
    "SegmentFormatError",
    "decode",
    "encode",
    "parse_header",
]

MAGIC = b"CKS1"
_PREAMBLE = len(MAGIC) + 4
#: How many leading bytes a ranged read of a header asks for first.
HEADER_PROBE_BYTES = 64 * 1024


class SegmentFormatError(ValueError):
    """The object is not a chatkeep segment (the store turns this into ``CorruptRecord``)."""


def encode(start: int, records: Sequence[Record]) -> bytes:
    """The body of an object holding ``records`` at log positions ``start, start+1, ...``."""
    header = json.dumps(
        {
            "start": start,
            "ids": [record.id for record in records],
            "sizes": [len(record.data) for record in records],
        },
        separators=(",", ":"),
    ).encode("ascii")
    return b"".join([MAGIC, len(header).to_bytes(4, "big"), header, *(r.data for r in records)])


@dataclass(frozen=True, slots=True)
class Header:
    """A parsed header: positions, ids and where each record's bytes are."""

    start: int
    ids: tuple[str, ...]
    #: ``offsets[i]`` is where record ``i``'s data starts in the object; the last entry is
    #: the end of the data, so ``len(offsets) == count + 1``.
    offsets: tuple[int, ...]

    @property
    def count(self) -> int:
        """How many records the object holds."""
        return len(self.ids)

    @property
    def end(self) -> int:
        """The log position just after the object's last record."""
        return self.start + len(self.ids)

    def records(
        self, body: bytes | memoryview, first: int, last: int, base: int = 0
    ) -> list[Record]:
        """Records ``first..last-1`` (indexes within the object) cut out of ``body``, which
        holds the object's bytes from offset ``base`` on."""
        ids, offsets = self.ids, self.offsets
        return [
            Record(ids[index], bytes(body[offsets[index] - base : offsets[index + 1] - base]))
            for index in range(first, last)
        ]


@dataclass(frozen=True, slots=True)
class Loaded:
    """Records read from one object: ``records[0]`` is at log position ``start``."""

    start: int
    records: list[Record]
    header: Header

    def between(self, lo: int, hi: int) -> list[Record]:
        """The records at log positions ``[lo, hi)`` (which must lie within this read)."""
        return self.records[lo - self.start : hi - self.start]


def parse_header(prefix: bytes) -> Header | int:
    """Parse the header at the start of an object.

    Returns the :class:`Header`, or the number of leading bytes needed when ``prefix`` is too
    short to hold it. Raises :class:`SegmentFormatError` for anything that is not a segment.
    """
    if len(prefix) < _PREAMBLE:
        if prefix and not MAGIC.startswith(prefix[: len(MAGIC)]):
            raise SegmentFormatError("not a chatkeep segment (bad magic)")
        return _PREAMBLE
    if prefix[: len(MAGIC)] != MAGIC:
        raise SegmentFormatError("not a chatkeep segment (bad magic)")
    length = int.from_bytes(prefix[len(MAGIC) : _PREAMBLE], "big")
    if len(prefix) < _PREAMBLE + length:
        return _PREAMBLE + length
    try:
        header = json.loads(prefix[_PREAMBLE : _PREAMBLE + length])
        start, ids, sizes = header["start"], header["ids"], header["sizes"]
    except (ValueError, KeyError, TypeError) as exc:
        raise SegmentFormatError(f"unreadable segment header: {exc}") from None
    if (
        type(start) is not int
        or start < 0
        or not isinstance(ids, list)
        or not isinstance(sizes, list)
        or len(ids) != len(sizes)
        or not ids
        or not all(type(i) is str for i in ids)
        or not all(type(s) is int and s >= 0 for s in sizes)
    ):
        raise SegmentFormatError("segment header has the wrong shape")
    offsets = [_PREAMBLE + length]
    for size in sizes:
        offsets.append(offsets[-1] + size)
    return Header(start=start, ids=tuple(ids), offsets=tuple(offsets))


def decode(body: bytes) -> tuple[Header, list[Record]]:
    """Parse a whole object into its header and records."""
    header = parse_header(body)
    if isinstance(header, int):
        raise SegmentFormatError(f"segment truncated: {len(body)} of at least {header} bytes")
    if len(body) != header.offsets[-1]:
        raise SegmentFormatError(
            f"segment is {len(body)} bytes but its header describes {header.offsets[-1]}"
        )
    return header, header.records(memoryview(body), 0, header.count)
