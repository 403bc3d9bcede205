"""The ``recent`` capability on PostgreSQL: migration 4 (updated_at kept by a no-op retry,
and indexed), applied to a schema left at version 3, read-only handles of one, the plan."""

from __future__ import annotations

import time
from typing import Any

import psycopg
from chatkeep_postgres_support import with_query
from psycopg import sql

from chatkeep.core import Record, Store, open_store
from chatkeep.core.metadata import list_session_infos
from chatkeep.postgres import LATEST_VERSION, PostgresStore
from chatkeep.postgres import sql as pgsql
from chatkeep.postgres.layout import Names
from chatkeep.postgres.migrate import MIGRATIONS

Admin = psycopg.Connection[Any]


def _ids(store: Store, prefix: str | None = None) -> list[str]:
    return [session_id for session_id, _ in store.recent_sessions(prefix)]


def _version_3(admin: Admin, schema: str) -> None:
    """The schema as chatkeep-postgres left it before migration 4."""
    names = Names(schema, "")
    with admin.transaction():
        admin.execute(pgsql.create_schema(names))
        admin.execute(pgsql.create_migrations_table(names))
        for migration in MIGRATIONS[:3]:
            for statement in migration.statements(names, admin):
                admin.execute(statement)
            admin.execute(pgsql.record_migration(names), (migration.version, migration.description))


def _updated(admin: Admin, schema: str, session_id: str) -> Any:
    query = sql.SQL("SELECT updated_at FROM {} WHERE session_id = %s").format(
        sql.Identifier(schema, "sessions")
    )
    row = admin.execute(query, (session_id,)).fetchone()
    return None if row is None else row[0]


def _versions(admin: Admin, schema: str) -> list[int]:
    query = sql.SQL("SELECT version FROM {} ORDER BY version").format(
        sql.Identifier(schema, "schema_migrations")
    )
    return [int(row[0]) for row in admin.execute(query)]


def _old_append(admin: Admin, schema: str, session_id: str, record_id: str) -> None:
    """An append through version 3's function (what an old deployment still runs)."""
    function = sql.Identifier(schema, "append")
    admin.execute(
        sql.SQL("SELECT {}('', %s, %s::text[], %s::bytea[], NULL::interval)").format(function),
        (session_id, [record_id], [b"x"]),
    )


def test_a_version_3_schema_is_migrated(postgres_url: str, fresh_schema: str, admin: Admin) -> None:
    _version_3(admin, fresh_schema)
    for name in ("older", "newer"):
        _old_append(admin, fresh_schema, name, "r1")
        time.sleep(0.01)
    before = _updated(admin, fresh_schema, "older")
    _old_append(admin, fresh_schema, "older", "r1")  # version 3 moved updated_at on a retry
    assert _updated(admin, fresh_schema, "older") > before
    url = with_query(postgres_url, schema=fresh_schema)

    reader = open_store(f"{url}&mode=ro")  # never migrates: answers without the index
    assert reader.supports("recent")
    assert _ids(reader) == ["older", "newer"]
    assert [info.id for info in list_session_infos(reader)] == ["older", "newer"]
    reader.close()
    assert _versions(admin, fresh_schema) == [1, 2, 3]

    store = open_store(url)
    assert _ids(store) == ["older", "newer"]  # the existing times are kept
    assert _versions(admin, fresh_schema) == list(range(1, LATEST_VERSION + 1))
    moved = _updated(admin, fresh_schema, "newer")
    store.append("newer", [Record("r1", b"x")])  # a retry: version 4 keeps the time
    assert _updated(admin, fresh_schema, "newer") == moved
    assert _ids(store) == ["older", "newer"]
    store.append("newer", [Record("r1", b"x"), Record("r2", b"y")])
    assert _ids(store) == ["newer", "older"]
    index = admin.execute(
        "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND indexname = %s",
        (fresh_schema, "sessions_updated_idx"),
    ).fetchone()
    assert index is not None and "(namespace, updated_at, session_id)" in index[0]
    store.close()


def test_a_page_walks_the_index_backwards(store: PostgresStore, admin: Admin) -> None:
    for n in range(30):
        store.append(f"plan-{n}", [Record("r1", b"x")])
    store.recent_sessions(None, None, 5)  # the schema is there now
    statement, params = store._recent_params(None, (time.time(), ""), 10)
    queries = store._prepare()
    assert queries is not None
    with psycopg.connect(**store._params, autocommit=True) as conn:
        # A tiny table, whose statistics depend on what else ran: the planner may sort it
        # in memory. Make scans and sorts dear, so the plan shows whether the index can give
        # this order by itself (a sort would still appear if it could not).
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_sort = off")
        plan = "\n".join(
            row[0] for row in conn.execute(b"EXPLAIN " + getattr(queries, statement), params)
        )
    assert "Index Scan Backward using sessions_updated_idx" in plan, plan
    assert "Sort" not in plan, plan


def test_namespaces_keep_their_own_order(pg_store_url: str) -> None:
    first = open_store(f"{pg_store_url}&namespace=recent-a")
    second = open_store(f"{pg_store_url}&namespace=recent-b")
    first.append("x", [Record("r1", b"x")])
    second.append("y", [Record("r1", b"x")])
    first.append("z", [Record("r1", b"x")])
    assert _ids(first) == ["z", "x"]
    assert _ids(second) == ["y"]
    for store, names in ((first, ("x", "z")), (second, ("y",))):
        for name in names:
            store.delete(name)
        store.close()


def test_ties_are_by_id_descending_and_pages_split_them(
    postgres_url: str, fresh_schema: str, admin: Admin, monkeypatch: Any
) -> None:
    """Sessions whose last appends share one ``updated_at`` (the server's ``now()`` cannot
    be made to repeat from outside, so the test writes the tie into the table): newest
    first, ties by id descending, and keyset pages that end inside a tie go on after it."""
    import chatkeep.core.store as store_module

    store = open_store(with_query(postgres_url, schema=fresh_schema))
    names = ["a", "c", "b", "e", "d"]
    for name in names:
        store.append(name, [Record("r1", b"x")])
    store.append("newest", [Record("r1", b"x")])
    tie = sql.SQL(
        "UPDATE {} SET updated_at = now() - interval '1 hour' WHERE session_id <> 'newest'"
    ).format(sql.Identifier(fresh_schema, "sessions"))
    admin.execute(tie)
    expected = ["newest", "e", "d", "c", "b", "a"]
    assert _ids(store) == expected
    monkeypatch.setattr(store_module, "RECENT_PAGE", 2)  # page ends inside the tie
    assert _ids(store) == expected
    backend = store.backend
    assert isinstance(backend, PostgresStore)
    pairs = backend.recent_sessions(None, None, 100)
    (updated,) = {at for session_id, at in pairs if session_id != "newest"}
    after_c = backend.recent_sessions(None, (updated, "c"), 100)
    assert [session_id for session_id, _ in after_c] == ["b", "a"]
    store.close()
