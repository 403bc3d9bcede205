"""Moved to :mod:`chatkeep.azure_blob.layout` (blob names and the session-id encoding).

This module only re-exports the old public names, so existing imports keep working.
"""

from __future__ import annotations

from .layout import (
    HASH_MARK,
    HASHED_KEEP,
    MAX_PLAIN,
    MAX_ROOT,
    decode_folder,
    encode_prefix,
    encode_session_id,
    hashed_matches,
    is_hashed,
    normalize_root,
    pointer_name,
    segment_name,
    segment_number,
)

__all__ = [
    "HASHED_KEEP",
    "HASH_MARK",
    "MAX_PLAIN",
    "MAX_ROOT",
    "decode_folder",
    "encode_prefix",
    "encode_session_id",
    "hashed_matches",
    "is_hashed",
    "normalize_root",
    "pointer_name",
    "segment_name",
    "segment_number",
]
