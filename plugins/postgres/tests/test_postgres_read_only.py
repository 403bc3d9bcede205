"""Read-only handles (``mode=ro``): never create, never migrate, never write.

What the CLI's ``sessions list/show/export`` open. The server enforces it too: the pool's
connections run read-only transactions.
"""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import psycopg
import pytest
from chatkeep_postgres_support import with_query
from psycopg import sql

from chatkeep.core import (
    CapabilityMissing,
    InvalidOption,
    Record,
    open_store,
)
from chatkeep.postgres import LATEST_VERSION, PostgresStore, SchemaNotReady
from chatkeep.postgres.faults import Call, ReadOnlyStore

Admin = psycopg.Connection[tuple[Any, ...]]


def schema_exists(admin: Admin, schema: str) -> bool:
    row = admin.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    return row is not None


def count_records(admin: Admin, schema: str, sid: str) -> int:
    row = admin.execute(
        sql.SQL("SELECT count(*) FROM {} WHERE session_id = %s").format(
            sql.Identifier(schema, "records")
        ),
        (sid,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_database_without_tables_reads_empty_and_stays_untouched(
    postgres_url: str, fresh_schema: str, admin: Admin
) -> None:
    with PostgresStore(postgres_url, schema=fresh_schema, mode="ro") as store:
        assert store.read("s") == []
        assert store.read("s", -5) == []
        assert list(store.list_sessions()) == []
        assert list(store.list_sessions("a")) == []
        assert store.chatkeep_durability() in ("power", "server")

        async def scenario() -> tuple[list[Record], list[str]]:
            return await store.aread("s"), [s async for s in store.alist_sessions()]

        assert asyncio.run(scenario()) == ([], [])
    assert not schema_exists(admin, fresh_schema), "a read-only handle created the schema"


def test_tables_created_later_are_seen(postgres_url: str, fresh_schema: str, sid: str) -> None:
    url = with_query(postgres_url, schema=fresh_schema)
    with PostgresStore(url, mode="ro") as reader:
        assert reader.read(sid) == []
        with PostgresStore(url) as writer:
            writer.append(sid, [Record("m", b"hello")])
        assert reader.read(sid) == [Record("m", b"hello")]
        assert list(reader.list_sessions()) == [sid]


def test_reads_what_a_writer_stored(pg_store_url: str, sid: str) -> None:
    records = [Record(f"m{n}", bytes([n]) * 10) for n in range(5)]
    with PostgresStore(pg_store_url) as writer:
        writer.append(sid, records)
    with PostgresStore(with_query(pg_store_url, mode="ro")) as reader:
        assert reader.read(sid) == records
        assert reader.read(sid, -2) == records[-2:]
        assert sid in set(reader.list_sessions(sid[:4]))
        assert "mode=ro" in repr(reader)


def test_namespaces_still_apply(pg_store_url: str, sid: str) -> None:
    with PostgresStore(pg_store_url, namespace="ro-tenant") as writer:
        writer.append(sid, [Record("m", b"tenant")])
    with PostgresStore(pg_store_url, mode="ro") as other:
        assert other.read(sid) == []
    with PostgresStore(pg_store_url, mode="ro", namespace="ro-tenant") as same:
        assert same.read(sid) == [Record("m", b"tenant")]


def test_every_write_is_refused_and_nothing_is_written(
    pg_store_url: str, pg_schema: str, sid: str, admin: Admin
) -> None:
    with PostgresStore(pg_store_url) as writer:
        writer.append(sid, [Record("a", b"")])
    reader = PostgresStore(pg_store_url, mode="ro")
    writes: dict[str, Any] = {
        "append": lambda: reader.append(sid, [Record("b", b"")]),
        "append_if": lambda: reader.append_if(sid, [Record("b", b"")], "a"),
        "delete": lambda: reader.delete(sid),
        "purge_expired": reader.purge_expired,
        "migrate": reader.migrate,
        "chatkeep_damage": lambda: reader.chatkeep_damage(sid, 0, "missing"),
        "aappend": lambda: asyncio.run(reader.aappend(sid, [Record("b", b"")])),
        "adelete": lambda: asyncio.run(reader.adelete(sid)),
    }
    for name, write in writes.items():
        with pytest.raises(ReadOnlyStore) as caught:
            write()
        assert isinstance(caught.value, CapabilityMissing), name
        assert "mode=ro" in str(caught.value), name
    assert reader.read(sid) == [Record("a", b"")]
    assert count_records(admin, pg_schema, sid) == 1
    reader.close()


def test_the_server_refuses_a_write_that_slips_past_the_handle(
    pg_store_url: str, pg_schema: str, sid: str, admin: Admin
) -> None:
    # Fault injection: call the append statement directly, past the handle's own check.
    # The connection's transactions are read-only, so the server refuses it.
    with PostgresStore(pg_store_url) as writer:
        writer.append(sid, [Record("a", b"")])
    with PostgresStore(pg_store_url, mode="ro") as reader:
        reader.read(sid)
        params = reader._append_params(sid, [Record("b", b"")])
        with pytest.raises(ReadOnlyStore):
            reader._run(Call("append", sid), "append", params)
    assert count_records(admin, pg_schema, sid) == 1


def test_through_open_store_with_the_url_spelling(pg_store_url: str, sid: str) -> None:
    with PostgresStore(pg_store_url) as writer:
        writer.append(sid, [Record("a", b"x")])
    store = open_store(with_query(pg_store_url, mode="ro"))
    try:
        assert store.read(sid) == [Record("a", b"x")]
        with pytest.raises(ReadOnlyStore):
            store.append(sid, [Record("b", b"y")])
    finally:
        store.close()


def test_an_older_schema_is_read_without_migrating(
    postgres_url: str, fresh_schema: str, sid: str, admin: Admin
) -> None:
    url = with_query(postgres_url, schema=fresh_schema)
    with PostgresStore(url) as writer:
        writer.append(sid, [Record("a", b"x")])
    migrations = sql.Identifier(fresh_schema, "schema_migrations")
    admin.execute(sql.SQL("DELETE FROM {} WHERE version > 1").format(migrations))
    with PostgresStore(url, mode="ro") as reader:
        assert reader.read(sid) == [Record("a", b"x")]
    row = admin.execute(sql.SQL("SELECT max(version) FROM {}").format(migrations)).fetchone()
    assert row == (1,), "a read-only handle migrated"
    assert LATEST_VERSION > 1


def test_a_half_dropped_schema_is_refused_with_the_way_out(
    postgres_url: str, fresh_schema: str, admin: Admin
) -> None:
    url = with_query(postgres_url, schema=fresh_schema)
    with PostgresStore(url) as writer:
        writer.append("s", [Record("a", b"x")])
    admin.execute(sql.SQL("DROP TABLE {} CASCADE").format(sql.Identifier(fresh_schema, "records")))
    with PostgresStore(url, mode="ro") as reader, pytest.raises(SchemaNotReady) as caught:
        reader.read("s")
    assert "records" in str(caught.value)
    assert "run the migrations" in str(caught.value)


@pytest.mark.parametrize("mode", ["rw", "RO", "", "readonly"])
def test_unknown_modes_are_refused(postgres_url: str, mode: str) -> None:
    with pytest.raises(InvalidOption, match="mode"):
        PostgresStore(postgres_url, mode=mode)
    with pytest.raises(InvalidOption, match="mode"):
        PostgresStore(with_query(postgres_url, mode=mode))


def test_mode_is_not_passed_to_libpq(postgres_url: str) -> None:
    store = PostgresStore(with_query(postgres_url, mode="ro"))
    assert store.options.mode == "ro" and store.options.read_only
    assert "mode" not in store._params
    assert "default_transaction_read_only=on" in store._params["options"]
    assert PostgresStore(postgres_url).options.mode == "rwc"


def test_the_error_survives_pickling() -> None:
    error = pickle.loads(pickle.dumps(ReadOnlyStore("append")))
    assert isinstance(error, ReadOnlyStore) and error.action == "append"
    from chatkeep.core import ReadOnlyStore as CoreReadOnlyStore

    assert isinstance(error, CoreReadOnlyStore) and error.operation == "append"
    assert str(error) == str(ReadOnlyStore("append"))
    assert "append is refused" in str(error)
