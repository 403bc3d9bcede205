"""The errors only the SQLite backend raises; both derive from :class:`chatkeep.core.ChatkeepError`.

Everything else it raises is one of the core's typed errors (:mod:`chatkeep.core.errors`):
bad options raise :class:`chatkeep.core.InvalidOption` itself, re-exported here for code that
imported it from this module.
"""

from __future__ import annotations

from chatkeep.core.errors import ChatkeepError, InvalidOption

__all__ = ["IncompatibleSchema", "InvalidOption", "StoreFull"]


class IncompatibleSchema(ChatkeepError, RuntimeError):
    """The database file was created by a newer chatkeep-sqlite than the one installed.

    Upgrade ``chatkeep-sqlite`` (older versions never rewrite a newer schema).
    """


class StoreFull(ChatkeepError, OverflowError):
    """A session reached 2**32 records, or the file 2**31 - 1 sessions (nothing was stored)."""
