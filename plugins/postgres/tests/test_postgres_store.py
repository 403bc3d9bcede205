"""Behaviour of PostgresStore against a real server: the hooks, positions, options, SQL view.

Sync tests call the sync methods; async tests drive ``aappend`` & co. on their own loop.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from typing import Any

import psycopg
import pytest
from chatkeep_postgres_support import with_query
from psycopg import sql

from chatkeep.core import Record, RecordConflict, backends, open_store
from chatkeep.postgres import PostgresStore
from chatkeep.postgres.plugin import CAPABILITIES

Admin = psycopg.Connection[Any]


def batch(prefix: str, count: int) -> list[Record]:
    return [Record(f"{prefix}{n}", f"{prefix}{n}".encode()) for n in range(count)]


def positions(admin: Admin, schema: str, session_id: str, table: str = "records") -> list[int]:
    query = sql.SQL("SELECT seq FROM {} WHERE session_id = %s ORDER BY seq").format(
        sql.Identifier(schema, table)
    )
    return [row[0] for row in admin.execute(query, (session_id,))]


def stored_length(admin: Admin, schema: str, session_id: str) -> int | None:
    row = admin.execute(
        sql.SQL("SELECT length FROM {} WHERE session_id = %s").format(
            sql.Identifier(schema, "sessions")
        ),
        (session_id,),
    ).fetchone()
    return None if row is None else int(row[0])


def assert_gap_free(admin: Admin, schema: str, session_id: str) -> int:
    """Positions are exactly 0..n-1 and the session row says n; returns n."""
    seqs = positions(admin, schema, session_id)
    assert seqs == list(range(len(seqs)))
    assert stored_length(admin, schema, session_id) == len(seqs)
    return len(seqs)


# -- the two hooks -------------------------------------------------------------------------


def test_round_trip_is_byte_exact(store: PostgresStore, sid: str) -> None:
    records = [
        Record("empty", b""),
        Record("all-bytes", bytes(range(256)) * 4),
        Record("nul-and-invalid-utf8", b"\x00\xff\xfe{\x00"),
        Record("json", json.dumps({"role": "user", "text": "h\u00e9llo \U0001f600"}).encode()),
        Record("large", bytes(range(251)) * 8000),  # ~2 MB, toasted
    ]
    store.append(sid, records)
    assert store.read(sid) == records
    assert all(type(record.data) is bytes for record in store.read(sid))


def test_unknown_session_reads_empty(store: PostgresStore) -> None:
    assert store.read("never-written-" + uuid.uuid4().hex) == []
    assert store.read("never-written-" + uuid.uuid4().hex, -5) == []


@pytest.mark.parametrize("length", [0, 1, 7])
def test_every_slice_matches_python(store: PostgresStore, sid: str, length: int) -> None:
    log = batch("r", length)
    if log:
        store.append(sid, log[:3])
        if length > 3:
            store.append(sid, log[3:])
    bounds: list[int | None] = [*range(-9, 10), None]
    for start in range(-9, 10):
        for stop in bounds:
            assert store.read(sid, start, stop) == log[start:stop], (start, stop)


def test_batches_stay_contiguous_and_ordered(store: PostgresStore, sid: str) -> None:
    store.append(sid, batch("a", 3))
    store.append(sid, batch("b", 2))
    assert [record.id for record in store.read(sid)] == ["a0", "a1", "a2", "b0", "b1"]
    assert [record.id for record in store.read(sid, -2)] == ["b0", "b1"]


def test_same_batch_retry_is_a_no_op(
    store: PostgresStore, sid: str, admin: Admin, pg_schema: str
) -> None:
    records = batch("m", 4)
    store.append(sid, records)
    store.append(sid, records)
    assert store.read(sid) == records
    assert assert_gap_free(admin, pg_schema, sid) == 4


def test_partly_stored_batch_keeps_positions_gap_free(
    store: PostgresStore, sid: str, admin: Admin, pg_schema: str
) -> None:
    store.append(sid, [Record("a", b"1"), Record("b", b"2")])
    # "b" and "a" were stored already: only x and y are new, and they must land at 2 and 3.
    store.append(sid, [Record("x", b"3"), Record("b", b"2"), Record("y", b"4"), Record("a", b"1")])
    assert store.read(sid) == [
        Record("a", b"1"),
        Record("b", b"2"),
        Record("x", b"3"),
        Record("y", b"4"),
    ]
    assert assert_gap_free(admin, pg_schema, sid) == 4
    assert store.read(sid, -2) == [Record("x", b"3"), Record("y", b"4")]
    # The same ids with other data: refused whole, the positions untouched.
    with pytest.raises(RecordConflict):
        store.append(sid, [Record("w", b"5"), Record("a", b"")])
    assert assert_gap_free(admin, pg_schema, sid) == 4
    store.append(sid, [Record("a", b"1"), Record("b", b"2")])  # nothing new at all
    assert assert_gap_free(admin, pg_schema, sid) == 4


def test_hostile_and_maximal_ids_stay_apart(store: PostgresStore) -> None:
    # 512 non-BMP characters (2 KiB of UTF-8) plus a 256-character non-BMP record id would
    # overflow a plain btree key on (session_id, record_id); the md5 index must cope.
    longest = "\U0001f600" * 256 + "".join(chr(0x10000 + n * 97) for n in range(256))
    long_record = "".join(chr(0x10FFFF - n * 13) for n in range(256))
    hostile = [
        longest,
        longest[:-1],
        "a;DROP TABLE records;--",
        "' OR '1'='1",
        "../../etc/passwd",
        "%",
        "_",
        "\\",
        " ",
        "\u00e9",
        "e\u0301",  # a different string that renders the same
        "tab\tnewline\n",
    ]
    for index, session_id in enumerate(hostile):
        store.append(session_id, [Record(long_record, b"%d" % index), Record("plain", b"p")])
    for index, session_id in enumerate(hostile):
        assert store.read(session_id) == [Record(long_record, b"%d" % index), Record("plain", b"p")]
    listed = set(store.list_sessions())
    assert set(hostile) <= listed


def test_threads_appending_to_one_session_all_survive(
    store: PostgresStore, sid: str, admin: Admin, pg_schema: str
) -> None:
    def worker(index: int) -> None:
        for number in range(15):
            store.append(sid, [Record(f"t{index}-{number}-{part}", b"") for part in range(3)])

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = [record.id for record in store.read(sid)]
    assert len(ids) == len(set(ids)) == 6 * 15 * 3
    for start in range(0, len(ids), 3):  # each batch contiguous and in order
        owner = ids[start].rsplit("-", 1)[0]
        assert ids[start : start + 3] == [f"{owner}-{part}" for part in range(3)]
    assert assert_gap_free(admin, pg_schema, sid) == len(ids)


def wait_for_waiters(admin: Admin, application_name: str, count: int) -> None:
    """Block until ``count`` backends of ``application_name`` wait on a lock."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE application_name = %s AND wait_event_type = 'Lock'",
            (application_name,),
        ).fetchone()
        if row and row[0] == count:
            return
        time.sleep(0.02)
    pytest.fail(f"{count} backends never queued on the lock")


