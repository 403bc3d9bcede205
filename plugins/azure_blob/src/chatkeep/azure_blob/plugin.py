"""The chatkeep plugin: registers the ``azure-blob`` backend (URL scheme ``azblob://``).

The one place the backend's capabilities are declared (the store class reads
:data:`CAPABILITIES` from here). Nothing here imports the Azure SDK: the backend class is
named as a lazy ``"module:attr"`` string, so listing backends never imports it.
"""

from __future__ import annotations

from chatkeep.core.backend import (
    CLOSE,
    CONDITIONAL,
    DELETE,
    DURABLE,
    LIST_SESSIONS,
    NAMESPACE,
    SHARED,
    RegisterBackend,
    hookimpl,
)

__all__ = ["CAPABILITIES", "SCHEMES", "chatkeep_register_backends"]

#: What the Azure Blob backend offers beyond ``append`` and ``read``.
CAPABILITIES: frozenset[str] = frozenset(
    {DELETE, LIST_SESSIONS, CLOSE, SHARED, DURABLE, CONDITIONAL, NAMESPACE}
)
#: The URL schemes that select it.
SCHEMES = ("azblob",)


@hookimpl
def chatkeep_register_backends(register: RegisterBackend) -> None:
    """Register ``azure-blob`` for ``azblob://container/prefix?...`` URLs."""
    register(
        "azure-blob",
        "chatkeep.azure_blob.store:AzureBlobStore",
        schemes=SCHEMES,
        capabilities=sorted(CAPABILITIES),
        description="Azure Blob Storage append blobs (azblob://container/prefix)",
    )
