"""chatkeep-postgres: store chatkeep session logs in PostgreSQL (psycopg 3, sync and async).

    from chatkeep.core import open_store, Record

    store = open_store("postgresql://app@localhost/app?schema=chatkeep")
    store.append("session-1", [Record("m1", b'{"role": "user"}')])
    store.read("session-1", start=-50)

See README.md for URL forms, options, the table layout and operations advice.
"""

from .migrate import SchemaNotReady, migration_script
from .options import PostgresOptions
from .schema import LATEST_VERSION
from .store import PostgresStore

__all__ = [
    "LATEST_VERSION",
    "PostgresOptions",
    "PostgresStore",
    "SchemaNotReady",
    "migration_script",
]