def test_concurrent_retries_of_one_batch_land_once_without_gaps(
    pg_store_url: str, postgres_url: str, sid: str, admin: Admin, pg_schema: str
) -> None:
    """The race ON CONFLICT DO NOTHING alone gets wrong: several copies of one batch queue
    on the session lock; all but the first must skip every id and leave no hole."""
    app = "ck-race-" + uuid.uuid4().hex[:8]
    copies = 6
    records = batch("dup", 3)
    with (
        PostgresStore(with_query(pg_store_url, application_name=app)) as store,
        psycopg.connect(postgres_url) as locker,
    ):
        store.append(sid, [Record("first", b"0")])
        locker.execute(
            sql.SQL("SELECT 1 FROM {} WHERE session_id = %s FOR UPDATE").format(
                sql.Identifier(pg_schema, "sessions")
            ),
            (sid,),
        )
        threads = [
            threading.Thread(target=store.append, args=(sid, records)) for _ in range(copies)
        ]
        for thread in threads:
            thread.start()
        wait_for_waiters(admin, app, copies)
        locker.commit()
        for thread in threads:
            thread.join()
        assert store.read(sid) == [Record("first", b"0"), *records]
    assert assert_gap_free(admin, pg_schema, sid) == 4


def test_processes_appending_to_one_session_all_survive(
    pg_store_url: str, sid: str, admin: Admin, pg_schema: str
) -> None:
    from chatkeep_postgres_support import append_batches, run_in_processes

    run_in_processes(append_batches, [(pg_store_url, index, sid, 10) for index in range(4)])
    with PostgresStore(pg_store_url) as store:
        ids = [record.id for record in store.read(sid)]
    assert len(ids) == len(set(ids)) == 4 * 10 * 2
    for start in range(0, len(ids), 2):
        assert ids[start].endswith("-0") and ids[start + 1] == ids[start][:-1] + "1"
    assert_gap_free(admin, pg_schema, sid)


