"""Errors specific to the Azure Blob backend.

Connectivity problems surface as :class:`chatkeep.core.StoreUnavailable` and damaged data as
:class:`chatkeep.core.CorruptRecord`, like on every backend. What is left is configuration
and permission trouble, which only this backend can explain. No message ever contains an
account key, a SAS token or a connection string.
"""

from __future__ import annotations

from chatkeep.core import ChatkeepError, InvalidOption

__all__ = ["AzureBlobAccessDenied", "AzureBlobConfigError", "AzureBlobError"]


class AzureBlobError(ChatkeepError):
    """Azure Blob Storage refused a request (``status`` and ``error_code`` say why)."""

    def __init__(
        self, message: str, *, status: int | None = None, error_code: str | None = None
    ) -> None:
        self.status = status
        self.error_code = error_code
        super().__init__(message)


class AzureBlobConfigError(AzureBlobError, InvalidOption):
    """The store's URL or options are invalid or incomplete (no credential, a bad container
    name, an unknown option, a missing optional dependency)."""


class AzureBlobAccessDenied(AzureBlobError, PermissionError):
    """Authentication failed, or the credential lacks a permission the operation needs
    (see the README's *Permissions* section)."""
