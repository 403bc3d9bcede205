"""The bytes of one segment or chunk object: a header, then the records' data.

::

    b"CKS2"                      magic and format version
    uint32 big-endian            length of the header
    header (JSON, ASCII)         {"start": 42, "ids": ["m1", "m2"], "sizes": [120, 88], ...}
    data                         the records' bytes, concatenated in order

The header lists every record's size, so a ranged GET of the header tells which byte range
holds any run of records. JSON escapes every non-ASCII character, so record ids (any
``str``) round-trip exactly.

A segment's header also carries what the next writer needs to check record ids without
reading the log (see :mod:`chatkeep.s3.recordids`):

* ``base``: the end of the table of contents the writer knew (its Bloom filters cover the
  record ids before it);
* ``recent``: ``[start, count]`` of every segment from ``base`` up to this one, and
  ``hashes``: a 4-byte hash of each of their record ids, in order (base64).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass

from chatkeep.core.backend import Record

__all__ = [
    "HEADER_PROBE_BYTES",
    "MAGIC",
    "FrameError",
    "Header",
    "Recent",
    "decode",
    "encode",
    "parse_header",
]

MAGIC = b"CKS2"
_PREAMBLE = len(MAGIC) + 4
#: How many leading bytes a ranged read of a header asks for first.
HEADER_PROBE_BYTES = 64 * 1024
#: Bytes of the short hash of a record id kept in ``recent``.
SHORT_HASH = 4


class FrameError(ValueError):
    """The bytes are not a chatkeep object (the store reports ``CorruptRecord``)."""


@dataclass(frozen=True, slots=True)
class Recent:
    """The segments between a writer's table of contents and its own segment."""

    #: ``(start, count)`` of each segment, oldest first.
    segments: tuple[tuple[int, int], ...] = ()
    #: The short hashes of their record ids, concatenated in log order.
    hashes: bytes = b""

    def __post_init__(self) -> None:
        if len(self.hashes) != SHORT_HASH * sum(count for _, count in self.segments):
            raise FrameError("recent hashes do not match the recent segments")

    def since(self, position: int) -> Recent:
        """Only the segments starting at or after ``position``."""
        kept: list[tuple[int, int]] = []
        skipped = 0
        for start, count in self.segments:
            if start >= position:
                kept.append((start, count))
            elif not kept:
                skipped += count
        return Recent(tuple(kept), self.hashes[SHORT_HASH * skipped :])

    def extended(self, start: int, hashes: Sequence[bytes]) -> Recent:
        """These segments followed by one starting at ``start`` with ``hashes``."""
        return Recent((*self.segments, (start, len(hashes))), self.hashes + b"".join(hashes))

    def holders(self, short: bytes) -> list[int]:
        """The starts of the segments holding an id whose short hash is ``short``."""
        found: list[int] = []
        offset = 0
        for start, count in self.segments:
            for index in range(count):
                at = offset + SHORT_HASH * index
                if self.hashes[at : at + SHORT_HASH] == short:
                    found.append(start)
                    break
            offset += SHORT_HASH * count
        return found


@dataclass(frozen=True, slots=True)
class Header:
    """A parsed header: positions, ids and where each record's bytes are."""

    start: int
    ids: tuple[str, ...]
    #: ``offsets[i]`` is where record ``i``'s data starts in the object; the last entry is
    #: the end of the data, so ``len(offsets) == count + 1``.
    offsets: tuple[int, ...]
    #: Segments only: the table of contents its writer knew, and the segments since.
    base: int | None = None
    recent: Recent = Recent()

    @property
    def count(self) -> int:
        """How many records the object holds."""
        return len(self.ids)

    @property
    def end(self) -> int:
        """The log position just after the object's last record."""
        return self.start + len(self.ids)

    @property
    def size(self) -> int:
        """The object's length in bytes."""
        return self.offsets[-1]

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


def encode(
    start: int, records: Sequence[Record], *, base: int | None = None, recent: Recent = Recent()
) -> bytes:
    """The body of an object holding ``records`` at log positions ``start, start+1, ...``;
    ``base`` and ``recent`` only for segments."""
    fields: dict[str, object] = {
        "start": start,
        "ids": [record.id for record in records],
        "sizes": [len(record.data) for record in records],
    }
    if base is not None:
        fields["base"] = base
        fields["recent"] = [list(item) for item in recent.segments]
        fields["hashes"] = base64.b64encode(recent.hashes).decode("ascii")
    header = json.dumps(fields, separators=(",", ":")).encode("ascii")
    return b"".join([MAGIC, len(header).to_bytes(4, "big"), header, *(r.data for r in records)])


def parse_header(prefix: bytes) -> Header | int:
    """Parse the header at the start of an object.

    Returns the :class:`Header`, or the number of leading bytes needed when ``prefix`` is too
    short to hold it. Raises :class:`FrameError` for anything that is not one of ours.
    """
    if len(prefix) < _PREAMBLE:
        if not MAGIC.startswith(prefix[: len(MAGIC)]):
            raise FrameError("not a chatkeep object (bad magic)")
        return _PREAMBLE
    if prefix[: len(MAGIC)] != MAGIC:
        raise FrameError("not a chatkeep object (bad magic)")
    length = int.from_bytes(prefix[len(MAGIC) : _PREAMBLE], "big")
    if len(prefix) < _PREAMBLE + length:
        return _PREAMBLE + length
    try:
        fields = json.loads(prefix[_PREAMBLE : _PREAMBLE + length])
        start, ids, sizes = fields["start"], fields["ids"], fields["sizes"]
    except (ValueError, KeyError, TypeError) as exc:
        raise FrameError(f"unreadable header: {exc}") from None
    if (
        type(start) is not int
        or start < 0
        or not isinstance(ids, list)
        or not isinstance(sizes, list)
        or len(ids) != len(sizes)
        or not ids
        or not all(type(i) is str and i for i in ids)
        or not all(type(s) is int and s >= 0 for s in sizes)
    ):
        raise FrameError("header has the wrong shape")
    base, recent = _recent(fields)
    offsets = [_PREAMBLE + length]
    for size in sizes:
        offsets.append(offsets[-1] + size)
    return Header(start, tuple(ids), tuple(offsets), base, recent)


def _recent(fields: dict[str, object]) -> tuple[int | None, Recent]:
    base = fields.get("base")
    if base is None:
        return None, Recent()
    segments, hashes = fields.get("recent"), fields.get("hashes")
    if type(base) is not int or base < 0 or not isinstance(segments, list):
        raise FrameError("header has the wrong shape")
    pairs = []
    for item in segments:
        if (
            not isinstance(item, list)
            or len(item) != 2
            or not all(type(n) is int and n >= 0 for n in item)
        ):
            raise FrameError("header has the wrong shape")
        pairs.append((item[0], item[1]))
    try:
        raw = base64.b64decode(str(hashes), validate=True)
    except (binascii.Error, ValueError):
        raise FrameError("header has unreadable hashes") from None
    return base, Recent(tuple(pairs), raw)


def decode(body: bytes) -> tuple[Header, list[Record]]:
    """Parse a whole object into its header and records."""
    header = parse_header(body)
    if isinstance(header, int):
        raise FrameError(f"truncated: {len(body)} of at least {header} bytes")
    if len(body) != header.size:
        raise FrameError(f"{len(body)} bytes where the header describes {header.size}")
    return header, header.records(memoryview(body), 0, header.count)