# -- optional hooks --------------------------------------------------------------------------


def test_delete_erases_everything(
    store: PostgresStore, sid: str, admin: Admin, pg_schema: str
) -> None:
    store.append(sid, batch("d", 3))
    store.delete(sid)
    assert store.read(sid) == []
    assert sid not in set(store.list_sessions(prefix=sid))
    assert positions(admin, pg_schema, sid) == []
    assert stored_length(admin, pg_schema, sid) is None
    store.append(sid, batch("d", 2))  # ids of an erased session are free again
    assert store.read(sid) == batch("d", 2)
    assert assert_gap_free(admin, pg_schema, sid) == 2
    store.delete("never-existed-" + uuid.uuid4().hex)  # no error


def test_list_sessions_pages_with_prefixes(pg_store_url: str) -> None:
    tag = "ls-" + uuid.uuid4().hex[:8] + "-"
    names = [tag + suffix for suffix in ["a", "b", "c", "d", "e", "f", "g", "%", "_x", "\\"]]
    names += [tag + "\U0010ffff", tag + "\U0010ffff\U0010ffff", tag + "\u00e9\U0001f600"]
    with PostgresStore(pg_store_url, list_page_size=3) as store:
        for name in names:
            store.append(name, [Record("m", b"")])
        store.append(tag[:-1], [Record("m", b"")])  # not under the prefix
        listing = store.list_sessions(prefix=tag)
        assert iter(listing) is listing  # a lazy generator, not a list
        assert list(listing) == sorted(names)  # code-point order, no duplicates, no misses
        assert list(store.list_sessions(prefix=tag + "%")) == [tag + "%"]
        assert list(store.list_sessions(prefix=tag + "_")) == [tag + "_x"]
        assert list(store.list_sessions(prefix=tag + "\\")) == [tag + "\\"]
        assert list(store.list_sessions(prefix=tag + "\U0010ffff")) == [
            tag + "\U0010ffff",
            tag + "\U0010ffff\U0010ffff",
        ]
        everything = list(store.list_sessions())
        assert set(names) | {tag[:-1]} <= set(everything)
        assert everything == sorted(everything)


def test_namespaces_isolate_tenants(pg_store_url: str, sid: str) -> None:
    with (
        PostgresStore(pg_store_url, namespace="tenant-a") as tenant_a,
        PostgresStore(with_query(pg_store_url, namespace="tenant-b")) as tenant_b,
    ):
        tenant_a.append(sid, [Record("m1", b"from a")])
        tenant_b.append(sid, [Record("m1", b"from b"), Record("m2", b"b only")])
        assert tenant_a.read(sid) == [Record("m1", b"from a")]
        assert tenant_b.read(sid, -1) == [Record("m2", b"b only")]
        assert list(tenant_a.list_sessions(prefix=sid)) == [sid]
        tenant_a.delete(sid)
        assert tenant_a.read(sid) == []
        assert len(tenant_b.read(sid)) == 2
        assert list(tenant_a.list_sessions(prefix=sid)) == []
        assert list(tenant_b.list_sessions(prefix=sid)) == [sid]


def test_table_prefix_keeps_tables_apart(
    pg_store_url: str, sid: str, admin: Admin, pg_schema: str
) -> None:
    with (
        PostgresStore(pg_store_url) as plain,
        PostgresStore(pg_store_url, table_prefix="app_") as prefixed,
    ):
        prefixed.append(sid, [Record("m", b"prefixed")])
        assert plain.read(sid) == []
        assert prefixed.read(sid) == [Record("m", b"prefixed")]
    assert positions(admin, pg_schema, sid, table="app_records") == [0]


