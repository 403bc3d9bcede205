"""chatkeep-azure-blob: chatkeep session logs in Azure Blob Storage append blobs.

Open a store with ``chatkeep.core.open_store("azblob://container/prefix?...")`` or build
:class:`AzureBlobStore` directly. Importing this package does not import the Azure SDK; the
store module does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import AzureBlobAccessDenied, AzureBlobConfigError, AzureBlobError

if TYPE_CHECKING:
    from .store import AzureBlobStore

__all__ = ["AzureBlobAccessDenied", "AzureBlobConfigError", "AzureBlobError", "AzureBlobStore"]


def __getattr__(name: str) -> Any:
    if name == "AzureBlobStore":
        from .store import AzureBlobStore

        return AzureBlobStore
    raise AttributeError(name)
