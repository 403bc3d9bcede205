"""Private: the storage operations the log algorithm asks for, their results and failures.

The algorithm (:mod:`._write`, :mod:`._read`, :mod:`._locate`) is written once, as sans-IO
programs (:mod:`chatkeep.core.programs`) that *yield* these operations and receive their
results; :mod:`._drivers` carries them out with the sync or the async Azure client, and the
store drives the programs with the core's :func:`~chatkeep.core.programs.run_program` /
:func:`~chatkeep.core.programs.arun_program`. So the sync and async APIs share every line of
logic, and tests can drive the algorithm against any fake.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from chatkeep.core.programs import Program, arun_program, run_program

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
    "ListTop",
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
    "run_async",
    "run_sync",
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
class ListTop:
    """The first page (at most ``limit`` entries) of a listing of ``prefix`` with the
    delimiter ``/``: blob names, and folder names ending in ``/``."""

    prefix: str
    limit: int


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
    | ListTop
    | Sleep
)

#: A step of the algorithm: yields operations, is sent their results, returns ``T``.
Step = Program[Op, T]


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


def list_top(prefix: str, limit: int) -> Step[list[str]]:
    """Yield a :class:`ListTop`; return the names of its one page."""
    result = yield ListTop(prefix, limit)
    assert isinstance(result, list)
    return result


def run_sync(step: Step[T], execute: Callable[[Op], Any]) -> T:
    """Drive ``step`` with ``execute(op)``: the core's runner, throwing service failures
    (:class:`ServiceError`) into the program and letting anything else propagate."""
    return run_program(step, execute, throw=ServiceError)


async def run_async(step: Step[T], execute: Callable[[Op], Awaitable[Any]]) -> T:
    """Async :func:`run_sync`: ``execute(op)`` is awaited."""
    return await arun_program(step, execute, throw=ServiceError)
