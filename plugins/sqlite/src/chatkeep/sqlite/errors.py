"""Errors specific to the SQLite backend; both derive from :class:`chatkeep.core.ChatkeepError`."""

from __future__ import annotations

from chatkeep.core import ChatkeepError
from chatkeep.core import InvalidOption as CoreInvalidOption

__all__ = ["IncompatibleSchema", "InvalidOption", "StoreFull"]


class InvalidOption(CoreInvalidOption):
    """A SQLite URL or option was malformed, unknown or out of range.

    The message names the option, the value received and what is accepted.
    """


class IncompatibleSchema(ChatkeepError, RuntimeError):
    """The database file was created by a newer chatkeep-sqlite than the one installed.

    Upgrade ``chatkeep-sqlite`` (older versions never rewrite a newer schema).
    """


class StoreFull(ChatkeepError, OverflowError):
    """A session reached 2**32 records, or the file 2**31 - 1 sessions (nothing was stored)."""
