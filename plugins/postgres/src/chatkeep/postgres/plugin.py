"""Registers the ``postgres`` backend with chatkeep (entry point ``chatkeep: postgres``).

The one place the backend's capabilities are declared. Nothing here imports psycopg: the
factory is a lazy ``"module:attribute"`` string, loaded when a ``postgresql://`` store is
opened.
"""

from __future__ import annotations

from chatkeep.core.backend import (
    CLOSE,
    CONDITIONAL,
    DELETE,
    DURABLE,
    FULLTEXT,
    LIST_SESSIONS,
    NAMESPACE,
    RECENT,
    SHARED,
    TTL,
    RegisterBackend,
    hookimpl,
)

__all__ = ["CAPABILITIES", "SCHEMES", "chatkeep_register_backends"]

#: What the PostgreSQL backend offers (declared once: the store class reads it from here).
CAPABILITIES: frozenset[str] = frozenset(
    {DELETE, LIST_SESSIONS, CLOSE, TTL, SHARED, DURABLE, CONDITIONAL, NAMESPACE, RECENT, FULLTEXT}
)
#: The URL schemes that select it.
SCHEMES = ("postgresql", "postgres")


@hookimpl
def chatkeep_register_backends(register: RegisterBackend) -> None:
    """Register ``postgres`` for the ``postgresql://`` and ``postgres://`` URL schemes."""
    register(
        "postgres",
        "chatkeep.postgres.store:PostgresStore",
        schemes=SCHEMES,
        capabilities=CAPABILITIES,
        description="PostgreSQL via psycopg 3 (sync and async pools, one round trip per call)",
    )
