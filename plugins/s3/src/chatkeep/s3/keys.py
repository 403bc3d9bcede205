"""Object keys: where a session's segments live, and how session ids become key parts.

Layout under the store's prefix (see the README for the full picture)::

    <prefix>/<session>/seg/<start>          one append: claimed with If-None-Match: *
    <prefix>/<session>/cmp/<start>-<end>    a compacted chunk covering [start, end)
    <prefix>/<session>/id                   the full session id, only for very long ids

``<session>`` is the UTF-8 of the session id in lowercase base32hex (RFC 4648, alphabet
``0-9a-v``, no padding). That alphabet holds no ``/``, ``.`` or upper-case letter, so an id
can neither climb out of its folder nor collide with another id on stores that fold case;
it also sorts like the bytes it encodes, so listings come back in session-id order.

Ids longer than :data:`PLAIN_LIMIT` bytes would make keys longer than S3's 1,024 bytes, so
they are written as the encoding of their first :data:`PLAIN_LIMIT` bytes, ``~``, and the
base32hex SHA-256 of the whole id; the ``id`` object then holds the id itself for listings.
Because :data:`PLAIN_LIMIT` is a multiple of five, the truncated encoding is an exact prefix
of the full one, so prefix listings still find long ids.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

__all__ = [
    "PLAIN_LIMIT",
    "POSITION_WIDTH",
    "Layout",
    "ParsedKey",
    "decode_session",
    "encode_prefix",
    "encode_session",
    "is_hashed",
]

#: Longest session id (in UTF-8 bytes) stored verbatim in its key; a multiple of 5.
PLAIN_LIMIT = 250
#: Digits of a zero-padded log position, so keys sort in position order.
POSITION_WIDTH = 16
#: Longest store prefix we accept, keeping every key under S3's 1,024-byte limit.
MAX_PREFIX_BYTES = 480
_HASH_MARK = "~"


def _b32(raw: bytes) -> str:
    return base64.b32hexencode(raw).decode("ascii").rstrip("=").lower()


def _unb32(text: str) -> bytes | None:
    """Decode a canonical lowercase-or-uppercase unpadded base32hex string, else ``None``."""
    padded = text.upper() + "=" * (-len(text) % 8)
    try:
        raw = base64.b32hexdecode(padded)
    except (binascii.Error, ValueError):
        return None
    # Reject non-canonical spellings (stray low bits) so one id has exactly one key.
    return raw if _b32(raw) == text.lower() else None


def encode_session(session_id: str) -> str:
    """The key part for ``session_id`` (see the module docstring)."""
    raw = session_id.encode("utf-8")
    if len(raw) <= PLAIN_LIMIT:
        return _b32(raw)
    return _b32(raw[:PLAIN_LIMIT]) + _HASH_MARK + _b32(hashlib.sha256(raw).digest())


def is_hashed(encoded: str) -> bool:
    """Whether ``encoded`` is the hashed form of a long id (its ``id`` object names it)."""
    return _HASH_MARK in encoded


def decode_session(encoded: str) -> str | None:
    """The session id a plain key part encodes, or ``None`` if it is not one of ours
    (a hashed long id, or a foreign folder)."""
    if is_hashed(encoded) or not encoded:
        return None
    raw = _unb32(encoded)
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def hashed_matches(encoded: str, session_id: str) -> bool:
    """Whether the long id ``session_id`` (read from an ``id`` object) belongs to ``encoded``."""
    return encode_session(session_id) == encoded.lower()


def encode_prefix(prefix: str) -> str:
    """A key prefix shared by the encodings of every session id starting with ``prefix``.

    base32 turns each 5 bytes into 8 characters; a partial group's last character mixes in
    bits of the next byte, so only the characters fully decided by ``prefix`` are kept.
    Callers still filter the decoded ids, since the key prefix may match a few more.
    """
    raw = prefix.encode("utf-8")[:PLAIN_LIMIT]
    return _b32(raw)[: len(raw) * 8 // 5]


@dataclass(frozen=True, slots=True)
class ParsedKey:
    """What a key under a session folder is: a segment, a chunk or the id object."""

    kind: str  # "seg", "cmp" or "id"
    start: int = 0
    end: int = 0


@dataclass(frozen=True, slots=True)
class Layout:
    """Key arithmetic for one store prefix (``""`` or ending in ``/``)."""

    root: str

    @classmethod
    def for_prefix(cls, prefix: str) -> Layout:
        """The layout for a user prefix such as ``"chats"`` or ``"team/a/"``."""
        cleaned = prefix.strip("/")
        if len(cleaned.encode("utf-8")) > MAX_PREFIX_BYTES:
            raise ValueError(
                f"the S3 key prefix is longer than {MAX_PREFIX_BYTES} bytes; "
                "keys would exceed S3's 1,024-byte limit"
            )
        return cls(root=f"{cleaned}/" if cleaned else "")

    def session_dir(self, session_id: str) -> str:
        """The folder (ending in ``/``) that holds everything of ``session_id``."""
        return f"{self.root}{encode_session(session_id)}/"

    @staticmethod
    def segment_key(folder: str, start: int) -> str:
        """The key claimed by the append that starts at log position ``start``."""
        return f"{folder}seg/{start:0{POSITION_WIDTH}d}"

    @staticmethod
    def chunk_key(folder: str, start: int, end: int) -> str:
        """The key of a compacted chunk covering positions ``[start, end)``."""
        return f"{folder}cmp/{start:0{POSITION_WIDTH}d}-{end:0{POSITION_WIDTH}d}"

    @staticmethod
    def id_key(folder: str) -> str:
        """The key of the object holding a long session id."""
        return f"{folder}id"

    @staticmethod
    def parse(folder: str, key: str) -> ParsedKey | None:
        """Classify ``key`` (a key under ``folder``); ``None`` for anything unknown."""
        # Lower-case so stores that fold keys to upper case in listings still parse.
        rest = key[len(folder) :].lower()
        if rest == "id":
            return ParsedKey("id")
        kind, _, numbers = rest.partition("/")
        if kind == "seg" and _digits(numbers, POSITION_WIDTH):
            return ParsedKey("seg", int(numbers))
        if kind == "cmp" and len(numbers) == 2 * POSITION_WIDTH + 1:
            start, dash, end = numbers.partition("-")
            if dash and _digits(start, POSITION_WIDTH) and _digits(end, POSITION_WIDTH):
                parsed = ParsedKey("cmp", int(start), int(end))
                return parsed if parsed.start < parsed.end else None
        return None


def _digits(text: str, width: int) -> bool:
    # str.isdigit alone accepts non-ASCII digits; int() would accept "_" and spaces.
    return len(text) == width and text.isascii() and text.isdigit()
