"""The errors only the SQLite backend raises; all derive from :class:`chatkeep.core.ChatkeepError`.

Everything else it raises is one of the core's typed errors (:mod:`chatkeep.core.errors`):
bad options raise :class:`chatkeep.core.InvalidOption` itself, re-exported here for code that
imported it from this module.
"""

from __future__ import annotations

from chatkeep.core.errors import ChatkeepError, InvalidOption, StoreUnavailable

__all__ = ["DatabaseReplaced", "IncompatibleSchema", "InvalidOption", "StoreFull"]


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
        super().__init__(
            f"SQLite database {path!r} {what} while this store had it open; nothing of "
            "this call was stored (it would have gone to a file no one can open again). "
            "Open the store again to use the file now at that path."
        )
