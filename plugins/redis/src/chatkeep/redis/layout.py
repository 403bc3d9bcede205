"""How sessions and records are laid out in Redis keys and list elements.

Every session owns three keys that share one hash tag, so in Redis Cluster they live on the
same slot and one Lua script updates them atomically::

    <prefix>{<encoded session id>}:log   LIST  the records, in append order
    <prefix>{<encoded session id>}:rid   HASH  record id -> digest of its data
    <prefix>{<encoded session id>}:ids   SET   record ids written by chatkeep-redis 0.1 (read only)

``<prefix>`` is the store's ``key_prefix`` (``chatkeep:``) followed by its ``namespace``, if
any. Neither contains ``{``, so the first ``{`` of a key always opens the session's hash tag
and tenants never share a key: ``chatkeep:acme{`` and ``chatkeep:acme/eu{`` differ.

The sessions of a namespace are indexed in a sorted set of encoded ids (all scored 0, so
ordered by their bytes), written by the same script as the append that creates a session::

    <prefix>{}:sessions                  single server: one index
    <prefix>{<tag of slot s>}:sessions   Redis Cluster: one index per slot, beside its sessions

The encoded session id is the id percent-encoded as UTF-8 with every character except
``A-Z a-z 0-9 _ . - ~`` escaped: reversible, injective, free of ``{``, ``}``, ``:`` and glob
characters, ASCII, and prefix-preserving (``s.startswith(p)`` exactly when the encoded forms
do), so a prefix is a range of the index.

A list element is one binary string. Format 2 (written since chatkeep-redis 0.2)::

    0x02 | position: 8 bytes | data length: 4 bytes | id length: 2 bytes | id | data

(big-endian). The position is the element's index in the list, written by the append
script, so a read notices a record that vanished (a gap) and the length notices a truncated
one. Format 1 (0.1) is ``0x01 | id length: 2 bytes | id | data`` and is still read.
"""

from __future__ import annotations

import binascii
import hashlib
import struct
from functools import lru_cache
from urllib.parse import quote, unquote

from chatkeep.core.backend import CorruptRecord, Record
from chatkeep.core.errors import InvalidRecord

__all__ = [
    "SLOTS",
    "BadElement",
    "Layout",
    "corrupt_record",
    "decode_records",
    "digest",
    "element_body",
    "encode_session_id",
    "lrange_bounds",
]

#: Hash slots of a Redis Cluster.
SLOTS = 16384
_V1 = 1
_V2 = 2
_V2_HEADER = struct.Struct(">BQIH")  # format, position, data length, id length
_MAX_ID_BYTES = 0xFFFF
_LENGTHS = struct.Struct(">IH")

_LOG_SUFFIX = "}:log"
_GLOB_SPECIAL = frozenset("*?[]\\")

# Redis keeps LRANGE indices in a signed 64-bit integer; any log is far shorter than this,
# so clamping Python's unbounded ints to it never changes which records a slice selects.
_INDEX_LIMIT = 1 << 62


def _escape_glob(text: str) -> str:
    return "".join("\\" + char if char in _GLOB_SPECIAL else char for char in text)


def encode_session_id(session_id: str) -> str:
    """The session id as it appears in keys and in the index (see the module docstring)."""
    return quote(session_id, safe="", encoding="utf-8", errors="strict")


def slot_of(tag: str) -> int:
    """The cluster slot of a key whose hash tag is ``tag`` (Redis's CRC16 mod 16384)."""
    return binascii.crc_hqx(tag.encode(), 0) % SLOTS


@lru_cache(maxsize=1)
def slot_tags() -> tuple[str, ...]:
    """For each slot, a short hash tag that Redis places on that slot (``ix:<hex>``).

    Computed once per process, on first use in cluster mode (about 170k CRC16s).
    """
    tags: list[str | None] = [None] * SLOTS
    missing = SLOTS
    number = 0
    while missing:
        tag = f"ix:{number:x}"
        slot = slot_of(tag)
        if tags[slot] is None:
            tags[slot] = tag
            missing -= 1
        number += 1
    return tuple(tag for tag in tags if tag is not None)


