"""The key layout of chatkeep-s3 0.1 (format 1), as far as finding and reading it goes.

Format 1 kept each session directly under the prefix: ``<prefix>/<session>/seg/<start>``
(one object per append, a zero-byte *guard* once compacted), ``cmp/<start>-<end>``
(compacted chunks) and ``id`` (a long id), with bodies starting ``CKS1``. Only keys of
exactly those shapes are treated as format 1, so a store nested under such a folder is
never mistaken for one (or deleted with it).
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import TYPE_CHECKING

from chatkeep.core.backend import Record

if TYPE_CHECKING:
    from .bucket import Bucket

__all__ = ["decode", "is_legacy_key", "is_legacy_segment", "legacy_folder", "legacy_keys"]

_PLAIN_LIMIT = 250
_MAGIC = b"CKS1"


def legacy_folder(root: str, session_id: str) -> str:
    """Where format 1 kept ``session_id`` under ``root`` (``"prefix/"`` or ``""``)."""
    raw = session_id.encode("utf-8")
    encoded = _b32(raw[:_PLAIN_LIMIT])
    if len(raw) > _PLAIN_LIMIT:
        encoded += "~" + _b32(hashlib.sha256(raw).digest())
    return f"{root}{encoded}/"


def _b32(raw: bytes) -> str:
    return base64.b32hexencode(raw).decode("ascii").rstrip("=").lower()


def is_legacy_segment(folder: str, key: str) -> bool:
    """Whether ``key`` is a format-1 segment key of ``folder``."""
    rest = key[len(folder) :]
    digits = rest[4:]
    return (
        key.startswith(folder)
        and rest.startswith("seg/")
        and len(digits) == 16
        and digits.isascii()
        and digits.isdigit()
    )


def is_legacy_key(folder: str, key: str) -> bool:
    rest = key[len(folder) :]
    if rest == "id" or is_legacy_segment(folder, key):
        return True
    numbers = rest[4:]
    return (
        rest.startswith("cmp/")
        and len(numbers) == 33
        and numbers[16] == "-"
        and (numbers[:16] + numbers[17:]).isascii()
        and (numbers[:16] + numbers[17:]).isdigit()
    )


def decode(body: bytes) -> tuple[int, list[Record]]:
    """The start position and records of a format-1 object (``ValueError`` if it is not
    one)."""
    if body[:4] != _MAGIC or len(body) < 8:
        raise ValueError("not a format-1 object")
    length = int.from_bytes(body[4:8], "big")
    header = json.loads(body[8 : 8 + length])
    start, ids, sizes = int(header["start"]), header["ids"], header["sizes"]
    records, offset = [], 8 + length
    for record_id, size in zip(ids, sizes, strict=True):
        records.append(Record(str(record_id), body[offset : offset + int(size)]))
        offset += int(size)
    if offset != len(body):
        raise ValueError("format-1 object has the wrong length")
    return start, records


def legacy_keys(bucket: Bucket, root: str, session_id: str) -> list[str]:
    """Every format-1 object of ``session_id`` under ``root`` (nothing a nested store
    wrote)."""
    folder = legacy_folder(root, session_id)
    return [item.key for item in bucket.list_objects(folder) if is_legacy_key(folder, item.key)]
