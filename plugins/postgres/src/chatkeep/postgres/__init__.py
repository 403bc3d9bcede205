"""chatkeep-postgres: store chatkeep session logs in PostgreSQL (psycopg 3, sync and async).

    from chatkeep.core import open_store, Record

    store = open_store("postgresql://app@localhost/app?schema=chatkeep")
    store.append("session-1", [Record("m1", b'{"role": "user"}')])
    store.read("session-1", start=-50)

See README.md for URL forms, options, the table layout and operations advice.

Importing this package (as plugin discovery does) does not import psycopg: the names below
load their modules on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import PostgresOptions
    from .faults import ReadOnlyStore
    from .migrate import LATEST_VERSION, SchemaNotReady, migration_script
    from .store import PostgresStore

__all__ = [
    "LATEST_VERSION",
    "PostgresOptions",
    "PostgresStore",
    "ReadOnlyStore",
    "SchemaNotReady",
    "migration_script",
]

_HOMES = {
    "LATEST_VERSION": ".migrate",
    "PostgresOptions": ".config",
    "PostgresStore": ".store",
    "ReadOnlyStore": ".faults",
    "SchemaNotReady": ".migrate",
    "migration_script": ".migrate",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home, __name__), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
