"""Failures: Azure SDK errors -> the algorithm's failures -> chatkeep's typed errors.

Two steps, each in one place:

1. :func:`translate` classifies an ``azure-core`` / ``azure-storage-blob`` exception by its
   HTTP status and the service's error code into one of the algorithm's failures
   (:class:`~._operations.ServiceError` subclasses: a failed condition, a missing blob, an
   unknown outcome, ...), which the log algorithm catches and reacts to. Only the status,
   the error code and the exception's type survive: the SDK's messages can quote request
   signatures.
2. What the algorithm does not handle reaches the store's one context manager,
   :func:`mapped`, which raises the chatkeep error that one table (a
   :class:`chatkeep.core.backend.ErrorMap`, :func:`error_table`) names for it:
   ``StoreUnavailable`` for unknown outcomes and lost races, ``CorruptRecord`` for damaged
   frames, :class:`~.errors.AzureBlobAccessDenied` for refused credentials, and so on.

Every message names the action, the session and the endpoint, never a credential.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ServiceRequestError,
)

from chatkeep.core.backend import CorruptRecord, ErrorMap, StoreUnavailable

from ._operations import (
    AccessRefused,
    BlobExists,
    BlobMissing,
    ConditionFailed,
    ContainerMissing,
    OutcomeUnknown,
    Rejected,
    SegmentFull,
    ServiceError,
    Unreachable,
)
from ._state import Contended, Restart, Unsettled
from .errors import AzureBlobAccessDenied, AzureBlobConfigError, AzureBlobError
from .frames import FrameError

__all__ = ["Where", "describe", "error_table", "mapped", "translate"]

_FULL_CODES = frozenset({"BlockCountExceedsLimit", "MaxBlobSizeConditionNotMet"})
_EXISTS_CODES = frozenset({"BlobAlreadyExists", "ContainerAlreadyExists"})


def _code(error: HttpResponseError) -> str | None:
    code = getattr(error, "error_code", None)  # set by the storage SDK's error processing
    if code is None and error.response is not None:
        headers = getattr(error.response, "headers", None) or {}
        code = headers.get("x-ms-error-code")
    return None if code is None else str(getattr(code, "value", code))


def translate(error: AzureError) -> ServiceError:
    """The algorithm's :class:`ServiceError` for an SDK exception (status and code only)."""
    if isinstance(error, ClientAuthenticationError):
        status = error.status_code if error.response is not None else None
        return AccessRefused(status, _code(error) if error.response is not None else None)
    if isinstance(error, HttpResponseError) and error.status_code is not None:
        status, code = error.status_code, _code(error)
        if status == 412:
            return ConditionFailed(status, code)
        if status == 404:
            if code == "ContainerNotFound":
                return ContainerMissing(status, code)
            return BlobMissing(status, code)
        if status == 409 and code in _EXISTS_CODES:
            return BlobExists(status, code)
        if status == 409 and code in _FULL_CODES:
            return SegmentFull(status, code)
        if status in (401, 403):
            return AccessRefused(status, code)
        if status in (408, 429) or status >= 500:
            return OutcomeUnknown(status, code)
        return Rejected(status, code)
    if isinstance(error, ServiceRequestError):
        return Unreachable(None, type(error).__name__)
    return OutcomeUnknown(None, type(error).__name__)


def describe(error: ServiceError) -> str:
    """``"HTTP 403, AuthorizationFailure"``: the status and the service's error code."""
    parts = []
    if error.status is not None:
        parts.append(f"HTTP {error.status}")
    if error.code:
        parts.append(error.code)
    return ", ".join(parts) or type(error).__name__


@dataclass(frozen=True)
class Where:
    """What failed, for the messages: the action, the session (if any) and the store."""

    action: str
    session_id: str | None
    endpoint: str
    auth: str
    container: str
    contention_timeout: float

    @property
    def session(self) -> str:
        """`` for session '...'`` or nothing."""
        return f" for session {self.session_id!r}" if self.session_id is not None else ""


def error_table(where: Where) -> ErrorMap:
    """The one table from the algorithm's failures (and stray SDK errors) to chatkeep's
    typed errors, with messages about ``where``. The most specific class wins."""
    action, session = where.action, where.session

    def unsettled(error: BaseException) -> BaseException:
        cause = error.__cause__
        detail = f" ({describe(cause)})" if isinstance(cause, ServiceError) else ""
        return StoreUnavailable(
            f"Azure Blob Storage did not confirm an append{session}{detail}; the batch may "
            "or may not be stored. Retrying the same append is safe: it will not be "
            "stored twice."
        )

    def contended(error: BaseException) -> BaseException:
        return StoreUnavailable(
            f"an append{session} lost the race to other writers for longer than "
            f"{where.contention_timeout:g} s; nothing was stored"
        )

    def restart(error: BaseException) -> BaseException:
        return StoreUnavailable(
            f"{action}{session} gave up: the session kept changing under it (deleted and "
            "recreated, or growing faster than it could be read); try again"
        )

    def refused(error: BaseException) -> BaseException:
        assert isinstance(error, ServiceError)
        return AzureBlobAccessDenied(
            f"{action}{session} was refused ({describe(error)}) at {where.endpoint} using "
            f"{where.auth}: check the credential and that it may read, add, create, write, "
            "delete and list blobs",
            status=error.status,
            error_code=error.code,
        )

    def unknown(error: BaseException) -> BaseException:
        assert isinstance(error, ServiceError)
        return StoreUnavailable(
            f"Azure Blob Storage at {where.endpoint} did not answer {action}{session} "
            f"({describe(error)})"
        )

    def no_container(error: BaseException) -> BaseException:
        assert isinstance(error, ServiceError)
        return AzureBlobConfigError(
            f"{action}{session} failed: container {where.container!r} does not exist "
            "(create it, or allow create_container=true)",
            status=error.status,
            error_code=error.code,
        )

    def service(error: BaseException) -> BaseException:
        assert isinstance(error, ServiceError)
        return AzureBlobError(
            f"Azure Blob Storage refused {action}{session} ({describe(error)})",
            status=error.status,
            error_code=error.code,
        )

    def damaged(error: BaseException) -> BaseException:
        assert isinstance(error, FrameError)
        return CorruptRecord(
            where.session_id or "",
            -1 if error.position is None else error.position,
            f"{error.reason} (byte {error.offset} of a segment)",
        )

    def sdk(error: BaseException) -> BaseException:
        assert isinstance(error, AzureError)
        translated = translate(error)
        mapped_error = error_table(where).translate(translated)
        return translated if mapped_error is None else mapped_error

    table: dict[type[BaseException], Callable[[BaseException], BaseException]] = {
        Unsettled: unsettled,
        Contended: contended,
        Restart: restart,
        AccessRefused: refused,
        OutcomeUnknown: unknown,
        ContainerMissing: no_container,
        ServiceError: service,
        FrameError: damaged,
        AzureError: sdk,
    }
    return ErrorMap(table)


@contextmanager
def mapped(where: Where, on_unsettled: Callable[[Unsettled], None] | None = None) -> Iterator[None]:
    """Raise the chatkeep error :func:`error_table` names for anything escaping the block
    (``from None``: no SDK text is chained). ``on_unsettled`` is told first about an append
    whose outcome is unknown, so the handle can check that spot on the next append.

    The table is only built when something fails: the happy path costs a ``try``.
    """
    try:
        yield
    except Exception as error:
        if isinstance(error, Unsettled) and on_unsettled is not None:
            on_unsettled(error)
        translated = error_table(where).translate(error)
        if translated is None:
            raise
        raise translated from None
