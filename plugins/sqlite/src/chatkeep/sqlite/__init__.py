"""chatkeep-sqlite: the embedded SQLite backend for chatkeep.

Usually opened by URL through the core::

    from chatkeep.core import open_store

    store = open_store("sqlite:///chats.db?ttl=2592000")

or directly::

    from chatkeep.sqlite import SQLiteStore

    backend = SQLiteStore("chats.db")

:class:`SQLiteStore` is imported on first access, so plugin discovery (which imports
:mod:`chatkeep.sqlite.plugin`) stays cheap. ``InvalidOption`` is the core's
(:class:`chatkeep.core.InvalidOption`), re-exported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import DatabaseReplaced, IncompatibleSchema, InvalidOption, StoreFull

if TYPE_CHECKING:
    from .store import SQLiteStore

__all__ = ["DatabaseReplaced", "IncompatibleSchema", "InvalidOption", "SQLiteStore", "StoreFull"]


def __getattr__(name: str) -> Any:
    if name == "SQLiteStore":
        from .store import SQLiteStore

        return SQLiteStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
