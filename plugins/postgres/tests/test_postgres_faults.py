"""Failure behaviour against a real server: backends killed mid-transaction, servers that
are gone, statement timeouts, and credentials that must never show up anywhere."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from chatkeep_postgres_support import with_query
from psycopg import sql

from chatkeep.core import Record, StoreUnavailable, open_store
from chatkeep.postgres import PostgresStore

Admin = psycopg.Connection[Any]
HOLD_KEY = 4_242_001  # advisory lock the test trigger waits on


@pytest.fixture
def held_store_url(postgres_url: str, fresh_schema: str, admin: Admin) -> Iterator[str]:
    """A migrated fresh schema whose ``records`` table has a test-only trigger: after an
    append has inserted its rows, it waits for advisory lock ``HOLD_KEY``, so the test can
    kill the backend while the append's transaction is open with its rows written."""
    url = with_query(postgres_url, schema=fresh_schema)
    with PostgresStore(url) as store:
        store.migrate()
    admin.execute(
        sql.SQL(
            "CREATE FUNCTION {}() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN PERFORM pg_advisory_xact_lock_shared({}); RETURN NULL; END $$"
        ).format(sql.Identifier(fresh_schema, "hold"), sql.Literal(HOLD_KEY))
    )
    admin.execute(
        sql.SQL(
            "CREATE TRIGGER hold AFTER INSERT ON {} FOR EACH STATEMENT EXECUTE FUNCTION {}()"
        ).format(sql.Identifier(fresh_schema, "records"), sql.Identifier(fresh_schema, "hold"))
    )
    yield url


