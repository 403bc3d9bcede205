"""The errors only the SQLite backend raises; all derive from :class:`chatkeep.core.ChatkeepError`.

Everything else it raises is one of the core's typed errors (:mod:`chatkeep.core.errors`):
bad options raise :class:`chatkeep.core.InvalidOption` itself, re-exported here for code that
imported it from this module.
"""

from __future__ import annotations

import os

from chatkeep.core.errors import ChatkeepError, InvalidOption, StoreNotFound, StoreUnavailable
from chatkeep.core.errors import ReadOnlyStore as CoreReadOnlyStore

__all__ = [
    "DatabaseNotFound",
    "DatabaseReplaced",
    "IncompatibleSchema",
    "InvalidOption",
    "ReadOnlyStore",
    "StoreFull",
]


class IncompatibleSchema(ChatkeepError, RuntimeError):
    """The database file was created by a newer chatkeep-sqlite than the one installed.

    Upgrade ``chatkeep-sqlite`` (older versions never rewrite a newer schema).
    """


class StoreFull(ChatkeepError, OverflowError):
    """A session reached 2**32 records, or the file 2**31 - 1 sessions (nothing was stored)."""


class DatabaseReplaced(StoreUnavailable):
    """The database file was deleted, or another file renamed over its path, while the store
    had it open: a write would land in a file nobody can open again, so nothing was stored.

    A :class:`chatkeep.core.StoreUnavailable`; the message names the path. Open a new store
    on the path to use whatever file is there now.
    """

    def __init__(self, path: str, what: str) -> None:
        self.path = path
        self.what = what
        super().__init__(
            f"SQLite database {path!r} {what} while this store had it open; nothing of "
            "this call was stored (it would have gone to a file no one can open again). "
            "Open the store again to use the file now at that path."
        )

    def __reduce__(self) -> tuple[type[DatabaseReplaced], tuple[str, str]]:
        return type(self), (self.path, self.what)


class DatabaseNotFound(StoreNotFound, FileNotFoundError):
    """``mode=ro`` or ``mode=rw`` was asked for a file that does not exist (neither mode
    ever creates one). A :class:`chatkeep.core.StoreNotFound` (so a
    :class:`chatkeep.core.StoreUnavailable`) and a :class:`FileNotFoundError`; the message
    names the path, made absolute (a relative one is relative to the working directory)."""

    def __init__(self, path: str, mode: str) -> None:
        self.path = path
        self.mode = mode
        shown = os.path.abspath(path) if path and not path.startswith("file:") else path
        super().__init__(
            f"SQLite database {shown!r} does not exist (mode={mode} never creates it); "
            "check the path, or open it without mode= to create it"
        )

    def __reduce__(self) -> tuple[type[DatabaseNotFound], tuple[str, str]]:
        return type(self), (self.path, self.mode)


class ReadOnlyStore(CoreReadOnlyStore):
    """A write (``append``, ``append_if``, ``delete``, ``purge_expired``) on a store opened
    with ``mode=ro``. Nothing was written. A :class:`chatkeep.core.ReadOnlyStore` (so a
    :class:`chatkeep.core.CapabilityMissing`): a read-only handle does not offer writing
    (its ``capabilities`` leave out ``delete`` and ``conditional``); the message names the
    file."""

    def __init__(self, path: str, operation: str) -> None:
        super().__init__("sqlite", operation)
        self.path = path
        self.args = (
            f"SQLite database {path!r} is open read-only (mode=ro): {operation} is not "
            "possible through this handle; nothing was written. Open it with mode=rw "
            "(or without mode=) to write.",
        )

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[type[ReadOnlyStore], tuple[str, str]]:
        return type(self), (self.path, self.capability)
