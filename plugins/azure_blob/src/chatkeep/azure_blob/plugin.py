"""The chatkeep plugin: registers the ``azure-blob`` backend (URL scheme ``azblob://``).

The backend class is named as a lazy ``"module:attr"`` string, so listing backends never
imports the Azure SDK.
"""

from __future__ import annotations

from chatkeep.core import hookimpl
from chatkeep.core.hookspecs import RegisterBackend

__all__ = ["chatkeep_register_backends"]


@hookimpl
def chatkeep_register_backends(register: RegisterBackend) -> None:
    """Register ``azure-blob``."""
    register(
        "azure-blob",
        "chatkeep.azure_blob.store:AzureBlobStore",
        schemes=["azblob"],
        capabilities=["delete", "list_sessions", "close", "shared", "durable", "conditional"],
        description="Azure Blob Storage append blobs (azblob://container/prefix)",
    )
