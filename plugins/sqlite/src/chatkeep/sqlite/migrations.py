"""The schema's migrations, recorded in the ``chatkeep_schema`` version table.

The tables and the record layout are described in :mod:`chatkeep.sqlite.layout`; the DDL
is in :mod:`chatkeep.sqlite.sql`.

Migrations run under ``BEGIN IMMEDIATE`` after re-reading the version, so any number of
processes may open a new file at once: one creates the schema, the others wait for its write
lock, see the new version and apply nothing.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import sql
from .errors import IncompatibleSchema
from .layout import VERSION_TABLE

if TYPE_CHECKING:
    import sqlite_utils

__all__ = [
    "LATEST_VERSION",
    "MIGRATIONS",
    "VERSION_TABLE",
    "Migration",
    "migrate",
    "schema_version",
]


@dataclass(frozen=True)
class Migration:
    """One step of the schema: ``apply`` runs inside the migrating transaction."""

    version: int
    description: str
    apply: Callable[[sqlite_utils.Database], None]


def _create_v1(db: sqlite_utils.Database) -> None:
    # Only db.execute is used: sqlite-utils' table helpers commit on their own in 3.x, which
    # would end the BEGIN IMMEDIATE transaction that keeps concurrent first opens safe.
    for statement in sql.CREATE_V1:
        db.execute(statement)


MIGRATIONS: tuple[Migration, ...] = (Migration(1, "sessions and records tables", _create_v1),)
LATEST_VERSION = MIGRATIONS[-1].version


def schema_version(conn: sqlite3.Connection) -> int:
    """The newest migration applied to the database behind ``conn`` (0 for a new file)."""
    exists = conn.execute(sql.SELECT_TABLE, (VERSION_TABLE,)).fetchone()
    if exists is None:
        return 0
    row = conn.execute(sql.SELECT_VERSION).fetchone()
    return int(row[0] or 0)


def migrate(
    conn: sqlite3.Connection,
    migrations: Sequence[Migration] = MIGRATIONS,
    *,
    label: str = "the database",
) -> int:
    """Bring the schema up to the last of ``migrations``; return the version reached.

    ``conn`` must be in autocommit mode (``isolation_level=None``) with a busy timeout.
    A current schema costs two reads and no lock. Raises :class:`IncompatibleSchema` when
    the file is newer than ``migrations``.
    """
    latest = migrations[-1].version
    current = schema_version(conn)
    if current == latest:
        return current
    _check_not_newer(current, latest, label)
    # sqlite-utils takes ~0.2 s to import, so only files that need migrating pay for it.
    import sqlite_utils

    db = sqlite_utils.Database(conn, recursive_triggers=False, execute_plugins=False)
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(sql.CREATE_VERSION_TABLE)
        # Re-read under the write lock: another process may have migrated meanwhile.
        current = schema_version(conn)
        _check_not_newer(current, latest, label)
        for migration in migrations:
            if migration.version > current:
                migration.apply(db)
                conn.execute(
                    sql.INSERT_VERSION, (migration.version, migration.description, time.time())
                )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return latest


def _check_not_newer(current: int, latest: int, label: str) -> None:
    if current > latest:
        raise IncompatibleSchema(
            f"{label} has chatkeep schema version {current}, but this chatkeep-sqlite only "
            f"knows versions up to {latest}; upgrade chatkeep-sqlite to open it"
        )
