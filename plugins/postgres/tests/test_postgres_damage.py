"""Damage behind the store's back is reported, contained and never silent (DESIGN section 10).

A DBA (or a bad script) deletes a record's row or raises a session's stored length; every
read covering the hole raises ``CorruptRecord`` naming the session and the missing position,
the records before it still read back, and the session stays appendable.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from psycopg import sql

from chatkeep.core import CorruptRecord, Record, StoreUnavailable
from chatkeep.postgres import PostgresStore

Admin = psycopg.Connection[tuple[Any, ...]]

RECORDS = [Record(f"m{n}", f"data {n}".encode()) for n in range(6)]


def fill(store: PostgresStore, sid: str) -> None:
    for record in RECORDS:
        store.append(sid, [record])


def delete_row(admin: Admin, schema: str, sid: str, position: int) -> None:
    admin.execute(
        sql.SQL("DELETE FROM {} WHERE session_id = %s AND seq = %s").format(
            sql.Identifier(schema, "records")
        ),
        (sid, position),
    )


def raise_length(admin: Admin, schema: str, sid: str, by: int) -> None:
    admin.execute(
        sql.SQL("UPDATE {} SET length = length + %s WHERE session_id = %s").format(
            sql.Identifier(schema, "sessions")
        ),
        (by, sid),
    )


def corrupt_position(call: Any) -> int:
    with pytest.raises(CorruptRecord) as caught:
        call()
    return caught.value.position


def test_a_deleted_middle_row_is_reported_not_skipped(
    store: PostgresStore, sid: str, admin: Admin, pg_schema: str
) -> None:
    fill(store, sid)
    delete_row(admin, pg_schema, sid, 3)
    with pytest.raises(CorruptRecord) as caught:
        store.read(sid)
    assert caught.value.session_id == sid
    assert caught.value.position == 3
    assert sid in str(caught.value) and "3" in str(caught.value)
    # Every slice covering the hole says so; slices beside it read normally.
    assert corrupt_position(lambda: store.read(sid, 2, 5)) == 3
    assert corrupt_position(lambda: store.read(sid, -3)) == 3
    assert store.read(sid, 0, 3) == RECORDS[:3]
    assert store.read(sid, -2) == RECORDS[4:]
    assert store.read(sid, 4, 4) == []
    # Still appendable; the damage stays reported.
    extra = Record("after", b"after the damage")
    store.append(sid, [extra])
    assert store.read(sid, -1) == [extra]
    assert corrupt_position(lambda: store.read(sid)) == 3


def test_a_length_above_the_rows_is_reported(
    store: PostgresStore, sid: str, admin: Admin, pg_schema: str
) -> None:
    fill(store, sid)
    raise_length(admin, pg_schema, sid, 2)
    assert corrupt_position(lambda: store.read(sid)) == 6
    assert corrupt_position(lambda: store.read(sid, -1)) == 7  # the whole slice is missing
    assert store.read(sid, 0, 6) == RECORDS
    extra = Record("after", b"")
    store.append(sid, [extra])
    assert store.read(sid, -1) == [extra]
    assert corrupt_position(lambda: store.read(sid, -3)) == 6


def test_a_session_whose_rows_are_all_gone_is_not_empty(
    store: PostgresStore, sid: str, admin: Admin, pg_schema: str
) -> None:
    fill(store, sid)
    admin.execute(
        sql.SQL("DELETE FROM {} WHERE session_id = %s").format(
            sql.Identifier(pg_schema, "records")
        ),
        (sid,),
    )
    assert corrupt_position(lambda: store.read(sid)) == 0
    assert corrupt_position(lambda: store.read(sid, -2)) == 4


def test_async_reads_report_the_same_damage(
    store: PostgresStore, sid: str, admin: Admin, pg_schema: str
) -> None:
    fill(store, sid)
    delete_row(admin, pg_schema, sid, 1)

    async def scenario() -> tuple[int, list[Record]]:
        with pytest.raises(CorruptRecord) as caught:
            await store.aread(sid)
        return caught.value.position, await store.aread(sid, 0, 1)

    position, before = asyncio.run(scenario())
    assert position == 1
    assert before == RECORDS[:1]


def test_the_damage_hook_produces_each_kind(store: PostgresStore, sid: str) -> None:
    fill(store, sid)
    store.chatkeep_damage(sid, 1, "garbage")
    store.chatkeep_damage(sid, 2, "truncated")
    store.chatkeep_damage(sid, 4, "missing")
    assert store.read(sid, 0, 3) == [
        RECORDS[0],
        Record("m1", b"\xfe\x00\x01\x02"),
        Record("m2", RECORDS[2].data[:-3]),
    ]
    assert corrupt_position(lambda: store.read(sid)) == 4
    with pytest.raises(NotImplementedError):
        store.chatkeep_damage(sid, 0, "scrambled")
    with pytest.raises(IndexError):
        store.chatkeep_damage(sid, 4, "missing")  # already gone
    with pytest.raises(IndexError):
        store.chatkeep_damage("s-no-such-session", 0, "garbage")


def test_storage_contains_sees_data_and_ids_of_live_rows(store: PostgresStore, sid: str) -> None:
    store.append(sid, [Record("rid-4f1c9a", b"payload-9b2e77")])
    assert store.chatkeep_storage_contains(b"payload-9b2e77")
    assert store.chatkeep_storage_contains(b"rid-4f1c9a")
    assert store.chatkeep_storage_contains(sid.encode())
    assert not store.chatkeep_storage_contains(b"never-written-3c0d")
    store.delete(sid)
    assert not store.chatkeep_storage_contains(b"payload-9b2e77")
    assert not store.chatkeep_storage_contains(sid.encode())


def test_a_log_changing_under_the_check_is_read_again(
    store: PostgresStore, sid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fault injection: the first reply comes back one record short (as if damaged), but by
    # the time the positions are checked nothing is missing (a repair in between). The
    # store must read again, not report damage that is no longer there.
    fill(store, sid)
    run = store._run
    calls: list[str] = []

    def short_first_reply(call: Any, statement: str, *args: Any) -> list[Any]:
        calls.append(statement)
        rows = run(call, statement, *args)
        return rows[:-1] if statement == "read" and len(calls) == 1 else rows

    monkeypatch.setattr(store, "_run", short_first_reply)
    assert store.read(sid) == RECORDS
    assert calls == ["read", "read_positions", "read"]


def test_a_log_that_never_settles_is_unavailable(
    store: PostgresStore, sid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(store, sid)
    run = store._run

    def always_short(call: Any, statement: str, *args: Any) -> list[Any]:
        rows = run(call, statement, *args)
        return rows[:-1] if statement == "read" else rows

    monkeypatch.setattr(store, "_run", always_short)
    with pytest.raises(StoreUnavailable, match="retry the read"):
        store.read(sid)
