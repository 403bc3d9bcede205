"""How sessions and records are laid out in Redis keys and list elements.

Every session owns two keys that share one hash tag, so in Redis Cluster both live on the
same slot and one Lua script can update them atomically::

    <namespace>{<encoded session id>}:log   a LIST of records, in append order
    <namespace>{<encoded session id>}:ids   a SET of the record ids already stored

The encoded session id is the id percent-encoded as UTF-8 with every character except
``A-Z a-z 0-9 _ . - ~`` escaped. That encoding is reversible (``list_sessions`` decodes ids
back exactly), injective (two ids never share keys), free of ``{``, ``}``, ``:`` and of the
glob characters ``* ? [ ] \\`` (so an id can neither break the hash tag nor widen a SCAN
pattern) and prefix-preserving (``s.startswith(p)`` exactly when the encoded forms do, so
``list_sessions(prefix)`` filters on the server). Readable ids stay readable in
``redis-cli``.

A list element is one binary string: a format byte (``0x01``), the record id's UTF-8
length as two big-endian bytes, the id, then the record's data verbatim.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from urllib.parse import quote, unquote

from chatkeep.core import CorruptRecord, InvalidRecord, Record

from .errors import InvalidOption

__all__ = [
    "APPEND_SCRIPT",
    "APPEND_SCRIPT_SHA",
    "FORMAT_VERSION",
    "BadElement",
    "Layout",
    "corrupt_record",
    "decode_records",
    "encode_record",
    "lrange_bounds",
    "script_arguments",
]

#: The first byte of every list element; a future format would use another value.
FORMAT_VERSION = 1
_HEADER = bytes([FORMAT_VERSION])
_MAX_ID_BYTES = 0xFFFF

_LOG_SUFFIX = "}:log"
_IDS_SUFFIX = "}:ids"

# Characters that are special in Redis glob patterns (MATCH of SCAN).
_GLOB_SPECIAL = frozenset("*?[]\\")

# Redis keeps LRANGE indices in a signed 64-bit integer; any log is far shorter than this,
# so clamping Python's unbounded ints to it never changes which records a slice selects.
_INDEX_LIMIT = 1 << 62


#: Appends a batch atomically and skips records whose id the session already stored, so a
#: retried batch is a no-op. It reads before it writes because Redis does not roll a script
#: back: the first write (RPUSH) is where an out-of-memory refusal would stop it, before any
#: id is remembered. Elements are pushed in chunks to stay below Lua's unpack() limit.
APPEND_SCRIPT = """\
local fresh_ids, fresh_elements = {}, {}
for i = 2, #ARGV, 2 do
  if redis.call('SISMEMBER', KEYS[2], ARGV[i]) == 0 then
    fresh_ids[#fresh_ids + 1] = ARGV[i]
    fresh_elements[#fresh_elements + 1] = ARGV[i + 1]
  end
end
local count = #fresh_elements
for first = 1, count, 1000 do
  redis.call('RPUSH', KEYS[1], unpack(fresh_elements, first, math.min(first + 999, count)))
end
for first = 1, count, 1000 do
  redis.call('SADD', KEYS[2], unpack(fresh_ids, first, math.min(first + 999, count)))
end
local ttl = tonumber(ARGV[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return count
"""
#: The SHA1 that EVALSHA uses for :data:`APPEND_SCRIPT`.
APPEND_SCRIPT_SHA = hashlib.sha1(APPEND_SCRIPT.encode()).hexdigest().encode()  # noqa: S324 (Redis's own id)


def _escape_glob(text: str) -> str:
    return "".join("\\" + char if char in _GLOB_SPECIAL else char for char in text)


def _encode_session_id(session_id: str) -> str:
    return quote(session_id, safe="", encoding="utf-8", errors="strict")


class Layout:
    """Key names for one namespace (the key prefix that keeps tenants apart).

    ``namespace`` may be empty but must not contain ``{`` or ``}``: the first ``{`` of every
    key has to be the start of the session's hash tag.

    >>> Layout("app:").keys("user 1/chat")
    ('app:{user%201%2Fchat}:log', 'app:{user%201%2Fchat}:ids')
    """

    __slots__ = ("_binary_keys", "_keys", "namespace")

    def __init__(self, namespace: str) -> None:
        if not isinstance(namespace, str):
            raise InvalidOption(f"namespace must be a str, not {type(namespace).__name__}")
        if "{" in namespace or "}" in namespace:
            raise InvalidOption(
                "the Redis namespace must not contain '{' or '}' (they would break the hash "
                f"tag that keeps a session on one cluster slot): {namespace!r}"
            )
        self.namespace = namespace
        # Sessions are used turn after turn: remember their key names.
        self._keys = lru_cache(maxsize=4096)(self._compute_keys)
        self._binary_keys = lru_cache(maxsize=4096)(self._compute_binary_keys)

    def _compute_keys(self, session_id: str) -> tuple[str, str]:
        stem = self.namespace + "{" + _encode_session_id(session_id)
        return stem + _LOG_SUFFIX, stem + _IDS_SUFFIX

    def _compute_binary_keys(self, session_id: str) -> tuple[bytes, bytes]:
        log_key, ids_key = self._keys(session_id)
        return log_key.encode(), ids_key.encode()

    def keys(self, session_id: str) -> tuple[str, str]:
        """The (log, ids) key names of ``session_id``."""
        return self._keys(session_id)

    def binary_keys(self, session_id: str) -> tuple[bytes, bytes]:
        """:meth:`keys` as bytes, ready for the wire (the driver need not encode them)."""
        return self._binary_keys(session_id)

    def scan_pattern(self, prefix: str | None = None) -> str:
        """The SCAN MATCH pattern for the log keys of sessions starting with ``prefix``."""
        encoded = _encode_session_id(prefix) if prefix else ""
        return _escape_glob(self.namespace) + "{" + encoded + "*" + _LOG_SUFFIX

    def session_of(self, log_key: bytes | str) -> str | None:
        """The session id a log key belongs to, or ``None`` if the key is not one of ours.

        A key that matches the pattern but is not in the canonical encoding (written by
        something else into the namespace) is ignored rather than misreported.
        """
        if isinstance(log_key, bytes):
            try:
                log_key = log_key.decode("ascii")
            except UnicodeDecodeError:
                return None
        head = self.namespace + "{"
        if not (log_key.startswith(head) and log_key.endswith(_LOG_SUFFIX)):
            return None
        encoded = log_key[len(head) : -len(_LOG_SUFFIX)]
        if not encoded:
            return None
        try:
            session_id = unquote(encoded, encoding="utf-8", errors="strict")
        except UnicodeDecodeError:
            return None
        if _encode_session_id(session_id) != encoded:
            return None
        return session_id

    def sessions_in(self, keys: list[bytes], prefix: str | None, seen: set[str]) -> list[str]:
        """The session ids of a SCAN page not yet in ``seen`` (which this updates).

        SCAN may report a key more than once; ``seen`` makes each id come out once.
        """
        found = []
        for key in keys:
            session_id = self.session_of(key)
            if session_id is None or session_id in seen:
                continue
            if prefix is not None and not session_id.startswith(prefix):
                continue
            seen.add(session_id)
            found.append(session_id)
        return found


def encode_record(record: Record) -> bytes:
    """The list element that stores ``record`` (see the module docstring)."""
    return script_arguments(b"0", [record])[2]


def script_arguments(ttl_ms: bytes, records: list[Record]) -> list[bytes]:
    """ARGV of :data:`APPEND_SCRIPT`: the TTL, then (id, element) for each record."""
    arguments = [ttl_ms]
    for record_id_text, data in records:
        record_id = record_id_text.encode("utf-8")
        if len(record_id) > _MAX_ID_BYTES:  # the core caps ids at 256 characters anyway
            raise InvalidRecord(f"record id {record_id_text[:40]!r}... is too long to store")
        arguments.append(record_id)
        arguments.append(_HEADER + len(record_id).to_bytes(2, "big") + record_id + data)
    return arguments


class BadElement(Exception):
    """A list element that is not a well-formed record (``offset`` within the batch read)."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(offset, reason)
        self.offset = offset
        self.reason = reason


def decode_records(elements: list[bytes]) -> list[Record]:
    """Decode list elements back into records; :class:`BadElement` names a damaged one."""
    new, record = tuple.__new__, Record  # a NamedTuple's own __new__ is Python-level: skip it
    try:
        # The hot path of every read: one comprehension, no per-element function calls.
        # Elements failing the format byte or the length check drop out of the result,
        # which is how a damaged one is noticed (then found by the slow path below).
        records = [
            new(record, (element[3:end].decode(), element[end:]))
            for element in elements
            if element[0] == FORMAT_VERSION
            and len(element) >= (end := 3 + (element[1] << 8 | element[2]))
        ]
    except (IndexError, TypeError, UnicodeDecodeError):
        records = []
    if len(records) == len(elements):
        return records
    for offset, element in enumerate(elements):
        reason = _problem(element)
        if reason is not None:
            raise BadElement(offset, reason)
    raise AssertionError("unreachable: no damaged element found")  # pragma: no cover


def corrupt_record(
    session_id: str, bad: BadElement, first: int, length: int | None
) -> CorruptRecord:
    """The error for a damaged element found by a read that started at LRANGE index
    ``first``; for a negative ``first``, ``length`` (LLEN) turns it into a log position."""
    position = first + bad.offset
    if first < 0 and length is not None:
        position = max(length + first, 0) + bad.offset
    return CorruptRecord(session_id, position, bad.reason)


def _problem(element: object) -> str | None:
    if not isinstance(element, bytes):
        return f"expected a binary list element, got {type(element).__name__}"
    if len(element) < 3:
        return f"element is {len(element)} bytes long, shorter than the 3-byte header"
    if element[0] != FORMAT_VERSION:
        return f"unknown element format {element[0]} (this version reads {FORMAT_VERSION})"
    size = (element[1] << 8) | element[2]
    if len(element) < 3 + size:
        return f"record id of {size} bytes runs past the end of the element"
    try:
        element[3 : 3 + size].decode("utf-8")
    except UnicodeDecodeError:
        return "record id is not valid UTF-8"
    return None


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
