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
    LIST_SESSIONS,
    NAMESPACE,
    SHARED,
    TTL,
    RegisterBackend,
    hookimpl,
)

__all__ = [
    "CAPABILITIES",
    "MEMORY_CAPABILITIES",
    "READ_ONLY_CAPABILITIES",
    "SCHEMES",
    "chatkeep_register_backends",
]

#: What a SQLite file offers beyond ``append`` and ``read``.
CAPABILITIES: frozenset[str] = frozenset(
    {DELETE, LIST_SESSIONS, CLOSE, TTL, SHARED, DURABLE, CONDITIONAL, NAMESPACE}
)
#: A private ``:memory:`` database lives in one connection: neither shared nor durable.
MEMORY_CAPABILITIES: frozenset[str] = CAPABILITIES - {SHARED, DURABLE}
#: A ``mode=ro`` handle reads and lists, but neither deletes nor appends conditionally.
READ_ONLY_CAPABILITIES: frozenset[str] = CAPABILITIES - {DELETE, CONDITIONAL}
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