def waiting_backend(admin: Admin, application_name: str, exclude: set[int]) -> int:
    """The pid of the store's backend waiting on the hold lock (not one of ``exclude``)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        row = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
            " AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
            " AND NOT (pid = ANY(%s))",
            (application_name, list(exclude)),
        ).fetchone()
        if row:
            return int(row[0])
        time.sleep(0.02)
    pytest.fail("the append never reached the hold trigger")


def session_rows(admin: Admin, schema: str, session_id: str) -> list[tuple[int, str]]:
    query = sql.SQL("SELECT seq, record_id FROM {} WHERE session_id = %s ORDER BY seq")
    return [
        (int(seq), str(record_id))
        for seq, record_id in admin.execute(
            query.format(sql.Identifier(schema, "records")), (session_id,)
        )
    ]


def kill_mid_append(admin: Admin, schema: str, session_id: str, app: str) -> int:
    """Wait for the append to block inside its transaction (rows inserted, not committed),
    check that nothing of it is visible, then terminate that backend. Returns its pid."""
    pid = waiting_backend(admin, app, set())
    locked = admin.execute(
        "SELECT count(*) FROM pg_locks WHERE pid = %s AND mode = 'RowExclusiveLock'"
        " AND relation = %s::regclass",
        (pid, sql.Identifier(schema, "records").as_string(admin)),
    ).fetchone()
    assert locked == (1,), "the append had not written its rows yet"
    assert [rid for _, rid in session_rows(admin, schema, session_id)] == ["before"]
    terminated = admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()
    assert terminated == (True,)
    return pid


def test_killed_mid_transaction_then_retried_lands_whole(
    held_store_url: str, fresh_schema: str, admin: Admin
) -> None:
    app = "ck-kill-" + uuid.uuid4().hex[:8]
    session_id = "s-" + uuid.uuid4().hex
    records = [Record(f"m{n}", b"%d" % n) for n in range(5)]
    errors: list[BaseException] = []
    with PostgresStore(with_query(held_store_url, application_name=app), retries=3) as store:
        store.append(session_id, [Record("before", b"")])
        admin.execute("SELECT pg_advisory_lock(%s)", (HOLD_KEY,))
        try:

            def append() -> None:
                try:
                    store.append(session_id, records)
                except BaseException as exc:
                    errors.append(exc)

            thread = threading.Thread(target=append)
            thread.start()
            killed = kill_mid_append(admin, fresh_schema, session_id, app)
            waiting_backend(admin, app, {killed})  # the store's automatic retry
        finally:
            admin.execute("SELECT pg_advisory_unlock(%s)", (HOLD_KEY,))
        thread.join(30)
        assert not errors
        assert store.read(session_id) == [Record("before", b""), *records]
    rows = session_rows(admin, fresh_schema, session_id)
    assert rows == list(enumerate(["before", "m0", "m1", "m2", "m3", "m4"]))


def test_killed_mid_transaction_without_retries_leaves_nothing(
    held_store_url: str, fresh_schema: str, admin: Admin
) -> None:
    app = "ck-kill-" + uuid.uuid4().hex[:8]
    session_id = "s-" + uuid.uuid4().hex
    records = [Record(f"m{n}", b"%d" % n) for n in range(5)]
    errors: list[BaseException] = []
    with PostgresStore(with_query(held_store_url, application_name=app), retries=0) as store:
        store.append(session_id, [Record("before", b"")])
        admin.execute("SELECT pg_advisory_lock(%s)", (HOLD_KEY,))
        try:

            def append() -> None:
                try:
                    store.append(session_id, records)
                except BaseException as exc:
                    errors.append(exc)

            thread = threading.Thread(target=append)
            thread.start()
            kill_mid_append(admin, fresh_schema, session_id, app)
            thread.join(30)
        finally:
            admin.execute("SELECT pg_advisory_unlock(%s)", (HOLD_KEY,))
        assert len(errors) == 1 and isinstance(errors[0], StoreUnavailable)
        assert "retrying the same append is safe" in str(errors[0])
        # Fully absent: not one of the five records, and the length did not move.
        assert store.read(session_id) == [Record("before", b"")]
        assert session_rows(admin, fresh_schema, session_id) == [(0, "before")]
        store.append(session_id, records)  # the caller's retry completes it, exactly once
        store.append(session_id, records)
        assert store.read(session_id) == [Record("before", b""), *records]
    assert [seq for seq, _ in session_rows(admin, fresh_schema, session_id)] == list(range(6))


def test_async_killed_mid_transaction_then_retried_lands_whole(
    held_store_url: str, fresh_schema: str, admin: Admin
) -> None:
    app = "ck-kill-" + uuid.uuid4().hex[:8]
    session_id = "s-" + uuid.uuid4().hex
    records = [Record(f"m{n}", b"%d" % n) for n in range(5)]

    async def scenario() -> list[Record]:
        async with PostgresStore(with_query(held_store_url, application_name=app)) as store:
            await store.aappend(session_id, [Record("before", b"")])
            admin.execute("SELECT pg_advisory_lock(%s)", (HOLD_KEY,))
            try:
                task = asyncio.ensure_future(store.aappend(session_id, records))
                killed = await asyncio.to_thread(
                    kill_mid_append, admin, fresh_schema, session_id, app
                )
                await asyncio.to_thread(waiting_backend, admin, app, {killed})
            finally:
                admin.execute("SELECT pg_advisory_unlock(%s)", (HOLD_KEY,))
            await asyncio.wait_for(task, 30)
            return await store.aread(session_id)

    assert asyncio.run(scenario()) == [Record("before", b""), *records]
    assert [seq for seq, _ in session_rows(admin, fresh_schema, session_id)] == list(range(6))


def test_recovers_when_every_pooled_connection_was_killed(pg_store_url: str, admin: Admin) -> None:
    app = "ck-restart-" + uuid.uuid4().hex[:8]
    session_id = "s-" + uuid.uuid4().hex
    with PostgresStore(with_query(pg_store_url, application_name=app), pool_min_size=3) as store:
        store.append(session_id, [Record("a", b"")])
        time.sleep(0.3)  # let the pool fill up
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (app,),
        )
        store.append(session_id, [Record("b", b"")])  # a restart-like outage is absorbed
        assert [record.id for record in store.read(session_id)] == ["a", "b"]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


SECRET = "Sup3r-s3cret-pa55"


def assert_no_secret(error: BaseException, *extra: object) -> None:
    rendered = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    for text in (str(error), repr(error), rendered, *map(repr, extra), *map(str, extra)):
        assert SECRET not in text
        assert SECRET.replace("-", "%2D") not in text


@pytest.mark.parametrize("quoted", [False, True])
def test_server_gone_raises_store_unavailable_without_the_password(quoted: bool) -> None:
    password = SECRET.replace("-", "%2D") if quoted else SECRET
    url = f"postgresql://app:{password}@127.0.0.1:{closed_port()}/db"
    store = PostgresStore(url, retries=2, connect_timeout=2)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as caught:
        store.append("s", [Record("m", b"")])
    elapsed = time.monotonic() - started
    assert elapsed < 10, "retries must be bounded"
    assert "3 attempts" in str(caught.value)
    assert "127.0.0.1" in str(caught.value)
    assert_no_secret(caught.value, store)
    for call in (lambda: store.read("s", -5), lambda: list(store.list_sessions())):
        with pytest.raises(StoreUnavailable) as again:
            call()
        assert_no_secret(again.value)
    store.close()


def test_server_gone_async_and_through_open_store() -> None:
    url = f"postgresql://app:{SECRET}@127.0.0.1:{closed_port()}/db?retries=1"
    wrapped = open_store(url)
    assert SECRET not in repr(wrapped)

    async def scenario() -> BaseException:
        with pytest.raises(StoreUnavailable) as caught:
            await wrapped.aread("s")
        return caught.value

    error = asyncio.run(scenario())
    assert_no_secret(error, wrapped, wrapped.backend)
    with pytest.raises(StoreUnavailable) as caught:
        wrapped.append("s", [("m", b"")])
    assert_no_secret(caught.value)
    wrapped.close()


def test_refused_login_is_reported_without_the_password(postgres_url: str) -> None:
    # Trust authentication accepts any password, so log in as an unknown role instead: the
    # server refuses it, and the password in the URL must still not surface.
    parts = urlsplit(postgres_url)
    host = parts.netloc.rpartition("@")[2]
    role = "no_such_role_" + uuid.uuid4().hex[:6]
    url = urlunsplit(parts._replace(netloc=f"{role}:{SECRET}@{host}"))
    with PostgresStore(url, retries=0) as store, pytest.raises(StoreUnavailable) as caught:
        store.read("s")
    assert role in str(caught.value) or "1 attempt" in str(caught.value)
    assert_no_secret(caught.value, store)


def test_statement_timeout_is_enforced_and_atomic(
    pg_store_url: str, postgres_url: str, pg_schema: str
) -> None:
    session_id = "s-" + uuid.uuid4().hex
    with (
        PostgresStore(pg_store_url, statement_timeout=0.3) as store,
        psycopg.connect(postgres_url) as locker,
    ):
        store.append(session_id, [Record("a", b"")])
        locker.execute(
            sql.SQL("SELECT 1 FROM {} WHERE session_id = %s FOR UPDATE").format(
                sql.Identifier(pg_schema, "sessions")
            ),
            (session_id,),
        )
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="statement timeout"):
            store.append(session_id, [Record("b", b""), Record("c", b"")])
        assert time.monotonic() - started < 3  # not retried: it would time out again
        locker.rollback()
        assert [record.id for record in store.read(session_id)] == ["a"]
