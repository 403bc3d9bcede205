"""chatkeep-s3: session logs in Amazon S3 or any S3-compatible object store.

::

    from chatkeep.core import open_store

    store = open_store("s3://my-bucket/chats?region=eu-west-1")

Importing this package does not import boto3; :class:`S3Store` loads it on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import S3Options
    from .contents import CompactionResult
    from .errors import LegacyLayout
    from .store import S3Store

__all__ = ["CompactionResult", "LegacyLayout", "S3Options", "S3Store"]

_WHERE = {
    "CompactionResult": ".contents",
    "LegacyLayout": ".errors",
    "S3Options": ".config",
    "S3Store": ".store",
}


def __getattr__(name: str) -> Any:
    # Lazy, so plugin discovery (which imports chatkeep.s3.plugin) never imports boto3.
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module, __name__), name)
