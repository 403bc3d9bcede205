"""Registers the ``sqlite`` backend with chatkeep (entry point ``sqlite`` in group ``chatkeep``).

The one place the backend's capabilities are declared (:data:`CAPABILITIES`; the store class
reads them from here). Nothing here imports :mod:`sqlite3` or the store: the factory is a lazy
``"module:attribute"`` string, so listing backends never loads them.
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

__all__ = [
    "CAPABILITIES",
    "MEMORY_CAPABILITIES",
    "READ_ONLY_CAPABILITIES",
    "READ_ONLY_V1_CAPABILITIES",
    "SCHEMES",
    "chatkeep_register_backends",
]

#: What a SQLite file offers beyond ``append`` and ``read``.
CAPABILITIES: frozenset[str] = frozenset(
    {DELETE, LIST_SESSIONS, CLOSE, TTL, SHARED, DURABLE, CONDITIONAL, NAMESPACE, RECENT, FULLTEXT}
)
#: A private ``:memory:`` database lives in one connection: neither shared nor durable.
MEMORY_CAPABILITIES: frozenset[str] = CAPABILITIES - {SHARED, DURABLE}
#: A ``mode=ro`` handle reads and lists, but neither deletes nor appends conditionally.
#: (Nor ``fulltext``: a search through it scans, whatever index the file holds.)
READ_ONLY_CAPABILITIES: frozenset[str] = CAPABILITIES - {DELETE, CONDITIONAL, FULLTEXT}
#: A ``mode=ro`` handle of a file at schema version 1 (before ``updated_at``): no ``recent``,
#: so newest-first listings fall back to reading each session's last record.
READ_ONLY_V1_CAPABILITIES: frozenset[str] = READ_ONLY_CAPABILITIES - {RECENT}
#: The URL schemes that select the backend.
SCHEMES = ("sqlite",)


@hookimpl
def chatkeep_register_backends(register: RegisterBackend) -> None:
    """Register ``sqlite`` for ``sqlite://`` URLs."""
    register(
        "sqlite",
        "chatkeep.sqlite.store:SQLiteStore",
        schemes=list(SCHEMES),
        capabilities=sorted(CAPABILITIES),
        description="a SQLite file (embedded default): WAL, one transaction per append",
    )