class Layout:
    """Key names for one store: ``key_prefix`` plus an optional ``namespace``.

    >>> Layout("app:", None).keys("user 1/chat")[0]
    'app:{user%201%2Fchat}:log'
    >>> Layout("app:", "acme/eu").keys("s")[0]
    'app:acme/eu{s}:log'
    """

    __slots__ = ("_binary_keys", "cluster", "key_prefix", "prefix")

    def __init__(self, key_prefix: str, namespace: str | None, *, cluster: bool = False) -> None:
        self.key_prefix = key_prefix
        self.prefix = key_prefix + (namespace or "")
        self.cluster = cluster
        # Sessions are used turn after turn: remember their key names.
        self._binary_keys = lru_cache(maxsize=4096)(self._compute_binary_keys)

    def keys(self, session_id: str) -> tuple[str, str, str]:
        """The (log, digests, legacy ids) key names of ``session_id``."""
        stem = self.prefix + "{" + encode_session_id(session_id)
        return stem + _LOG_SUFFIX, stem + "}:rid", stem + "}:ids"

    def _compute_binary_keys(self, session_id: str) -> tuple[bytes, bytes, bytes, bytes, bytes]:
        log_key, digests_key, ids_key = self.keys(session_id)
        member = encode_session_id(session_id)
        return (
            log_key.encode(),
            digests_key.encode(),
            ids_key.encode(),
            self.index_key_for(member),
            member.encode(),
        )

    def binary_keys(self, session_id: str) -> tuple[bytes, bytes, bytes, bytes, bytes]:
        """(log, digests, legacy ids, index) keys and the index member of ``session_id``,
        as bytes ready for the wire."""
        return self._binary_keys(session_id)

    def index_key_for(self, member: str) -> bytes:
        """The index key holding the session whose encoded id is ``member``."""
        if not self.cluster:
            return (self.prefix + "{}:sessions").encode()
        return (self.prefix + "{" + slot_tags()[slot_of(member)] + "}:sessions").encode()

    def recent_key(self) -> bytes | None:
        """The namespace's last-append index (``<prefix>{}:recent``, a sorted set of encoded
        ids scored by the time of each one's last append that stored a record), or ``None``
        on a cluster, which keeps none (one set cannot share a slot with every session)."""
        return None if self.cluster else (self.prefix + "{}:recent").encode()

    def recent_marker(self) -> bytes:
        """A key that exists once the sessions appended to before ``{}:recent`` existed
        were put into it (single server only)."""
        return (self.prefix + "{}:recent-indexed").encode()

    def index_keys(self) -> list[bytes]:
        """Every index key of the namespace (one, or one per cluster slot in slot order)."""
        if not self.cluster:
            return [(self.prefix + "{}:sessions").encode()]
        return [(self.prefix + "{" + tag + "}:sessions").encode() for tag in slot_tags()]

    def indexed_marker(self) -> bytes:
        """A key that exists once the namespace's 0.1-era sessions were added to the index."""
        tag = slot_tags()[0] if self.cluster else ""
        return (self.prefix + "{" + tag + "}:indexed").encode()

    def every_namespace_marker(self) -> bytes:
        """A key that exists once the 0.1-era sessions of *every* namespace under the key
        prefix were added to their indexes (one SCAN for them all, so a namespace's first
        listing need not SCAN again). No namespace holds a key named ``{}:...`` of its
        own but the default one, whose markers are named otherwise."""
        return (self.key_prefix + "{}:indexed-every-namespace").encode()

    def every_namespace_scan_pattern(self) -> str:
        """The SCAN MATCH pattern of every log key under the key prefix, in any namespace."""
        return _escape_glob(self.key_prefix) + "*{*" + _LOG_SUFFIX

    def namespace_of(self, log_key: bytes) -> str | None:
        """The namespace part of a log key under the key prefix (``""``: the default one),
        or ``None`` if the key is not under it (namespaces never contain ``{``)."""
        head = self.key_prefix.encode()
        if not log_key.startswith(head) or b"{" not in log_key[len(head) :]:
            return None
        try:
            return log_key[len(head) :].split(b"{", 1)[0].decode("utf-8")
        except UnicodeDecodeError:
            return None

    def key_stem(self) -> bytes:
        """What every session key of this store starts with (before the encoded id)."""
        return (self.prefix + "{").encode()

    def scan_pattern(self) -> str:
        """The SCAN MATCH pattern of every log key of this namespace (for the backfill)."""
        return _escape_glob(self.prefix) + "{*" + _LOG_SUFFIX

    def session_of(self, log_key: bytes | str) -> str | None:
        """The session id a log key belongs to, or ``None`` if the key is not one of ours.

        A key that matches the pattern but is not in the canonical encoding (written by
        something else into the namespace) is ignored rather than misreported.
        """
        if isinstance(log_key, bytes):
            try:
                log_key = log_key.decode("utf-8")
            except UnicodeDecodeError:
                return None
        head = self.prefix + "{"
        if not (log_key.startswith(head) and log_key.endswith(_LOG_SUFFIX)):
            return None
        encoded = log_key[len(head) : -len(_LOG_SUFFIX)]
        return decode_member(encoded)


