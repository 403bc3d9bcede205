"""The contract additions on real Redis (single server and cluster): record conflicts,
conditional appends, damage that is reported, the listing index and 0.1-era data."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest
import redis

from chatkeep.core import (
    AppendConflict,
    CorruptRecord,
    Record,
    RecordConflict,
    Store,
    read_view,
)
from chatkeep.core.views import fork, undo
from chatkeep.redis import RedisStore
from chatkeep.redis.store import _Page


def sid() -> str:
    return "s-" + uuid.uuid4().hex


def batch(*ids: str) -> list[Record]:
    return [Record(i, f"data of {i}".encode()) for i in ids]


@pytest.fixture
def store(any_redis_url: str) -> Any:
    opened = Store(RedisStore(any_redis_url), name="redis")
    yield opened
    opened.close()


@pytest.fixture
def other(any_redis_url: str) -> Any:
    """A second handle on the same store (its own connections)."""
    opened = Store(RedisStore(any_redis_url), name="redis")
    yield opened
    opened.close()


# -- record conflicts --------------------------------------------------------------------


def test_stored_and_new_ids_in_one_batch_and_conflicts_across_handles(
    store: Store, other: Store
) -> None:
    session = sid()
    store.append(session, batch("a"))
    other.append(session, batch("a", "b"))  # "a" skipped: same data, another handle
    store.append(session, batch("c"))
    assert [r.id for r in other.read(session)] == ["a", "b", "c"]
    with pytest.raises(RecordConflict) as caught:
        other.append(session, [Record("d", b"new"), Record("b", b"other data")])
    assert (caught.value.session_id, caught.value.record_id) == (session, "b")
    assert [r.id for r in store.read(session)] == ["a", "b", "c"]  # "d" not stored


def test_conflicts_are_checked_asynchronously_too(any_redis_url: str) -> None:
    store = Store(RedisStore(any_redis_url), name="redis")
    session = sid()

    async def main() -> None:
        await store.aappend(session, batch("a"))
        with pytest.raises(RecordConflict):
            await store.aappend(session, [Record("a", b"changed")])
        await store.aappend_if(session, batch("b"), after="a")
        with pytest.raises(AppendConflict):
            await store.aappend_if(session, batch("c"), after="a")
        await store.aclose()

    asyncio.run(main())


# -- conditional appends -----------------------------------------------------------------


def test_racing_conditional_appends_have_one_winner_each_round(any_redis_url: str) -> None:
    session = sid()
    stores = [Store(RedisStore(any_redis_url), name="redis") for _ in range(4)]
    winners: list[str] = []
    lock = threading.Lock()
    try:
        for round_number in range(15):
            last = stores[0].read(session, -1)
            after = last[0].id if last else None
            barrier = threading.Barrier(len(stores))

            def contend(
                number: int,
                after: str | None = after,
                round_number: int = round_number,
                barrier: threading.Barrier = barrier,
            ) -> None:
                record = Record(f"r{round_number}-{number}", b"x")
                barrier.wait()
                try:
                    stores[number].append_if(session, [record], after=after)
                except AppendConflict:
                    return
                with lock:
                    winners.append(record.id)

            threads = [threading.Thread(target=contend, args=(n,)) for n in range(len(stores))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        assert len(winners) == 15
        assert [r.id for r in stores[0].read(session)] == winners
    finally:
        for opened in stores:
            opened.close()


def test_an_acknowledged_conditional_append_retried_is_a_no_op(store: Store) -> None:
    session = sid()
    store.append_if(session, batch("a"), after=None)
    store.append(session, batch("b"))
    store.append_if(session, batch("a"), after=None)  # the retry of the first call
    assert [r.id for r in store.read(session)] == ["a", "b"]


def test_undo_and_fork_use_the_condition(store: Store) -> None:
    from chatkeep.core import Message, encode_records, new_id

    session = sid()
    for text in ["one", "two"]:
        store.append(
            session,
            encode_records(
                [
                    Message.user(text, message_id=new_id()),
                    Message.assistant("ok", message_id=new_id()),
                ]
            ),
        )
    assert store.supports("conditional")
    undone = undo(store, session)
    assert [m.text for m in undone] == ["two", "ok"]
    child = fork(store, session)
    assert [m.text for m in read_view(store, child)] == ["one", "ok"]


# -- damage ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["missing", "truncated", "garbage"])
def test_damage_is_reported_at_its_position_and_contained(
    store: Store, any_redis_url: str, kind: str
) -> None:
    session = sid()
    store.append(session, batch(*"abcdef"))
    backend = store.backend
    assert isinstance(backend, RedisStore)
    backend.chatkeep_damage(session, 3, kind)
    with pytest.raises(CorruptRecord) as caught:
        store.read(session)
    assert caught.value.session_id == session and caught.value.position == 3
    assert [r.id for r in store.read(session, 0, 3)] == ["a", "b", "c"]  # before: fine
    store.append(session, batch("g"))  # still appendable
    assert store.read(session, -1) == batch("g")
    with pytest.raises(CorruptRecord):
        store.read(session)  # and never silently healed or shortened
    reopened = Store(RedisStore(any_redis_url), name="redis")
    try:
        with pytest.raises(CorruptRecord):
            reopened.read(session, 1)
    finally:
        reopened.close()


# -- listing -----------------------------------------------------------------------------


def test_prefix_listing_costs_what_matches(redis_store_url: str) -> None:
    store = RedisStore(redis_store_url, scan_count=10)
    try:
        for number in range(300):
            store.append(f"bulk-{number:03d}", batch("m"))
        for number in range(25):
            store.append(f"wanted-{number:02d}", batch("m"))
        list(store.list_sessions())  # the one-time check for 0.1-era sessions
        calls: list[int] = []
        original = _Page.__call__

        def counted(page: _Page) -> Any:
            calls.append(1)
            return original(page)

        _Page.__call__ = counted  # type: ignore[method-assign]
        try:
            found = list(store.list_sessions("wanted-"))
        finally:
            _Page.__call__ = original  # type: ignore[method-assign]
        assert sorted(found) == [f"wanted-{n:02d}" for n in range(25)]
        assert len(calls) == 3  # pages of 10: 10, 10, 5 (not 33 pages over every session)
    finally:
        store.close()


def test_listing_pages_over_ids_that_extend_one_another(any_redis_url: str) -> None:
    backend = RedisStore(any_redis_url, scan_count=3)
    try:
        made = ["a" * n for n in range(1, 14)] + ["a" * n + "b" for n in range(1, 6)]
        for session in made:
            backend.append(session, batch("m"))
        listed = list(backend.list_sessions())
        assert sorted(listed) == sorted(made) and len(listed) == len(set(listed))
        assert sorted(backend.list_sessions("aaa")) == sorted(
            s for s in made if s.startswith("aaa")
        )
    finally:
        backend.close()


def test_sessions_written_by_0_1_are_listed_read_and_appended(redis_store_url: str) -> None:
    backend = RedisStore(redis_store_url)
    client = redis.Redis.from_url(redis_store_url.split("?", maxsplit=1)[0])
    try:
        session = "old-" + uuid.uuid4().hex
        log_key, _, ids_key = backend.keys(session)
        old = [Record("a", b"1"), Record("b", b"2")]
        for record in old:  # the 0.1 element format and id set, written as 0.1 did
            raw = record.id.encode()
            client.rpush(log_key, b"\x01" + len(raw).to_bytes(2, "big") + raw + record.data)
            client.sadd(ids_key, record.id)
        assert session in list(backend.list_sessions())
        assert backend.read(session) == old
        backend.append(session, [Record("b", b"2"), Record("c", b"3")])  # "b" already stored
        assert [r.id for r in backend.read(session)] == ["a", "b", "c"]
        assert backend.read(session, 2) == [Record("c", b"3")]  # positions line up
    finally:
        backend.close()
        client.close()


def test_deleted_bytes_are_gone_from_the_keyspace(store: Store) -> None:
    backend = store.backend
    assert isinstance(backend, RedisStore)
    session, marker = sid(), b"marker-" + uuid.uuid4().hex.encode()
    store.append(session, [Record("a", b"before " + marker + b" after")])
    other = sid()
    store.append(other, [Record("a", b"kept " + marker + b"-other")])
    assert backend.chatkeep_storage_contains(marker + b" after")
    store.delete(session)
    assert not backend.chatkeep_storage_contains(marker + b" after")
    assert backend.chatkeep_storage_contains(marker + b"-other")


def test_a_batch_of_thousands_is_checked_against_every_stored_id(store: Store) -> None:
    """The append script fetches stored digests 1,000 ids at a time: a retry and a
    conflict past the first thousand behave as in the first."""
    session = sid()
    first = [Record(f"m{n}", f"data {n}".encode()) for n in range(2500)]
    store.append(session, first)
    store.append(session, [*first, Record("new", b"x")])  # a retry plus one record
    assert len(store.read(session)) == 2501
    changed = [*first[:1800], Record("m1800", b"other data"), Record("later", b"y")]
    with pytest.raises(RecordConflict) as caught:
        store.append(session, changed)
    assert caught.value.record_id == "m1800"
    records = store.read(session)
    assert len(records) == 2501 and records[-1] == Record("new", b"x")
    assert store.read(session, 2499, 2501) == [first[-1], Record("new", b"x")]


# -- what a listing costs on the wire ------------------------------------------------------


def _sends(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the requests every blocking redis-py connection sends from now on (a pipeline
    is one): each is a round trip."""
    sent: list[int] = []
    original = redis.connection.AbstractConnection.send_packed_command

    def counted(self: Any, command: Any, check_health: bool = True) -> None:
        sent.append(1)
        original(self, command, check_health)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)
    return sent