def test_ttl_expires_sessions_and_purge_reclaims_them(
    pg_store_url: str, sid: str, admin: Admin, pg_schema: str
) -> None:
    with PostgresStore(pg_store_url, ttl=0.6) as store:
        store.append(sid, [Record("old", b"1")])
        assert store.read(sid) == [Record("old", b"1")]
        time.sleep(0.8)
        assert store.read(sid) == []
        assert list(store.list_sessions(prefix=sid)) == []
        view = sql.SQL("SELECT count(*) FROM {} WHERE session_id = %s").format(
            sql.Identifier(pg_schema, "messages")
        )
        assert admin.execute(view, (sid,)).fetchone() == (0,)
        # Appending to an expired session starts a new log: the old records never resurface.
        store.append(sid, [Record("old", b"again"), Record("new", b"2")])
        assert store.read(sid) == [Record("old", b"again"), Record("new", b"2")]
        assert assert_gap_free(admin, pg_schema, sid) == 2
        time.sleep(0.8)
        assert store.purge_expired() >= 1
        assert positions(admin, pg_schema, sid) == []
        assert stored_length(admin, pg_schema, sid) is None


def test_purge_respects_namespaces_and_live_sessions(
    pg_store_url: str, admin: Admin, pg_schema: str
) -> None:
    namespace = "purge-" + uuid.uuid4().hex[:8]
    with (
        PostgresStore(pg_store_url, namespace=namespace, ttl=3600) as mine,
        PostgresStore(pg_store_url, namespace=namespace + "-other", ttl=3600) as other,
    ):
        for name in ("dead-1", "dead-2", "alive"):
            mine.append(name, [Record("m", b"")])
        other.append("dead-1", [Record("m", b"")])
        admin.execute(
            sql.SQL(
                "UPDATE {} SET expires_at = now() - interval '1 second'"
                " WHERE namespace LIKE %s AND session_id LIKE 'dead-%%'"
            ).format(sql.Identifier(pg_schema, "sessions")),
            (namespace + "%",),
        )
        assert mine.purge_expired(batch_size=1) == 2  # loops over batches
        assert mine.read("alive") == [Record("m", b"")]
        assert other.read("dead-1") == []  # expired, but not purged: another namespace
        assert other.purge_expired(all_namespaces=True) >= 1
        rows = admin.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE namespace LIKE %s").format(
                sql.Identifier(pg_schema, "records")
            ),
            (namespace + "%",),
        ).fetchone()
        assert rows == (1,)


def test_close_is_idempotent_and_final(pg_store_url: str, sid: str) -> None:
    from chatkeep.core import StoreUnavailable

    store = PostgresStore(pg_store_url)
    store.append(sid, [Record("m", b"")])
    store.close()
    store.close()
    with pytest.raises(StoreUnavailable, match="closed"):
        store.read(sid)


# -- tail reads cost O(k) ------------------------------------------------------------------


def _buffers(plan: Any) -> int:
    node = plan[0]["Plan"]
    return int(node.get("Shared Hit Blocks", 0)) + int(node.get("Shared Read Blocks", 0))


