"""chatkeep-encrypted: encryption at rest, as a wrapper backend over any chatkeep store.

::

    # CHATKEEP_ENCRYPTION_KEYS="k2:<32 bytes, URL-safe base64>,k1:<older key>"
    from chatkeep.core import open_store

    store = open_store("encrypted+sqlite:///chats.db")

Importing this package does not import ``cryptography``; it loads when a store is opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import Keyring
    from .errors import DecryptionError, KeyMismatch
    from .rotation import RotationReport, rotate
    from .store import EncryptedStore

__all__ = [
    "DecryptionError",
    "EncryptedStore",
    "KeyMismatch",
    "Keyring",
    "RotationReport",
    "rotate",
]

_HOMES = {
    "EncryptedStore": "store",
    "Keyring": "config",
    "DecryptionError": "errors",
    "KeyMismatch": "errors",
    "RotationReport": "rotation",
    "rotate": "rotation",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{home}", __name__), name)