def test_a_namespaces_first_prefix_listing_costs_what_matches(
    redis_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29: at most max(10, k / 50) round trips for k matches, also on a fresh handle
    listing a namespace for the first time (1,000 sessions here, 2% matching: the ratio of
    200 of 10,000). The one-time search for 0.1-era sessions covers every namespace under
    the key prefix, so it is not paid again per namespace."""
    writer = RedisStore(redis_store_url, namespace="tenant")
    other = RedisStore(redis_store_url, namespace="other")
    try:
        for number in range(1000):
            name = f"match-{number:04d}" if number % 50 == 0 else f"rest-{number:04d}"
            writer.append(name, batch("m"))
        other.append("x", batch("m"))
        list(other.list_sessions())  # some namespace was listed once: the search is done
        sent = _sends(monkeypatch)
        # Pages of 100 (a tenth of the sessions, as 1,000 is of 10,000 by default): a
        # SCAN of the database at that size would take 20 round trips.
        fresh = RedisStore(redis_store_url, namespace="tenant", scan_count=100)
        try:
            found = list(fresh.list_sessions("match-"))
        finally:
            fresh.close()
        assert sorted(found) == [f"match-{n:04d}" for n in range(0, 1000, 50)]
        assert len(sent) <= 10, f"{len(sent)} round trips for 20 matches"
    finally:
        writer.close()
        other.close()


def test_a_narrow_prefixs_recent_sessions_cost_what_matches(
    redis_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29: ``recent_sessions(prefix)`` in at most max(10, k / 50) round trips for k
    matches on a fresh handle: 1,000 sessions, 20 matching, and a script budget of 100
    members a call (2,000 of 20,000 by default), so a walk of the last-append index would
    take 10 calls where the prefix's range of the sessions index takes one."""
    import chatkeep.redis.base as base

    writer = RedisStore(redis_store_url, namespace="recent")
    try:
        for number in range(1000):
            name = f"match-{number:04d}" if number % 50 == 0 else f"rest-{number:04d}"
            writer.append(name, batch("m"))
        list(writer.recent_sessions(None, None, 1))  # the namespace's markers are there
        monkeypatch.setattr(base, "RECENT_BUDGET", 100)
        sent = _sends(monkeypatch)
        fresh = RedisStore(redis_store_url, namespace="recent")
        try:
            found = [name for name, _ in fresh.recent_sessions("match-", None, 100)]
        finally:
            fresh.close()
        assert found == [f"match-{n:04d}" for n in range(950, -1, -50)]
        assert len(sent) <= 10, f"{len(sent)} round trips for 20 matches"
    finally:
        writer.close()


def test_the_search_for_0_1_sessions_covers_every_namespace(redis_store_url: str) -> None:
    client = redis.Redis.from_url(redis_store_url.split("?", maxsplit=1)[0])
    first = RedisStore(redis_store_url, namespace="a")
    later = RedisStore(redis_store_url, namespace="b")
    try:
        log_key, _, ids_key = later.keys("old")
        client.rpush(log_key, b"\x01\x00\x01r" + b"data")  # 0.1's element format and id set
        client.sadd(ids_key, "r")
        first.append("new", batch("m"))
        assert list(first.list_sessions()) == ["new"]  # namespace a's first listing
        assert list(later.list_sessions()) == ["old"]  # b's: found by a's search
        assert later.read("old") == [Record("r", b"data")]
    finally:
        first.close()
        later.close()
        client.close()
