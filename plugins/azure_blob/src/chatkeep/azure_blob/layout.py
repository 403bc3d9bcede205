"""Blob names: where a store, a namespace and a session live in the container.

A session's blobs live in one virtual folder under the store's *base*::

    {base} = {root}chatkeep-v2/{namespace}/
    {base}{folder}/0000000000      append-blob segment 0 (then 0000000001, ...)
    {base}{folder}/x/{token}       block blob holding one oversized batch

``{root}`` is the store's prefix (``""`` or ending in ``/``). ``chatkeep-v2`` is the
*marker*: a prefix with a component equal to it is refused, so a store at ``acme`` and one
at ``acme/eu`` can never see each other's blobs (``acme/chatkeep-v2/...`` and
``acme/eu/chatkeep-v2/...`` are disjoint: no session folder of the first is the second's
prefix). ``{namespace}`` is ``_`` for the default namespace, else ``n`` and the namespace
written with the folder escape below (``acme/eu`` -> ``nacme~2feu``): one name component
however many ``/`` it has, so ``acme``, ``acme/eu`` and ``acme-eu`` are disjoint too (a
namespace whose escape is longer than 100 characters is ``h`` and its SHA-256 instead).

``folder`` is the session id with every character outside ``[A-Za-z0-9_-]`` written as
``~`` plus the lowercase hex of its UTF-8 bytes (``"a/b"`` -> ``"a~2fb"``). So a folder
never contains ``/``, ``.`` or ``%`` (no path traversal, no URL normalisation surprises),
distinct ids give distinct folders, the id decodes back from the name, and the encoding is
character-wise, so ``encode(prefix)`` is a prefix of ``encode(id)`` and listings can filter
on the server.

Azure caps blob names at 1,024 characters, and a 512-character id can encode to 4,608. An
encoding longer than :data:`MAX_PLAIN` is shortened to its first characters, ``~~`` (never
produced by the plain encoding) and the SHA-256 of the id; the full id is then kept in the
segment's metadata, where listings read it back.

**Layout 1** (``layout=1``, what every release before layout 2 wrote) has no marker and no
namespace: ``{base}`` is ``{root}`` itself, so a session's blobs are ``{root}{folder}/...``.
The names of a session are the same as in layout 2 otherwise. Its weakness: a store at
``acme`` lists the folder of a nested store ``acme/eu`` as a session ``eu``; so a layout-1
delete removes only blobs of the exact shapes a session has (:func:`is_session_blob`),
never the rest of the folder (another store's data, or layout 2's ``chatkeep-v2/`` tree).
"""

from __future__ import annotations

import hashlib
import re

__all__ = [
    "MARKER",
    "MAX_PLAIN",
    "MAX_ROOT",
    "decode_folder",
    "encode_namespace",
    "encode_prefix",
    "encode_session_id",
    "is_hashed",
    "is_session_blob",
    "legacy_folder",
    "normalize_root",
    "pointer_name",
    "segment_name",
    "segment_number",
    "store_base",
]

#: Longest plain folder name; longer encodings are shortened and hashed.
MAX_PLAIN = 480
#: Characters of a hashed folder kept from the plain encoding (a readable, listable prefix).
HASHED_KEEP = 400
#: Longest root prefix accepted, so every name stays within Azure's 1,024 characters.
MAX_ROOT = 256
HASH_MARK = "~~"
#: The name component every store writes under (layout version 2).
MARKER = "chatkeep-v2"
#: Longest escaped namespace kept readable; longer ones are hashed.
MAX_PLAIN_NAMESPACE = 100
#: The layouts a store can read and write (see the module docstring); 2 is the default.
LAYOUTS = (1, 2)

_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_ESCAPE = re.compile(r"~[0-9a-f]{2}")
_HEX = re.compile(r"[0-9a-f]+")
_ROOT_SEGMENT = re.compile(r"^[^\x00-\x1f\x7f\\]+$")
# What follows ``{folder}/`` in a session's own blobs: a segment, or an oversized batch
# (every release names those ``x/`` and 16 random bytes in hex).
_SESSION_BLOB = re.compile(r"[0-9]{10}|x/[0-9a-f]{32}")


def _escape_char(character: str) -> str:
    if character in _SAFE:
        return character
    return "~" + character.encode("utf-8").hex()


def _plain(text: str) -> str:
    return "".join(_escape_char(character) for character in text)


def _cut(encoded: str, limit: int) -> str:
    """``encoded`` cut at the last character boundary at or before ``limit``."""
    if len(encoded) <= limit:
        return encoded
    # An escape is at most 9 characters ("~" and 4 UTF-8 bytes in hex), and "~" only ever
    # starts one, so only the last "~" of the final 9 characters can straddle the cut.
    tilde = encoded.rfind("~", max(0, limit - 8), limit)
    if tilde != -1 and tilde + 1 + 2 * _width(encoded[tilde + 1 : tilde + 3]) > limit:
        return encoded[:tilde]
    return encoded[:limit]


def _width(lead_hex: str) -> int:
    """How many UTF-8 bytes a character whose first byte is ``lead_hex`` takes."""
    lead = int(lead_hex, 16)
    return 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


