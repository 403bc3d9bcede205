"""Object keys: where a store, a namespace and a session live in the bucket.

Layout (format version 2; see the README for the picture)::

    <prefix>/chatkeep-v2/<namespace>/<session>/log/<inverted start>.seg   one per append
    <prefix>/chatkeep-v2/<namespace>/<session>/log/<inverted end>.toc     a table of contents
    <prefix>/chatkeep-v2/<namespace>/<session>/chunk/<start>-<end>        records [start, end)
    <prefix>/chatkeep-v2/<namespace>/<session>/id                         a long id, in full

``<inverted n>`` is ``9999999999999999 - n`` in 16 digits, so a listing, which S3 returns
in ascending key order, shows the newest segment first: a session's end, and its newest
table of contents, are in the first page however long it is. At one position a segment
(``.seg``) sorts before a table of contents (``.toc``) that ends there.

``chatkeep-v2`` is the *marker*: everything a store writes is under it, and a prefix with
a component equal to it is refused, so a store at ``acme`` and one at ``acme/eu`` can never
see each other's keys (``acme/chatkeep-v2/...`` and ``acme/eu/chatkeep-v2/...`` are
disjoint). ``<namespace>`` is ``_`` for the default namespace, else ``n`` and the base32hex
of the namespace: one key component however many ``/`` the namespace has, so ``acme`` and
``acme/eu`` are disjoint too.

``<session>`` is the UTF-8 of the session id in lowercase base32hex (RFC 4648, alphabet
``0-9a-v``, no padding): no ``/``, ``.`` or upper-case letter, so an id can neither climb
out of its folder nor collide with another on a store that folds case, and it sorts like the
id's bytes. Ids longer than :data:`PLAIN_LIMIT` bytes are written as the encoding of their
first :data:`PLAIN_LIMIT` bytes, ``~`` and the base32hex SHA-256 of the whole id; the ``id``
object then holds the id for listings. :data:`PLAIN_LIMIT` is a multiple of five, so the
truncated encoding is an exact prefix of the full one and prefix listings still find them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from chatkeep.core.backend import InvalidOption

__all__ = [
    "MARKER",
    "MAX_PREFIX_BYTES",
    "PLAIN_LIMIT",
    "Layout",
    "ParsedKey",
    "decode_session",
    "encode_namespace",
    "encode_prefix",
    "encode_session",
    "hashed_matches",
    "is_hashed",
]

#: The key component every store writes under (format version 2).
MARKER = "chatkeep-v2"
#: Longest session id (in UTF-8 bytes) kept whole in its key; a multiple of 5.
PLAIN_LIMIT = 140
#: Digits of a log position.
POSITION_WIDTH = 16
_TOP = 10**POSITION_WIDTH - 1
_HASH_MARK = "~"
_SEGMENT = ".seg"
_CONTENTS = ".toc"
# The longest key below the prefix: marker, namespace (n + 205 characters), a hashed
# session folder, and a chunk key.
_LONGEST_NAMESPACE = 1 + -(-128 * 8 // 5)
_LONGEST_FOLDER = PLAIN_LIMIT * 8 // 5 + 1 + 52
_LONGEST_TAIL = len("chunk/") + 2 * POSITION_WIDTH + 1
_ROOM = 1024 - (1 + len(MARKER) + 1 + _LONGEST_NAMESPACE + 1 + _LONGEST_FOLDER + 1 + _LONGEST_TAIL)
#: Longest store prefix accepted (every key then stays within S3's 1,024 bytes).
MAX_PREFIX_BYTES = min(480, _ROOM)


def _b32(raw: bytes) -> str:
    return base64.b32hexencode(raw).decode("ascii").rstrip("=").lower()


def _unb32(text: str) -> bytes | None:
    """Decode a canonical unpadded base32hex string (either case), else ``None``."""
    padded = text.upper() + "=" * (-len(text) % 8)
    try:
        raw = base64.b32hexdecode(padded)
    except (binascii.Error, ValueError):
        return None
    # Reject non-canonical spellings (stray low bits) so one id has exactly one key.
    return raw if _b32(raw) == text.lower() else None


def encode_session(session_id: str) -> str:
    """The key component for ``session_id`` (see the module docstring)."""
    raw = session_id.encode("utf-8")
    if len(raw) <= PLAIN_LIMIT:
        return _b32(raw)
    return _b32(raw[:PLAIN_LIMIT]) + _HASH_MARK + _b32(hashlib.sha256(raw).digest())


def is_hashed(encoded: str) -> bool:
    """Whether ``encoded`` is the hashed form of a long id (its ``id`` object names it)."""
    return _HASH_MARK in encoded


def decode_session(encoded: str) -> str | None:
    """The session id a plain key component encodes, or ``None`` if it is not one of ours
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

    base32 turns 5 bytes into 8 characters; a partial group's last character mixes in bits
    of the next byte, so only the characters ``prefix`` fully decides are kept. Callers
    still filter the decoded ids, since the key prefix may match a few more.
    """
    raw = prefix.encode("utf-8")[:PLAIN_LIMIT]
    return _b32(raw)[: len(raw) * 8 // 5]


def encode_namespace(namespace: str | None) -> str:
    """The key component of a namespace (already checked): ``_`` for the default one."""
    return "_" if namespace is None else "n" + _b32(namespace.encode("ascii"))


def check_prefix(prefix: str) -> str:
    """The prefix without its outer ``/``, or :class:`InvalidOption` if it cannot be used."""
    cleaned = prefix.strip("/")
    try:
        size = len(cleaned.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidOption("the S3 key prefix is not valid Unicode text") from None
    if size > MAX_PREFIX_BYTES:
        raise InvalidOption(
            f"the S3 key prefix is {size} bytes long; at most {MAX_PREFIX_BYTES} fit in "
            "S3's 1,024-byte keys"
        )
    if "\x00" in cleaned:
        raise InvalidOption("the S3 key prefix must not contain NUL")
    if MARKER in cleaned.split("/"):
        raise InvalidOption(
            f"the S3 key prefix must not have a component {MARKER!r}: that name holds "
            "another store's data"
        )
    return cleaned


@dataclass(frozen=True, slots=True)
class ParsedKey:
    """What a key under a session folder is."""

    kind: str  # "seg" (start = its first position), "toc" (end = its end), "chunk", "id"
    start: int = 0
    end: int = 0


@dataclass(frozen=True, slots=True)
class Layout:
    """Key arithmetic for one store: its prefix and namespace."""

    #: ``<prefix>/chatkeep-v2/<namespace>/``: every key of this store starts with it.
    base: str
    #: ``<prefix>/`` (or ``""``): where the format-1 layout kept sessions.
    root: str

    @classmethod
    def create(cls, prefix: str, namespace: str | None) -> Layout:
        """The layout for a user prefix (``"chats"``, ``"team/a/"``) and namespace."""
        cleaned = check_prefix(prefix)
        root = f"{cleaned}/" if cleaned else ""
        return cls(base=f"{root}{MARKER}/{encode_namespace(namespace)}/", root=root)

    def folder(self, session_id: str) -> str:
        """The folder (ending in ``/``) that holds everything of ``session_id``."""
        return f"{self.base}{encode_session(session_id)}/"

    @staticmethod
    def log_prefix(folder: str) -> str:
        """Where a session's segments and tables of contents are listed, newest first."""
        return f"{folder}log/"

    @staticmethod
    def segment_key(folder: str, start: int) -> str:
        """The key claimed by the append that starts at log position ``start``."""
        return f"{folder}log/{_TOP - start:0{POSITION_WIDTH}d}{_SEGMENT}"

    @staticmethod
    def contents_key(folder: str, end: int) -> str:
        """The key of the table of contents of positions ``[0, end)``."""
        return f"{folder}log/{_TOP - end:0{POSITION_WIDTH}d}{_CONTENTS}"

    @staticmethod
    def chunk_key(folder: str, start: int, end: int) -> str:
        """The key of a chunk holding positions ``[start, end)``."""
        return f"{folder}chunk/{start:0{POSITION_WIDTH}d}-{end:0{POSITION_WIDTH}d}"

    @staticmethod
    def below(folder: str, position: int) -> str:
        """A ``StartAfter`` that lists the log from the segment starting at ``position``
        (if any) downwards."""
        return f"{folder}log/{_TOP - position - 1:0{POSITION_WIDTH}d}{_CONTENTS}"

    @staticmethod
    def id_key(folder: str) -> str:
        """The key of the object holding a long session id."""
        return f"{folder}id"

    @staticmethod
    def parse(folder: str, key: str) -> ParsedKey | None:
        """Classify ``key`` (a key under ``folder``); ``None`` for anything unknown."""
        # Lower-case, so stores that fold keys to upper case in listings still parse.
        rest = key[len(folder) :].lower()
        if rest == "id":
            return ParsedKey("id")
        kind, _, name = rest.partition("/")
        if kind == "log" and len(name) == POSITION_WIDTH + 4:
            digits, suffix = name[:POSITION_WIDTH], name[POSITION_WIDTH:]
            if _digits(digits):
                position = _TOP - int(digits)
                if suffix == _SEGMENT:
                    return ParsedKey("seg", start=position)
                if suffix == _CONTENTS:
                    return ParsedKey("toc", end=position)
        if kind == "chunk" and len(name) == 2 * POSITION_WIDTH + 1:
            start, dash, end = name.partition("-")
            if dash and _digits(start) and _digits(end) and int(start) < int(end):
                return ParsedKey("chunk", start=int(start), end=int(end))
        return None


def _digits(text: str) -> bool:
    # str.isdigit alone accepts non-ASCII digits; int() would accept "_" and spaces.
    return len(text) == POSITION_WIDTH and text.isascii() and text.isdigit()
