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
from .fulltext import create_v3
from .layout import VERSION_TABLE

if TYPE_CHECKING:
    import sqlite_utils

__all__ = [
    "LATEST_VERSION",
    "MIGRATIONS",
    "MIN_READABLE_VERSION",
    "RECENT_VERSION",
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


def _add_updated_at(db: sqlite_utils.Database) -> None:
    """Version 2: ``updated_at`` and its index. An existing session gets the storage time
    its last record carries (the core's ``stored_at`` stamp), else 0 (it then lists after
    every stamped one, as the listing without the index puts sessions without a time)."""
    for statement in sql.CREATE_V2:
        db.execute(statement)
    from chatkeep.core.backend import Record
    from chatkeep.core.views import decode_log

    after = 0
    while True:
        rows = db.execute(sql.SELECT_LAST_RECORDS, (after, _BACKFILL_BATCH)).fetchall()
        updates = []
        for session, data in rows:
            [entry] = decode_log([Record("last", bytes(data))])
            if entry.stored_at is not None:
                updates.append((entry.stored_at.timestamp(), session))
        db.conn.executemany(sql.UPDATE_UPDATED_AT, updates)
        if len(rows) < _BACKFILL_BATCH:
            return
        after = rows[-1][0]


_BACKFILL_BATCH = 1000


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "sessions and records tables", _create_v1),
    Migration(2, "sessions.updated_at and its index (the recent capability)", _add_updated_at),
    Migration(3, "the FTS5 full-text index and its backlog (the fulltext capability)", create_v3),
)
LATEST_VERSION = MIGRATIONS[-1].version
#: The oldest version a ``mode=ro`` handle reads (it never migrates): version 1 lacks only
#: ``updated_at``, so such a handle does without the ``recent`` capability.
MIN_READABLE_VERSION = 1
#: The first version with ``updated_at`` (the ``recent`` capability).
RECENT_VERSION = 2


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
