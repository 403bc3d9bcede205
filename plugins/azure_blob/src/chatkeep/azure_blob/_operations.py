"""The storage operations the log algorithm asks for, their results and their failures.

The algorithm in :mod:`._engine` is written once, as generators that *yield* these
operations and receive their results; :mod:`._drivers` carries them out with the sync or the
async Azure client. So the sync and async APIs share every line of logic, and tests can
drive the algorithm against any fake.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = [
    "AccessRefused",
    "Append",
    "Appended",
    "Blob",
    "BlobExists",
    "BlobMissing",
    "ConditionFailed",
    "ContainerMissing",
    "Create",
    "CreateContainer",
    "Created",
    "Delete",
    "Get",
    "Head",
    "ListNames",
    "Op",
    "OutcomeUnknown",
    "Rejected",
    "SegmentFull",
    "ServiceError",
    "SetMetadata",
    "Sleep",
    "Step",
    "Unreachable",
    "Upload",
]

T = TypeVar("T")


# -- operations -------------------------------------------------------------------------


@dataclass(frozen=True)
class Get:
    """Download ``length`` bytes of ``blob`` from ``offset`` (fewer at its end)."""

    blob: str
    offset: int
    length: int


@dataclass(frozen=True)
class Head:
    """Read ``blob``'s properties and metadata."""

    blob: str


@dataclass(frozen=True)
class Append:
    """Append Block ``data`` to ``blob`` only if it is ``position`` bytes long (and, when
    given, still has ``etag``)."""

    blob: str
    data: bytes = field(repr=False)
    position: int
    etag: str | None


@dataclass(frozen=True)
class Create:
    """Create the empty append blob ``blob`` unless it exists."""

    blob: str
    metadata: Mapping[str, str] = field(repr=False)


@dataclass(frozen=True)
class CreateContainer:
    """Create the store's container unless it exists."""


@dataclass(frozen=True)
class Upload:
    """Write the block blob ``blob`` (replacing it)."""

    blob: str
    data: bytes = field(repr=False)


@dataclass(frozen=True)
class SetMetadata:
    """Replace ``blob``'s metadata."""

    blob: str
    metadata: Mapping[str, str] = field(repr=False)


@dataclass(frozen=True)
class Delete:
    """Delete ``blob`` and its snapshots."""

    blob: str


@dataclass(frozen=True)
class ListNames:
    """The names of every blob whose name starts with ``prefix``."""

    prefix: str


@dataclass(frozen=True)
class Sleep:
    """Wait (backing off under contention)."""

    seconds: float


Op = (
    Get
    | Head
    | Append
    | Create
    | CreateContainer
    | Upload
    | SetMetadata
    | Delete
    | ListNames
    | Sleep
)

#: A step of the algorithm: yields operations, is sent their results, returns ``T``.
Step = Generator[Op, Any, T]


# -- results ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Blob:
    """A byte window of a blob, with the blob's state when it was read.

    ``data`` holds the blob's bytes from ``offset``; ``size`` is the blob's whole length and
    ``etag`` its version at that moment.
    """

    data: bytes = field(repr=False)
    offset: int
    size: int
    etag: str
    metadata: Mapping[str, str]
    blocks: int

    @property
    def end(self) -> int:
        """Offset just past the window."""
        return self.offset + len(self.data)

    @property
    def reaches_end(self) -> bool:
        """Whether the window runs to the end of the blob."""
        return self.offset <= self.size and self.end == self.size


@dataclass(frozen=True)
class Appended:
    """A block landed: the blob's new ``etag``, where it landed, and the block count."""

    etag: str
    offset: int
    blocks: int


@dataclass(frozen=True)
class Created:
    """A blob was created with version ``etag``."""

    etag: str


# -- failures ---------------------------------------------------------------------------


class ServiceError(Exception):
    """A storage operation failed (the service's status and error code, never its text)."""

    def __init__(self, status: int | None = None, code: str | None = None) -> None:
        self.status = status
        self.code = code
        super().__init__(f"status {status}, error code {code}")


class ConditionFailed(ServiceError):
    """A conditional write found the blob changed (append position or version)."""


class BlobMissing(ServiceError):
    """The blob does not exist."""


class ContainerMissing(BlobMissing):
    """The container does not exist."""


class BlobExists(ServiceError):
    """A create-if-missing found the blob already there."""


class SegmentFull(ServiceError):
    """The append blob reached a service limit (block count or size)."""


class AccessRefused(ServiceError):
    """Authentication failed or the credential lacks a permission."""


class Rejected(ServiceError):
    """The service refused the request for another reason (a 4xx)."""


class OutcomeUnknown(ServiceError):
    """The request may or may not have been carried out (timeouts, lost responses, 5xx
    after the client's retries)."""


class Unreachable(OutcomeUnknown):
    """The service could not be reached at all."""


# -- typed helpers the algorithm yields through -----------------------------------------


def get(blob: str, offset: int, length: int) -> Step[Blob]:
    """Yield a :class:`Get`; return its :class:`Blob`."""
    result = yield Get(blob, offset, length)
    assert isinstance(result, Blob)
    return result


def head(blob: str) -> Step[Blob]:
    """Yield a :class:`Head`; return the (empty-window) :class:`Blob`."""
    result = yield Head(blob)
    assert isinstance(result, Blob)
    return result


def append_block(blob: str, data: bytes, position: int, etag: str | None) -> Step[Appended]:
    """Yield an :class:`Append`; return :class:`Appended`."""
    result = yield Append(blob, data, position, etag)
    assert isinstance(result, Appended)
    return result


def create(blob: str, metadata: Mapping[str, str]) -> Step[Created]:
    """Yield a :class:`Create`; return :class:`Created`."""
    result = yield Create(blob, metadata)
    assert isinstance(result, Created)
    return result


def list_names(prefix: str) -> Step[list[str]]:
    """Yield a :class:`ListNames`; return the names."""
    result = yield ListNames(prefix)
    assert isinstance(result, list)
    return result


def run_sync(step: Step[T], execute: Any) -> T:
    """Drive ``step`` to completion, carrying out each operation with ``execute(op)``."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = step.send(value) if error is None else step.throw(error)
        except StopIteration as stop:
            result: T = stop.value
            return result
        value, error = None, None
        try:
            value = execute(op)
        except ServiceError as exc:
            error = exc


async def run_async(step: Step[T], execute: Any) -> T:
    """Async :func:`run_sync`: ``execute(op)`` is awaited."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = step.send(value) if error is None else step.throw(error)
        except StopIteration as stop:
            result: T = stop.value
            return result
        value, error = None, None
        try:
            value = await execute(op)
        except ServiceError as exc:
            error = exc
