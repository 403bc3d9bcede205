"""The append's array parameters (chatkeep.postgres.arrays) against a real server: what the
store's own dumpers send is what psycopg's generic array dumper sends, and the server reads
it back unchanged."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from psycopg.adapt import PyFormat, Transformer

from chatkeep.core import Record
from chatkeep.postgres import PostgresStore
from chatkeep.postgres.arrays import ByteaArray, TextArray, register

IDS = [
    ["m1", "m2"],
    [],
    ["é", "日本語", "emoji 🙂", "a" * 256],
    [f"id-{n}" for n in range(1000)],
]
DATA = [
    [b"{}", b"\x00\xff binary"],
    [],
    [b"", b"x" * 70_000],
    [bytes([n % 256]) * n for n in range(300)],
]


def _psycopg_dump(connection: psycopg.Connection[Any], value: list[Any]) -> bytes:
    transformer = Transformer(connection)
    dumper = transformer.get_dumper(value, PyFormat.BINARY)
    return bytes(dumper.dump(value) or b"")


@pytest.mark.parametrize("ids", IDS)
def test_text_array_is_byte_for_byte_psycopgs(postgres_url: str, ids: list[str]) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        register(connection)
        ours = Transformer(connection).get_dumper(TextArray(ids), PyFormat.BINARY)
        assert ours.oid == 1009  # text[]
        if ids:  # psycopg dumps an empty list as an untyped text-format literal
            assert bytes(ours.dump(TextArray(ids)) or b"") == _psycopg_dump(connection, ids)
        row = connection.cursor(binary=True).execute("SELECT %s::text[]", (TextArray(ids),))
        assert row.fetchone() == (ids,)


@pytest.mark.parametrize("data", DATA)
def test_bytea_array_is_byte_for_byte_psycopgs(postgres_url: str, data: list[bytes]) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        register(connection)
        ours = Transformer(connection).get_dumper(ByteaArray(data), PyFormat.BINARY)
        assert ours.oid == 1001  # bytea[]
        if data:
            assert bytes(ours.dump(ByteaArray(data)) or b"") == _psycopg_dump(connection, data)
        row = connection.cursor(binary=True).execute("SELECT %s::bytea[]", (ByteaArray(data),))
        assert row.fetchone() == (data,)


def test_text_array_follows_the_client_encoding(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("SET client_encoding TO 'LATIN1'")
        register(connection)
        row = connection.cursor(binary=True).execute("SELECT %s::text[]", (TextArray(["é"]),))
        assert row.fetchone() == (["é"],)


def test_nul_in_text_is_refused_by_the_server(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        register(connection)
        with pytest.raises(psycopg.DataError):
            connection.cursor(binary=True).execute("SELECT %s::text[]", (TextArray(["a\x00b"]),))


def test_backend_append_takes_bytearray_and_memoryview(store: PostgresStore, sid: str) -> None:
    records: list[Any] = [Record("a", bytearray(b"one")), Record("b", memoryview(b"two"))]
    store.append(sid, records)
    assert store.read(sid) == [Record("a", b"one"), Record("b", b"two")]
    assert all(type(record.data) is bytes for record in store.read(sid))


def test_async_append_uses_the_same_arrays(store: PostgresStore, sid: str) -> None:
    async def main() -> list[Record]:
        await store.aappend(sid, [Record("é1", b"x"), Record("日本", b"\x00")])
        return await store.aread(sid)

    assert asyncio.run(main()) == [Record("é1", b"x"), Record("日本", b"\x00")]
