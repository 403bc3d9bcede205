"""The chatkeep plugin that registers the ``encrypted`` wrapper backend.

``open_store("encrypted+<inner URL>")`` opens the inner store and wraps it. Nothing here
imports ``cryptography``: the factory is a lazy ``"module:attribute"`` string.
"""

from __future__ import annotations

from chatkeep.core.backend import RegisterBackend, hookimpl

__all__ = ["chatkeep_register_backends"]


@hookimpl
def chatkeep_register_backends(register: RegisterBackend) -> None:
    """Register ``encrypted`` (``encrypted+sqlite:///chats.db``, ``encrypted+s3://...``)."""
    register(
        "encrypted",
        "chatkeep.encrypted.store:EncryptedStore",
        schemes=["encrypted"],
        wrapper=True,
        description="encryption at rest (AES-GCM) over any store: encrypted+<inner URL>",
    )
