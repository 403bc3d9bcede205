"""Tables of contents: which objects hold positions ``[0, end)`` of a session, and their ids.

A table of contents (key ``log/<inverted end>.toc``) lists *pieces*, contiguous from 0: each
is a chunk (records copied together by a roll-over) or a segment left where it is. With each
piece comes a Bloom filter of its record ids, so an append can rule out, in memory, that a
record id is anywhere before ``end``.

Tables of contents are derived data. Segments are never rewritten or removed (each one's key
is the claim that keeps a writer with a stale idea of the end from being told it appended
where no reader looks), so the log stays readable from its segments alone; a table of
contents only saves requests. :func:`plan` decides how a roll-over merges pieces: like a
binary counter, two neighbours merge while the older is no bigger than the newer and the
result stays within the limits, so a session of *n* records has O(log n) small pieces plus
full ones, and each record is copied O(log n) times over its life.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from .recordids import Bloom

__all__ = ["CompactionResult", "Contents", "ContentsError", "Piece", "Policy", "Span", "plan"]

_FORMAT = "chatkeep-s3-contents/2"


class ContentsError(ValueError):
    """The bytes are not a table of contents."""


@dataclass(frozen=True, slots=True)
class Policy:
    """How a session rolls over; fixed by its first table of contents, so every writer
    (whatever its own options) computes the same next one."""

    #: Segments after the table of contents that trigger the next roll-over.
    rollover: int = 16
    #: Largest chunk, in records and in bytes.
    max_records: int = 10_000
    max_bytes: int = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Piece:
    """One object holding positions ``[start, end)``, with a filter of its ids."""

    start: int
    end: int
    #: Bytes of the object.
    size: int
    #: The object's key relative to the session folder (``chunk/...`` or ``log/...seg``).
    key: str
    bloom: Bloom
    #: The object's ETag (so readers fetch exactly the version listed here).
    etag: str = ""

    @property
    def count(self) -> int:
        """How many records the piece holds."""
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class Contents:
    """A table of contents for positions ``[0, end)``."""

    end: int
    policy: Policy
    pieces: tuple[Piece, ...]
    #: The id of the record at ``end - 1`` (what a conditional append compares).
    last_id: str | None = None
    #: Keys (relative to the session folder) this table makes obsolete: the table it was
    #: built from and the chunks it merged. Removed after it is written, and again after
    #: the next one (so a crash before the removal leaves nothing behind for long).
    replaces: tuple[str, ...] = ()

    def encode(self) -> bytes:
        """The object's bytes."""
        return json.dumps(
            {
                "format": _FORMAT,
                "end": self.end,
                "last_id": self.last_id,
                "replaces": list(self.replaces),
                "policy": {
                    "rollover": self.policy.rollover,
                    "max_records": self.policy.max_records,
                    "max_bytes": self.policy.max_bytes,
                },
                "pieces": [
                    {
                        "start": p.start,
                        "end": p.end,
                        "size": p.size,
                        "key": p.key,
                        "etag": p.etag,
                        "bloom": base64.b64encode(p.bloom.bits).decode("ascii"),
                        "k": p.bloom.hashes,
                    }
                    for p in self.pieces
                ],
            },
            separators=(",", ":"),
        ).encode("ascii")

    @classmethod
    def decode(cls, body: bytes) -> Contents:
        """Parse an object's bytes (:class:`ContentsError` if they are not a valid table)."""
        try:
            fields = json.loads(body)
            if fields["format"] != _FORMAT:
                raise ContentsError(f"unknown format {fields['format']!r}")
            raw_policy = fields["policy"]
            policy = Policy(
                int(raw_policy["rollover"]),
                int(raw_policy["max_records"]),
                int(raw_policy["max_bytes"]),
            )
            pieces = tuple(
                Piece(
                    int(item["start"]),
                    int(item["end"]),
                    int(item["size"]),
                    str(item["key"]),
                    Bloom(base64.b64decode(item["bloom"], validate=True), int(item["k"])),
                    str(item.get("etag", "")),
                )
                for item in fields["pieces"]
            )
            end = int(fields["end"])
            last_id = fields["last_id"]
            replaces = tuple(str(key) for key in fields.get("replaces", ()))
            if last_id is not None and (type(last_id) is not str or not last_id):
                raise ContentsError("last_id must be a record id")
        except ContentsError:
            raise
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise ContentsError(f"unreadable table of contents: {exc}") from None
        position = 0
        for piece in pieces:
            if piece.start != position or piece.end <= piece.start:
                raise ContentsError("the pieces do not cover the log contiguously from 0")
            position = piece.end
        if position != end or policy.rollover < 0 or (end > 0) != (last_id is not None):
            raise ContentsError("the pieces do not end where the table of contents does")
        return cls(end, policy, pieces, last_id, replaces)


@dataclass(frozen=True, slots=True)
class Span:
    """A piece as :func:`plan` sees it: an existing object (``key``), or a new chunk made
    of the existing objects in ``parts``."""

    start: int
    end: int
    size: int
    key: str | None = None
    parts: tuple[Span, ...] = field(default=())

    @property
    def count(self) -> int:
        """How many records the span holds."""
        return self.end - self.start

    def leaves(self) -> tuple[Span, ...]:
        """The existing objects whose records this span holds, in order."""
        return (self,) if self.key is not None else self.parts


def plan(previous: Sequence[Span], tail: Sequence[Span], policy: Policy) -> list[Span]:
    """The pieces after appending ``tail`` (existing segments) to ``previous``: binary-counter
    merging within ``policy``'s limits. Spans with ``key=None`` are chunks to write."""
    pieces = list(previous)
    for span in tail:
        pieces.append(span)
        while len(pieces) >= 2:
            older, newer = pieces[-2], pieces[-1]
            if (
                older.count > newer.count
                or older.count + newer.count > policy.max_records
                or older.size + newer.size > policy.max_bytes
            ):
                break
            del pieces[-2:]
            pieces.append(
                Span(
                    older.start,
                    newer.end,
                    older.size + newer.size,
                    None,
                    older.leaves() + newer.leaves(),
                )
            )
    return pieces


@dataclass(frozen=True)
class CompactionResult:
    """What one :meth:`~chatkeep.s3.store.S3Store.compact` call did."""

    #: Chunks written (records copied together).
    chunks_written: int = 0
    #: Records those chunks hold.
    records_compacted: int = 0
    #: Older chunks and tables of contents removed because the new table replaces them.
    chunks_deleted: int = 0
