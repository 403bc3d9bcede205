"""Schema migrations: applied exactly once, even when many processes start together."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from chatkeep_postgres_support import with_query
from psycopg import sql

from chatkeep.core import ChatkeepError, Record
from chatkeep.postgres import LATEST_VERSION, PostgresStore, SchemaNotReady, migration_script
from chatkeep.postgres.migrate import MIGRATIONS

Admin = psycopg.Connection[Any]


def applied(admin: Admin, schema: str, prefix: str = "") -> list[tuple[int, Any]]:
    table = sql.Identifier(schema, prefix + "schema_migrations")
    query = sql.SQL("SELECT version, applied_at FROM {} ORDER BY version").format(table)
    return [(int(version), at) for version, at in admin.execute(query)]


def test_versions_are_numbered_in_order() -> None:
    versions = [migration.version for migration in MIGRATIONS]
    assert versions == list(range(1, len(versions) + 1))
    assert versions[-1] == LATEST_VERSION


def test_four_processes_on_a_fresh_schema_migrate_exactly_once(
    postgres_url: str, fresh_schema: str, admin: Admin
) -> None:
    from chatkeep_postgres_support import migrate_then_append, run_in_processes

    url = with_query(postgres_url, schema=fresh_schema)
    counts = run_in_processes(migrate_then_append, [(url, index) for index in range(4)])
    assert sorted(counts) == [0, 0, 0, LATEST_VERSION]  # one process did it all
    assert [version for version, _ in applied(admin, fresh_schema)] == [
        migration.version for migration in MIGRATIONS
    ]
    with PostgresStore(url) as store:
        ids = {record.id for record in store.read("shared")}
    assert ids == {f"p{index}-{n}" for index in range(4) for n in range(3)}


def test_four_processes_migrating_on_first_use(
    postgres_url: str, fresh_schema: str, admin: Admin
) -> None:
    from chatkeep_postgres_support import first_use_appends, run_in_processes

    url = with_query(postgres_url, schema=fresh_schema, table_prefix="race_")
    run_in_processes(first_use_appends, [(url, index) for index in range(4)])
    assert len(applied(admin, fresh_schema, "race_")) == LATEST_VERSION
    with PostgresStore(url) as store:
        assert sorted(record.id for record in store.read("shared")) == ["q0", "q1", "q2", "q3"]


def test_reopening_does_not_migrate_again(
    postgres_url: str, fresh_schema: str, admin: Admin
) -> None:
    url = with_query(postgres_url, schema=fresh_schema)
    with PostgresStore(url) as first:
        assert first.migrate() == LATEST_VERSION
        first.append("s", [Record("m", b"")])
    before = applied(admin, fresh_schema)
    time.sleep(0.01)
    with PostgresStore(url) as second:
        assert second.migrate() == 0
        assert second.read("s") == [Record("m", b"")]
    assert applied(admin, fresh_schema) == before


def test_migrate_false_requires_the_schema(postgres_url: str, fresh_schema: str) -> None:
    url = with_query(postgres_url, schema=fresh_schema, migrate="false")
    with PostgresStore(url) as store, pytest.raises(SchemaNotReady) as caught:
        store.read("s")
    assert isinstance(caught.value, ChatkeepError)
    assert fresh_schema in str(caught.value)
    with PostgresStore(url) as store:
        assert store.migrate() == LATEST_VERSION  # an explicit migrate() still may
    with PostgresStore(url) as store:
        store.append("s", [Record("m", b"")])
        assert store.read("s") == [Record("m", b"")]


def test_migration_script_builds_a_working_schema(
    postgres_url: str, fresh_schema: str, admin: Admin
) -> None:
    script = migration_script(admin, schema=fresh_schema, table_prefix="dba_")
    assert "BEGIN;" in script and "COMMIT;" in script
    admin.execute(script.encode())  # what a DBA would feed to psql
    assert len(applied(admin, fresh_schema, "dba_")) == LATEST_VERSION
    url = with_query(postgres_url, schema=fresh_schema, table_prefix="dba_", migrate="false")
    with PostgresStore(url) as store:
        store.append("s", [Record("m", b"{}")])
        assert store.read("s") == [Record("m", b"{}")]
    with pytest.raises(ValueError):
        migration_script(admin, schema="Robert'); DROP TABLE x;--")


def test_existing_schema_without_create_privilege_is_fine(
    postgres_url: str, fresh_schema: str, admin: Admin
) -> None:
    """On managed services the app role may lack CREATE on the database; a schema made for
    it by a DBA (with CREATE on that schema) is enough."""
    role = fresh_schema + "_app"
    admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        admin.execute(
            sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
                sql.Identifier(fresh_schema), sql.Identifier(role)
            )
        )
        dbname = admin.info.dbname
        admin.execute(
            sql.SQL("REVOKE CREATE ON DATABASE {} FROM PUBLIC").format(sql.Identifier(dbname))
        )
        try:
            host = postgres_url.split("@", 1)[1] if "@" in postgres_url else "127.0.0.1/test"
            url = with_query(f"postgresql://{role}@{host}", schema=fresh_schema)
            with PostgresStore(url) as store:
                store.append("s", [Record("m", b"")])
                assert store.read("s") == [Record("m", b"")]
        finally:
            admin.execute(
                sql.SQL("GRANT CREATE ON DATABASE {} TO PUBLIC").format(sql.Identifier(dbname))
            )
    finally:
        admin.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(fresh_schema))
        )
        admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
