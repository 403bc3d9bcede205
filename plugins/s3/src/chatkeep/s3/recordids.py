"""Finding out whether a record id is already in a session, without reading the session.

The contract (per-record idempotency) asks every append to skip ids already stored with the
same data and to refuse ids stored with other data, however long ago, at a cost in proportion
to the batch. Two summaries make that possible on S3:

* the newest segment's header lists a 4-byte hash of every record id appended since the
  table of contents its writer knew (:class:`~chatkeep.s3.frames.Recent`), and
* the table of contents holds a Bloom filter of each piece's ids (:class:`Bloom`).

Both only ever answer "certainly not here" or "perhaps here"; a "perhaps" is settled by
reading the object named, so a false positive costs one GET and never a wrong answer.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass

from .frames import SHORT_HASH

__all__ = ["Bloom", "id_hashes", "short_hash"]

#: Bits per id in a Bloom filter: about a 1% false-positive rate with 7 hash functions.
BITS_PER_ID = 10
HASHES = 7


def _digest(record_id: str) -> bytes:
    raw = record_id.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(raw, digest_size=16, person=b"chatkeep-s3-id").digest()


def short_hash(record_id: str) -> bytes:
    """The 4-byte hash of ``record_id`` kept in a segment's ``recent`` list."""
    return _digest(record_id)[:SHORT_HASH]


def id_hashes(record_id: str) -> tuple[int, int]:
    """Two independent 64-bit hashes of ``record_id`` (double hashing for Bloom filters)."""
    digest = _digest(record_id)
    return int.from_bytes(digest[:8], "big"), int.from_bytes(digest[8:], "big") | 1


@dataclass(frozen=True, slots=True)
class Bloom:
    """A Bloom filter over the record ids of one piece of the log."""

    bits: bytes
    hashes: int = HASHES

    @classmethod
    def of(cls, record_ids: Iterable[str]) -> Bloom:
        """The filter of ``record_ids``."""
        pairs = [id_hashes(record_id) for record_id in record_ids]
        size = max(64, math.ceil(len(pairs) * BITS_PER_ID / 8) * 8)
        field = bytearray(size // 8)
        for first, second in pairs:
            for n in range(HASHES):
                bit = (first + n * second) % size
                field[bit >> 3] |= 1 << (bit & 7)
        return cls(bytes(field), HASHES)

    def might_hold(self, hashes: tuple[int, int]) -> bool:
        """``False`` if the id with these :func:`id_hashes` is certainly not in the piece."""
        size = len(self.bits) * 8
        if size == 0:
            return False
        first, second = hashes
        for n in range(self.hashes):
            bit = (first + n * second) % size
            if not self.bits[bit >> 3] & (1 << (bit & 7)):
                return False
        return True