def encode_session_id(session_id: str) -> str:
    """The folder name of ``session_id`` (never contains ``/`` or ``.``).

    >>> encode_session_id("user/42")
    'user~2f42'
    """
    plain = _plain(session_id)
    if len(plain) <= MAX_PLAIN:
        return plain
    digest = hashlib.sha256(session_id.encode("utf-8")).hexdigest()
    return _cut(plain, HASHED_KEEP) + HASH_MARK + digest


def is_hashed(folder: str) -> bool:
    """Whether ``folder`` is a shortened name whose id lives in the segment metadata."""
    return HASH_MARK in folder


def hashed_matches(folder: str, session_id: str) -> bool:
    """Whether the hashed ``folder`` belongs to ``session_id`` (guards metadata reads)."""
    return encode_session_id(session_id) == folder


def decode_folder(folder: str) -> str | None:
    """The session id a plain folder name encodes, or ``None`` if it is not one of ours
    (or is hashed: read its id from the metadata instead)."""
    if not folder or len(folder) > MAX_PLAIN or is_hashed(folder):
        return None
    out = bytearray()
    index = 0
    length = len(folder)
    while index < length:
        character = folder[index]
        if character in _SAFE:
            out += character.encode("ascii")
            index += 1
            continue
        if _ESCAPE.match(folder, index) is None:
            return None
        end = index + 1 + 2 * _width(folder[index + 1 : index + 3])
        digits = folder[index + 1 : end]
        if end > length or not _HEX.fullmatch(digits):
            return None
        out += bytes.fromhex(digits)
        index = end
    try:
        decoded = out.decode("utf-8")
    except UnicodeDecodeError:
        return None
    # Only the canonical spelling counts, so two names can never decode to one id.
    return decoded if encode_session_id(decoded) == folder else None


def encode_prefix(prefix: str) -> str:
    """The folder-name prefix every session starting with ``prefix`` has (plain or hashed)."""
    return _cut(_plain(prefix), HASHED_KEEP)


def encode_namespace(namespace: str | None) -> str:
    """The name component of a namespace (already checked): ``_`` for the default one.

    >>> encode_namespace("acme/eu")
    'nacme~2feu'
    """
    if namespace is None:
        return "_"
    plain = _plain(namespace)
    if len(plain) <= MAX_PLAIN_NAMESPACE:
        return "n" + plain
    return "h" + hashlib.sha256(namespace.encode("utf-8")).hexdigest()


def store_base(root: str, namespace: str | None, layout: int = 2) -> str:
    """``{root}chatkeep-v2/{namespace}/``: every blob of the store starts with it (layout
    1: ``{root}``, which has no namespaces)."""
    if layout == 1:
        assert namespace is None, "layout 1 has no namespaces"
        return root
    return f"{root}{MARKER}/{encode_namespace(namespace)}/"


def is_session_blob(folder_path: str, name: str) -> bool:
    """Whether ``name`` is one of the blobs the session at ``folder_path`` writes: a
    segment ``{folder_path}/0000000000`` or an oversized batch ``{folder_path}/x/{hex}``."""
    head = folder_path + "/"
    return name.startswith(head) and _SESSION_BLOB.fullmatch(name, len(head)) is not None


def legacy_folder(root: str, item_name: str) -> str | None:
    """The folder of a listing entry directly under ``root`` that may hold a layout-1
    session (``{root}{folder}/``, its folder a session-id encoding, not the marker)."""
    if not item_name.startswith(root) or not item_name.endswith("/"):
        return None
    folder = item_name[len(root) : -1]
    if not folder or folder == MARKER or "/" in folder:
        return None
    return folder if is_hashed(folder) or decode_folder(folder) is not None else None


def normalize_root(prefix: str) -> str:
    """The store's root (``""`` or ending in ``/``) from the path part of its URL.

    Rejects ``.``/``..`` segments, empty segments and control characters, which Azure or an
    HTTP stack could normalise into a different location.
    """
    stripped = prefix.strip("/")
    if not stripped:
        return ""
    segments = stripped.split("/")
    for segment in segments:
        if segment in ("", ".", "..") or not _ROOT_SEGMENT.match(segment):
            raise ValueError(
                "the blob prefix must be '/'-separated names without empty, '.' or '..' "
                "segments, backslashes or control characters"
            )
        if segment == MARKER:
            raise ValueError(
                f"the blob prefix must not have a component {MARKER!r}: that name holds "
                "another store's data"
            )
    root = "/".join(segments) + "/"
    if len(root) > MAX_ROOT:
        raise ValueError(f"the blob prefix is {len(root)} characters; the limit is {MAX_ROOT}")
    return root


def segment_name(folder_path: str, number: int) -> str:
    """The blob name of segment ``number`` in ``folder_path`` (``{root}{folder}``)."""
    return f"{folder_path}/{number:010d}"


def segment_number(blob_name: str) -> int | None:
    """The segment number of a segment blob's name, or ``None`` for other blobs."""
    last = blob_name.rpartition("/")[2]
    return int(last) if len(last) == 10 and last.isdigit() else None


def pointer_name(folder_path: str, token: str) -> str:
    """The blob name of an oversized batch's block blob."""
    return f"{folder_path}/x/{token}"
