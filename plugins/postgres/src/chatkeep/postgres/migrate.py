"""Versioned schema migrations, applied once under a transaction-scoped advisory lock.

Many processes may start at once against an empty database: each checks the recorded
version without locking (the common, already-migrated case costs one query), and only when
something is missing takes ``pg_advisory_xact_lock`` for the schema, re-reads the applied
versions and applies what is still missing, all in one transaction. Latecomers wait on the
lock, then find nothing to do. DDL is transactional in PostgreSQL, so a failed migration
leaves nothing half-applied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from chatkeep.core import ChatkeepError

from . import sql as pgsql
from .fulltext_sql import migration_5, migration_6
from .layout import TABLES, Names

__all__ = [
    "LATEST_VERSION",
    "MIGRATIONS",
    "MIN_READABLE_VERSION",
    "Migration",
    "SchemaNotReady",
    "applied_version",
    "ensure_schema",
    "migration_script",
    "readable_version",
]


@dataclass(frozen=True)
class Migration:
    """One schema version: its number, a description and the statements that apply it."""

    version: int
    description: str
    statements: Callable[[Names, object], list[sql.Composed]]


#: Every migration in order. Append new ones; never edit one that has shipped.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1, "sessions, records, messages view, append/delete/purge functions", pgsql.migration_1
    ),
    Migration(
        2, "append refuses a record id stored with other data (RecordConflict)", pgsql.migration_2
    ),
    Migration(3, "append_if: conditional appends (AppendConflict)", pgsql.migration_3),
    Migration(
        4,
        "sessions.updated_at kept by a retry that stores nothing, and indexed (recent)",
        pgsql.migration_4,
    ),
    Migration(5, "fulltext: each record's words, GIN-indexed, and a backlog", migration_5),
    Migration(6, "fulltext: no md5(record_id) unique key, a session index", migration_6),
)
#: The version a store brings its schema to.
LATEST_VERSION = MIGRATIONS[-1].version
#: The oldest version a read-only handle reads: the tables it reads have not changed since.
MIN_READABLE_VERSION = 1


class SchemaNotReady(ChatkeepError, RuntimeError):
    """The database lacks chatkeep's tables (or an older version) and ``migrate=False``.

    Apply the migrations first: open the store once with ``migrate=True`` (the default) as a
    role allowed to create tables, or run ``chatkeep.postgres.migration_script()`` as a DBA.
    """


def applied_version(conn: psycopg.Connection[Any], names: Names) -> int:
    """The highest migration version recorded in the schema, 0 when none."""
    if not _exists(conn, names.migrations_table.as_string(conn)):
        return 0
    found = conn.execute(pgsql.applied_version(names)).fetchone()
    return int(found[0]) if found else 0


def readable_version(conn: psycopg.Connection[Any], names: Names) -> int:
    """For a read-only handle (which never migrates): the schema's version, or 0 when the
    database has no chatkeep tables there (a store that reads as empty).

    Raises :class:`SchemaNotReady` for a version too old to read, or a schema whose
    migrations table is there but whose tables are not (half-dropped by hand).
    """
    version = applied_version(conn, names)
    if version == 0:
        return 0
    missing = [table for table in TABLES if not _exists(conn, names(table).as_string(conn))]
    if version < MIN_READABLE_VERSION or missing:
        what = f"lack the tables {', '.join(missing)}" if missing else f"are at version {version}"
        raise SchemaNotReady(
            f"chatkeep's tables in schema {names.schema!r} (prefix {names.prefix!r}) {what}; "
            f"a read-only handle needs version {MIN_READABLE_VERSION} or later: run the "
            "migrations (open the store once without mode=ro, or run migration_script())"
        )
    return version


def _exists(conn: psycopg.Connection[Any], qualified: str) -> bool:
    row = conn.execute(pgsql.RELATION_EXISTS, (qualified,)).fetchone()
    return bool(row is not None and row[0])


def _create_bookkeeping(conn: psycopg.Connection[Any], names: Names) -> None:
    exists = conn.execute(pgsql.SCHEMA_EXISTS, (names.schema,)).fetchone()
    if exists is None:
        # Only when missing: CREATE SCHEMA IF NOT EXISTS still needs CREATE on the database,
        # which managed services often withhold from application roles.
        conn.execute(pgsql.create_schema(names))
    conn.execute(pgsql.create_migrations_table(names))


def ensure_schema(conn: psycopg.Connection[Any], names: Names, *, migrate: bool) -> int:
    """Bring the schema to :data:`LATEST_VERSION`; return the
    number of migrations applied by this call (0 when another process did them).

    ``conn`` must not be in a transaction. Raises :class:`SchemaNotReady` when migrations
    are pending and ``migrate`` is false.
    """
    conn.autocommit = True
    if applied_version(conn, names) >= LATEST_VERSION:
        return 0
    if not migrate:
        raise SchemaNotReady(
            f"chatkeep's tables in schema {names.schema!r} (prefix {names.prefix!r}) are "
            f"missing or older than version {LATEST_VERSION}, and migrate=False; apply the "
            "migrations (open once with migrate=True, or run migration_script())"
        )
    applied_now = 0
    with conn.transaction():
        conn.execute(pgsql.MIGRATION_LOCK, (names.lock_key,))
        _create_bookkeeping(conn, names)
        done = {int(row[0]) for row in conn.execute(pgsql.applied_versions(names))}
        for migration in MIGRATIONS:
            if migration.version in done:
                continue
            for statement in migration.statements(names, conn):
                conn.execute(statement)
            conn.execute(pgsql.record_migration(names), (migration.version, migration.description))
            applied_now += 1
    return applied_now


def migration_script(
    conn: psycopg.Connection[Any], schema: str = "chatkeep", table_prefix: str = ""
) -> str:
    """The SQL a DBA can review and run by hand to create the latest schema.

    ``conn`` is only used for quoting rules. Example::

        with psycopg.connect(dsn) as conn:
            print(migration_script(conn, schema="chat"))
    """
    from .config import check_identifier

    names = Names(
        check_identifier(schema, "schema"), check_identifier(table_prefix, "table_prefix")
    )
    lines = [
        "BEGIN;",
        pgsql.migration_lock_literal(names).as_string(conn) + ";",
        pgsql.create_schema(names, if_not_exists=True).as_string(conn) + ";",
        pgsql.create_migrations_table(names).as_string(conn) + ";",
    ]
    for migration in MIGRATIONS:
        lines.append(f"-- migration {migration.version}: {migration.description}")
        lines.extend(
            statement.as_string(conn).strip().rstrip(";") + ";"
            for statement in migration.statements(names, conn)
        )
        record = pgsql.record_migration_literal(names, migration.version, migration.description)
        lines.append(record.as_string(conn) + ";")
    lines.append("COMMIT;")
    return "\n".join(lines) + "\n"
