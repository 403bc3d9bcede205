"""The one table that turns :mod:`sqlite3` errors into chatkeep's typed errors.

Every place the store talks to SQLite runs inside ``with faults.mapped():`` (an
:class:`~chatkeep.core.backend.ErrorMap` context manager), so the mapping is decided here
only:

- ``OperationalError`` (locked, busy, I/O, disk full, read-only file, cannot open) and a plain
  ``DatabaseError`` ("file is not a database", "database disk image is malformed") become
  :class:`~chatkeep.core.StoreUnavailable`, naming the file and what to check;
- the programming errors (``IntegrityError``, ``ProgrammingError``, ``InterfaceError``,
  ``DataError``, ``InternalError``, ``NotSupportedError``: a bug, or a value that cannot be
  bound) stay exactly what they are;
- chatkeep's own errors pass through unchanged.

Messages name the database path and quote SQLite's message scrubbed by
:func:`~chatkeep.core.backend.redact_text`; a ``sqlite://`` URL carries no credential.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from chatkeep.core.backend import ErrorMap, StoreUnavailable, redact_text

__all__ = ["Faults"]

#: Driver errors that are a caller's or chatkeep's bug, never the file's state: not mapped.
_UNCHANGED: tuple[type[sqlite3.Error], ...] = (
    sqlite3.IntegrityError,
    sqlite3.ProgrammingError,
    sqlite3.InterfaceError,
    sqlite3.DataError,
    sqlite3.InternalError,
    sqlite3.NotSupportedError,
)


def _unchanged(error: BaseException) -> BaseException:
    return error


class Faults:
    """The error table of one store: ``path`` names its file, ``timeout`` its lock wait."""

    __slots__ = ("errors", "mapped", "path", "timeout")

    def __init__(self, path: str, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        table: dict[type[BaseException], Callable[[BaseException], BaseException]]
        table = dict.fromkeys(_UNCHANGED, _unchanged)
        table[sqlite3.OperationalError] = self.unavailable
        table[sqlite3.DatabaseError] = self.unavailable
        self.errors = ErrorMap(table)
        self.mapped = self.errors.mapped

    def unavailable(self, error: BaseException) -> StoreUnavailable:
        """The :class:`~chatkeep.core.StoreUnavailable` for a file-level ``error``."""
        message = redact_text(str(error))
        if "locked" in message or "busy" in message:
            hint = (
                f"another connection held the write lock for more than "
                f"timeout={self.timeout:g}s; retrying is safe"
            )
        elif "unable to open" in message:
            hint = "check that its directory exists and is writable"
        elif "readonly" in message or "read-only" in message:
            hint = "the file or its directory is not writable; open it with ?mode=ro to read"
        else:
            hint = "check the file, its disk and its permissions"
        return StoreUnavailable(f"SQLite database {self.path!r}: {message} ({hint})")
