"""Registers the ``postgres`` backend with chatkeep (entry point ``chatkeep: postgres``).

The factory is a lazy ``"module:attribute"`` string so that listing backends never imports
psycopg; the driver loads only when a ``postgresql://`` store is opened.
"""

from __future__ import annotations

from chatkeep.core import hookimpl
from chatkeep.core.hookspecs import RegisterBackend

__all__ = ["CAPABILITIES", "chatkeep_register_backends"]

#: What the backend offers; mirrored by ``PostgresStore.capabilities`` (a test checks both).
CAPABILITIES = (
    *("delete", "list_sessions", "close", "ttl", "shared", "durable", "conditional"),
    "namespace",
)


@hookimpl
def chatkeep_register_backends(register: RegisterBackend) -> None:
    """Register ``postgres`` for the ``postgresql://`` and ``postgres://`` URL schemes."""
    register(
        "postgres",
        "chatkeep.postgres.store:PostgresStore",
        schemes=["postgresql", "postgres"],
        capabilities=CAPABILITIES,
        description="PostgreSQL via psycopg 3 (sync and async pools, one round trip per call)",
    )