def test_tail_read_touches_pages_in_proportion_to_k(
    store: PostgresStore, sid: str, admin: Admin
) -> None:
    store.append(sid, [Record(f"r{n}", b"x" * 300) for n in range(6000)])
    assert store._queries is not None
    query = store._queries.read

    def cost(start: int, stop: int | None) -> int:
        params = {"namespace": "", "session_id": sid, "start": start, "stop": stop}
        row = admin.execute(b"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + query, params)
        result = row.fetchone()
        assert result is not None
        return _buffers(result[0])

    tail, full = cost(-5, None), cost(0, None)
    assert tail <= 15, tail  # a few index and heap pages, however long the session
    assert full > 20 * tail, (tail, full)
    assert store.read(sid, -5) == [Record(f"r{n}", b"x" * 300) for n in range(5995, 6000)]


# -- plain SQL for DBAs ----------------------------------------------------------------------


def test_messages_view_exposes_json_and_keeps_bytes(
    store: PostgresStore, sid: str, admin: Admin, pg_schema: str
) -> None:
    message = {"type": "message", "role": "assistant", "contents": [{"type": "text", "text": "hi"}]}
    raw = json.dumps(message).encode()
    store.append(
        sid, [Record("json", raw), Record("binary", b"\x00\xff\x80"), Record("text", b"not json")]
    )
    rows = admin.execute(
        sql.SQL(
            "SELECT position, record_id, role, message, data FROM {}"
            " WHERE session_id = %s ORDER BY position"
        ).format(sql.Identifier(pg_schema, "messages")),
        (sid,),
    ).fetchall()
    assert rows[0] == (0, "json", "assistant", message, raw)
    assert rows[1] == (1, "binary", None, None, b"\x00\xff\x80")
    assert rows[2][2:4] == (None, None)
    found = admin.execute(
        sql.SQL("SELECT record_id FROM {} WHERE message @> %s::jsonb").format(
            sql.Identifier(pg_schema, "messages")
        ),
        ('{"contents": [{"text": "hi"}]}',),
    ).fetchall()
    assert ("json",) in found


# -- registration, URLs and options -----------------------------------------------------------


def test_registered_for_both_schemes(postgres_url: str, pg_schema: str, sid: str) -> None:
    info = backends()["postgres"]
    assert {"postgres", "postgresql"} <= set(info.schemes)
    assert info.capabilities == PostgresStore.capabilities == frozenset(CAPABILITIES)
    for scheme in ("postgresql://", "postgres://"):
        url = with_query(scheme + postgres_url.split("://", 1)[1], schema=pg_schema)
        with open_store(url) as opened:
            assert isinstance(opened.backend, PostgresStore)
            opened.append(sid, [Record(scheme, b"")])
    with open_store("postgres", url=with_query(postgres_url, schema=pg_schema)) as by_name:
        assert [record.id for record in by_name.read(sid)] == ["postgresql://", "postgres://"]


def test_url_options_are_parsed_and_hidden_from_libpq(postgres_url: str) -> None:
    url = with_query(
        postgres_url,
        schema="s1",
        table_prefix="t_",
        namespace="n",
        ttl="90",
        pool_min_size="0",
        pool_max_size="3",
        statement_timeout="2.5",
        retries="1",
        migrate="false",
        sslmode="disable",
    )
    store = PostgresStore(url, pool_max_size=4)  # keywords win over the URL
    options = store.options
    assert (options.schema, options.table_prefix, options.namespace) == ("s1", "t_", "n")
    assert options.ttl == 90.0 and options.statement_timeout == 2.5
    assert (options.pool_min_size, options.pool_max_size) == (0, 4)
    assert options.retries == 1 and options.migrate is False
    assert store._params["sslmode"] == "disable"
    assert "schema" not in store._params and "ttl" not in store._params
    assert "statement_timeout=2500" in store._pool_params["options"]


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"schema": "Bad-Name"}, ValueError),
        ({"schema": 'x"; DROP SCHEMA public; --'}, ValueError),
        ({"schema": ""}, ValueError),
        ({"schema": "a" * 64}, ValueError),
        ({"table_prefix": "1abc"}, ValueError),
        ({"table_prefix": "x" * 33}, ValueError),
        ({"table_prefix": "a b"}, ValueError),
        ({"namespace": "n" * 129}, ValueError),
        ({"ttl": 0}, ValueError),
        ({"ttl": -1}, ValueError),
        ({"pool_min_size": 5, "pool_max_size": 2}, ValueError),
        ({"retries": -1}, ValueError),
        ({"statement_timeout": "soon"}, ValueError),
        ({"pool_max_size": True}, TypeError),
        ({"colour": "blue"}, TypeError),
    ],
)
def test_invalid_options_are_refused_before_connecting(
    options: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        # Port 1: were anything to connect, the test would hang or fail differently.
        PostgresStore("postgresql://nobody@127.0.0.1:1/db", **options)


def test_unknown_url_parameter_is_refused_without_leaking(postgres_url: str) -> None:
    with pytest.raises(ValueError, match="bogus") as caught:
        PostgresStore("postgresql://u:hunter2-secret@127.0.0.1:1/db?bogus=1")
    assert "hunter2-secret" not in str(caught.value)
    with pytest.raises(ValueError) as caught:
        PostgresStore("postgresql://u:sec%zzret-pw@127.0.0.1:1/db")
    assert "ret-pw" not in str(caught.value)
    with pytest.raises(ValueError):
        PostgresStore("mysql://u@h/db")


def test_repr_never_shows_the_password() -> None:
    store = PostgresStore("postgresql://app:hunter2-secret@db.example:5432/app")
    assert "hunter2-secret" not in repr(store)
    assert "***" in repr(store) and "db.example" in repr(store)
    assert "hunter2-secret" not in store.url


# -- the async path ---------------------------------------------------------------------------


def test_async_hooks(pg_store_url: str, admin: Admin, pg_schema: str) -> None:
    session_id = "async-" + uuid.uuid4().hex

    async def scenario() -> None:
        store = PostgresStore(pg_store_url)
        try:
            await store.aappend(session_id, batch("a", 3))
            await store.aappend(session_id, [Record("a1", b"a1"), Record("z", b"z")])
            with pytest.raises(RecordConflict):
                await store.aappend(session_id, [Record("a1", b"dup"), Record("q", b"q")])
            assert [r.id for r in await store.aread(session_id)] == ["a0", "a1", "a2", "z"]
            assert await store.aread(session_id, -2) == [Record("a2", b"a2"), Record("z", b"z")]
            assert await store.aread(session_id, 1, -1) == [
                Record("a1", b"a1"),
                Record("a2", b"a2"),
            ]
            assert await store.aread("unknown-" + session_id) == []
            listed = [name async for name in store.alist_sessions(prefix=session_id)]
            assert listed == [session_id]
            await store.adelete(session_id)
            assert await store.aread(session_id) == []
            assert await store.apurge_expired() >= 0
        finally:
            await store.aclose()

    asyncio.run(scenario())
    assert stored_length(admin, pg_schema, session_id) is None


def test_async_concurrent_appends_all_survive(
    pg_store_url: str, admin: Admin, pg_schema: str
) -> None:
    session_id = "async-many-" + uuid.uuid4().hex

    async def scenario() -> list[Record]:
        store = PostgresStore(pg_store_url, pool_max_size=5)
        try:
            await asyncio.gather(
                *(store.aappend(session_id, batch(f"c{n}-", 2)) for n in range(30))
            )
            return await store.aread(session_id)
        finally:
            await store.aclose()

    records = asyncio.run(scenario())
    ids = [record.id for record in records]
    assert len(ids) == len(set(ids)) == 60
    for start in range(0, 60, 2):
        assert ids[start].endswith("-0") and ids[start + 1] == ids[start][:-1] + "1"
    assert assert_gap_free(admin, pg_schema, session_id) == 60


def test_one_store_serves_successive_event_loops_and_sync(pg_store_url: str, sid: str) -> None:
    store = PostgresStore(pg_store_url)
    try:
        asyncio.run(store.aappend(sid, [Record("one", b"")]))
        asyncio.run(store.aappend(sid, [Record("two", b"")]))  # a new loop: a new pool
        store.append(sid, [Record("three", b"")])
        assert [r.id for r in asyncio.run(store.aread(sid))] == ["one", "two", "three"]
    finally:
        store.close()


def test_loops_ending_with_the_pool_open_do_not_hang(pg_store_url: str, sid: str) -> None:
    """psycopg_pool's workers swallow the cancellation asyncio.run sends at shutdown while
    they are connecting; the store's guard must close the pool so shutdown completes."""
    store = PostgresStore(pg_store_url, pool_min_size=4)  # connections in flight at exit
    finished: list[int] = []

    def many_loops() -> None:
        for number in range(12):
            asyncio.run(store.aread(sid, -1))
            finished.append(number)

    worker = threading.Thread(target=many_loops, daemon=True)
    worker.start()
    worker.join(60)
    store.close()
    assert len(finished) == 12, f"asyncio.run hung after {len(finished)} loops"


def test_core_store_adapts_both_paths(pg_store_url: str, sid: str) -> None:
    with open_store(pg_store_url) as wrapped:
        wrapped.append(sid, [("m1", b"sync")])

        async def via_async() -> list[Record]:
            await wrapped.aappend(sid, [("m2", b"async")])
            return await wrapped.aread(sid)

        assert [record.data for record in asyncio.run(via_async())] == [b"sync", b"async"]
