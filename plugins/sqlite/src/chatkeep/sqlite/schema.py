"""The database schema and its migrations, recorded in the ``chatkeep_schema`` version table.

Tables (all prefixed ``chatkeep_`` so the file can be shared with an application's own tables)::

    chatkeep_schema    (version INTEGER PRIMARY KEY, description TEXT, applied_at REAL)
    chatkeep_sessions  (id INTEGER PRIMARY KEY, session_id TEXT UNIQUE, length INTEGER,
                        expires_at REAL)
    chatkeep_records   (id INTEGER PRIMARY KEY, session INTEGER, record_id TEXT, data BLOB)
        UNIQUE (session, record_id)  -- a retried record is skipped, never duplicated

A record's rowid is ``session << 32 | seq``, where ``seq`` numbers the session's records
0, 1, 2, ... without gaps and ``length`` is the next one. So a session's log is one contiguous
range of the table's own b-tree, and ``log[-k:]`` is the rowid range
``[session << 32 | length - k, session << 32 | length)``: no secondary index to consult, and
the rows read sit together on a few pages. Measured against a separate ``(session, seq)``
index (and against ``WITHOUT ROWID``, whose interior pages would copy whole rows), this is
the fastest for both appends and tail reads, with one session or many interleaved.
Limits: 2**32 records per session and 2**31 - 1 session rows.

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

from .errors import IncompatibleSchema

if TYPE_CHECKING:
    import sqlite_utils

__all__ = ["LATEST_VERSION", "MIGRATIONS", "Migration", "migrate", "schema_version"]

VERSION_TABLE = "chatkeep_schema"


@dataclass(frozen=True)
class Migration:
    """One step of the schema: ``apply`` runs inside the migrating transaction."""

    version: int
    description: str
    apply: Callable[[sqlite_utils.Database], None]


def _create_v1(db: sqlite_utils.Database) -> None:
    # Only db.execute is used: sqlite-utils' table helpers commit on their own in 3.x, which
    # would end the BEGIN IMMEDIATE transaction that keeps concurrent first opens safe.
    db.execute(
        """CREATE TABLE chatkeep_sessions (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL UNIQUE,
            length INTEGER NOT NULL,
            expires_at REAL
        )"""
    )
    # Partial: sessions without a ttl never enter the index the lazy purge walks.
    db.execute(
        "CREATE INDEX chatkeep_sessions_expires_at ON chatkeep_sessions (expires_at) "
        "WHERE expires_at IS NOT NULL"
    )
    db.execute(
        """CREATE TABLE chatkeep_records (
            id INTEGER PRIMARY KEY,
            session INTEGER NOT NULL,
            record_id TEXT NOT NULL,
            data BLOB NOT NULL
        )"""
    )
    db.execute(
        "CREATE UNIQUE INDEX chatkeep_records_record_id ON chatkeep_records (session, record_id)"
    )


MIGRATIONS: tuple[Migration, ...] = (Migration(1, "sessions and records tables", _create_v1),)
LATEST_VERSION = MIGRATIONS[-1].version


def schema_version(conn: sqlite3.Connection) -> int:
    """The newest migration applied to the database behind ``conn`` (0 for a new file)."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (VERSION_TABLE,)
    ).fetchone()
    if exists is None:
        return 0
    row = conn.execute(f"SELECT max(version) FROM {VERSION_TABLE}").fetchone()  # noqa: S608
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
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} ("
            "version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at REAL NOT NULL)"
        )
        # Re-read under the write lock: another process may have migrated meanwhile.
        current = schema_version(conn)
        _check_not_newer(current, latest, label)
        for migration in migrations:
            if migration.version > current:
                migration.apply(db)
                conn.execute(
                    f"INSERT INTO {VERSION_TABLE} VALUES (?, ?, ?)",  # noqa: S608
                    (migration.version, migration.description, time.time()),
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