def decode_member(encoded: str | bytes) -> str | None:
    """The session id an index member (an encoded id) stands for; ``None`` if malformed."""
    if isinstance(encoded, bytes):
        try:
            encoded = encoded.decode("ascii")
        except UnicodeDecodeError:
            return None
    if not encoded:
        return None
    try:
        session_id = unquote(encoded, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        return None
    if encode_session_id(session_id) != encoded:
        return None
    return session_id


def prefix_range(prefix: str | None) -> tuple[bytes, bytes]:
    """ZRANGEBYLEX bounds selecting the encoded ids that start with ``prefix``'s encoding.

    Members are ASCII, so every one starting with ``p`` sorts below ``p + 0xFF``.
    """
    if not prefix:
        return b"-", b"+"
    encoded = encode_session_id(prefix).encode()
    return b"[" + encoded, b"[" + encoded + b"\xff"


def digest(data: bytes) -> bytes:
    """What the digests hash remembers of a record's data (128-bit BLAKE2b)."""
    return hashlib.blake2b(data, digest_size=16).digest()


def element_body(record: Record) -> bytes:
    """A format-2 element without its 9-byte head (format byte and position), which the
    append script prepends once it knows the position."""
    record_id = record.id.encode("utf-8")
    if len(record_id) > _MAX_ID_BYTES:  # the core caps ids at 256 characters anyway
        raise InvalidRecord(f"record id {record.id[:40]!r}... is too long to store")
    return _LENGTHS.pack(len(record.data), len(record_id)) + record_id + record.data


class BadElement(Exception):
    """A list element that is not a well-formed record, or a gap in the positions.

    ``offset`` is its index within the batch read; ``position`` its log position when the
    elements around it tell it.
    """

    def __init__(self, offset: int, reason: str, position: int | None = None) -> None:
        super().__init__(offset, reason)
        self.offset = offset
        self.reason = reason
        self.position = position


def decode_records(elements: list[bytes], first: int) -> list[Record]:
    """Decode the elements LRANGE returned from index ``first`` (negative: from the end).

    Raises :class:`BadElement` for a damaged element, and for positions that do not run on
    (a record vanished from the middle of the log, or the log was rewritten under us).
    """
    new, record = tuple.__new__, Record  # a NamedTuple's own __new__ is Python-level: skip it
    unpack = _V2_HEADER.unpack_from
    records: list[Record] = []
    append = records.append
    expected = first if first >= 0 else None
    try:
        for offset, element in enumerate(elements):
            kind = element[0]
            if kind == _V2:
                _, position, size, id_size = unpack(element)
                end = 15 + id_size
                if len(element) != end + size:
                    raise BadElement(
                        offset,
                        f"record is {len(element) - end} bytes long, its header says {size}",
                        position,
                    )
                if expected is not None and position != expected:
                    raise BadElement(offset, _gap(expected, position), expected)
                expected = position + 1
                append(new(record, (element[15:end].decode(), element[end:])))
            elif kind == _V1 and len(element) >= (end := 3 + (element[1] << 8 | element[2])):
                append(new(record, (element[3:end].decode(), element[end:])))
                if expected is not None:
                    expected += 1
            else:
                raise BadElement(offset, _problem(element) or "damaged element")
    except BadElement:
        raise
    except (IndexError, TypeError, UnicodeDecodeError, struct.error):
        for offset, element in enumerate(elements):
            reason = _problem(element)
            if reason is not None:
                raise BadElement(offset, reason) from None
        raise
    return records


def _gap(expected: int, found: int) -> str:
    if found > expected:
        count = found - expected
        return f"{count} record(s) missing from the log before this one (it is at {found})"
    return f"the log was rewritten: the record read at position {expected} says {found}"


def corrupt_record(
    session_id: str, bad: BadElement, first: int, length: int | None
) -> CorruptRecord:
    """The error for a damaged element found by a read that started at LRANGE index
    ``first``; for a negative ``first``, ``length`` (LLEN) turns it into a log position."""
    if bad.position is not None:
        position = bad.position
    else:
        position = first + bad.offset
        if first < 0 and length is not None:
            position = max(length + first, 0) + bad.offset
    return CorruptRecord(session_id, position, bad.reason)


def _problem(element: object) -> str | None:
    if not isinstance(element, bytes):
        return f"expected a binary list element, got {type(element).__name__}"
    if not element:
        return "element is empty"
    kind = element[0]
    if kind == _V2:
        if len(element) < _V2_HEADER.size:
            return f"element is {len(element)} bytes long, shorter than its header"
        _, _, size, id_size = _V2_HEADER.unpack_from(element)
        if len(element) != 15 + id_size + size:
            return f"record is {len(element) - 15 - id_size} bytes long, its header says {size}"
        try:
            element[15 : 15 + id_size].decode("utf-8")
        except UnicodeDecodeError:
            return "record id is not valid UTF-8"
        return None
    if kind == _V1:
        if len(element) < 3:
            return f"element is {len(element)} bytes long, shorter than the 3-byte header"
        size = (element[1] << 8) | element[2]
        if len(element) < 3 + size:
            return f"record id of {size} bytes runs past the end of the element"
        try:
            element[3 : 3 + size].decode("utf-8")
        except UnicodeDecodeError:
            return "record id is not valid UTF-8"
        return None
    return f"unknown element format {kind} (this version reads 1 and 2)"


def lrange_bounds(start: int, stop: int | None) -> tuple[int, int] | None:
    """Map the Python slice ``log[start:stop]`` to inclusive LRANGE bounds.

    Returns ``None`` when the slice is empty whatever the log's length, so no round trip is
    needed. Negative bounds pass through as LRANGE's own from-the-end indices, which is what
    keeps tail reads O(k): Redis walks from the nearer end of the list.

    >>> lrange_bounds(-20, None)
    (-20, -1)
    >>> lrange_bounds(0, 10)
    (0, 9)
    >>> lrange_bounds(-5, 0) is None
    True
    """
    start = max(-_INDEX_LIMIT, min(start, _INDEX_LIMIT))
    if stop is None:
        return start, -1
    stop = max(-_INDEX_LIMIT, min(stop, _INDEX_LIMIT))
    if stop == 0:
        return None
    # Same sign: the slice is empty for every length when stop <= start.
    if (start >= 0) == (stop > 0) and stop <= start:
        return None
    # Mixed signs (start < 0 < stop, or start >= 0 > stop): LRANGE clamps and empties the
    # range exactly as Python does once both are resolved against the length, because
    # stop - 1 stays on the same side of zero as stop.
    return start, stop - 1
