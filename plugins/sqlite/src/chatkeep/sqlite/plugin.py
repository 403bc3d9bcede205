"""Registers the ``sqlite`` backend with chatkeep (entry point ``chatkeep: sqlite``).

The factory is a lazy ``"module:attr"`` string: listing backends never imports the store.
"""

from __future__ import annotations

from chatkeep.core import hookimpl
from chatkeep.core.hookspecs import RegisterBackend

__all__ = ["chatkeep_register_backends"]


@hookimpl
def chatkeep_register_backends(register: RegisterBackend) -> None:
    """Register ``sqlite`` for ``sqlite://`` URLs."""
    register(
        "sqlite",
        "chatkeep.sqlite.store:SQLiteStore",
        schemes=["sqlite"],
        capabilities=[
            *("delete", "list_sessions", "close", "ttl", "shared", "durable", "conditional"),
            "namespace",
        ],
        description="a SQLite file (embedded default): WAL, one transaction per append",
    )
