"""chatkeep-s3: session logs in Amazon S3 or any S3-compatible object store.

::

    from chatkeep.core import open_store

    store = open_store("s3://my-bucket/chats?region=eu-west-1")

Importing this package does not import boto3; :class:`S3Store` loads it on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .compaction import CompactionResult
    from .config import S3Options
    from .store import S3Store

__all__ = ["CompactionResult", "S3Options", "S3Store"]


def __getattr__(name: str) -> Any:
    # Lazy, so plugin discovery (which imports chatkeep.s3.plugin) stays cheap.
    if name == "S3Store":
        from .store import S3Store

        return S3Store
    if name == "S3Options":
        from .config import S3Options

        return S3Options
    if name == "CompactionResult":
        from .compaction import CompactionResult

        return CompactionResult
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
