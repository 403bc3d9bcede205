"""RedisStore against real servers: the single Redis and a 3-master cluster, sync and async.

Each test runs four ways (single/cluster x sync/async) through chatkeep's Store wrapper, so
the backend's native async path (aappend, aread, ...) is exercised, not a thread hop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio.cluster
import redis.cluster
import redis.exceptions
from redis.crc import key_slot

from chatkeep.core import CorruptRecord, Record, Store, StoreUnavailable
from chatkeep.redis import RedisStore
from chatkeep.redis.layout import Layout

HOSTILE_IDS = [
    "{",
    "}",
    "{}",
    "a}b{c",
    "{tag}",
    "}{",
    "*",
    "?",
    "[a-z]",
    "\\",
    "\\*",
    "%",
    "%7B",
    "%7b",
    "a b",
    "a%20b",
    "a+b",
    ":",
    "x:log",
    "x}:log",
    "line\nbreak",
    "tab\there",
    "\r\n",
    "emoji \U0001f600",
    "é",
    "e\u0301",
    "../../etc/passwd",
    "a;DROP TABLE x",
    "CASE",
    "case",
    "x" * 512,
    "\U0001f600" * 512,
    "{" * 512,
    "%" * 512,
]


class Api:
    """The Store's sync or async methods behind one blocking interface."""

    def __init__(self, store: Store, mode: str) -> None:
        self.store = store
        self.mode = mode
        self.loop = asyncio.new_event_loop() if mode == "async" else None

    def _run(self, coroutine: Any) -> Any:
        assert self.loop is not None
        return self.loop.run_until_complete(coroutine)

    def append(self, session_id: str, records: list[Record]) -> None:
        if self.loop is None:
            self.store.append(session_id, records)
        else:
            self._run(self.store.aappend(session_id, records))

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        if self.loop is None:
            return self.store.read(session_id, start, stop)
        result: list[Record] = self._run(self.store.aread(session_id, start, stop))
        return result

    def delete(self, session_id: str) -> None:
        if self.loop is None:
            self.store.delete(session_id)
        else:
            self._run(self.store.adelete(session_id))

    def sessions(self, prefix: str | None = None) -> list[str]:
        if self.loop is None:
            return list(self.store.list_sessions(prefix))

        async def collect() -> list[str]:
            return [item async for item in self.store.alist_sessions(prefix)]

        result: list[str] = self._run(collect())
        return result

    def close(self) -> None:
        if self.loop is None:
            self.store.close()
        else:
            self._run(self.store.aclose())
            self.loop.close()


def open_api(url: str, mode: str, **options: Any) -> Api:
    return Api(Store(RedisStore(url, **options), name="redis"), mode)


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def api(any_redis_url: str, mode: str) -> Iterator[Api]:
    opened = open_api(any_redis_url, mode)
    yield opened
    opened.close()


def records(*ids: str, size: int = 8) -> list[Record]:
    return [Record(i, (i.encode() * size)[:size] or b"-") for i in ids]


def sid() -> str:
    return "s-" + uuid.uuid4().hex


def raw_client(store: RedisStore) -> Any:
    return store.client


# -- the two hooks -------------------------------------------------------------------------


def test_append_then_read_in_order(api: Api) -> None:
    session = sid()
    api.append(session, records("a", "b"))
    api.append(session, records("c"))
    assert [r.id for r in api.read(session)] == ["a", "b", "c"]
    assert api.read(session) == records("a", "b", "c")


def test_unknown_session_reads_empty(api: Api) -> None:
    assert api.read(sid()) == []
    assert api.read(sid(), -10) == []


def test_binary_and_empty_and_large_data_round_trip(api: Api) -> None:
    session = sid()
    every_byte = bytes(range(256)) * 4
    big = bytes(range(256)) * 4096  # 1 MiB
    batch = [Record("bin", every_byte), Record("empty", b""), Record("big", big)]
    api.append(session, batch)
    assert api.read(session) == batch


def test_record_ids_are_unicode_safe(api: Api) -> None:
    session = sid()
    batch = [Record("\U0001f600" * 256, b"1"), Record("é:{}*\n", b"2"), Record("x" * 256, b"3")]
    api.append(session, batch)
    assert api.read(session) == batch


SLICE_POINTS = [
    None,
    0,
    1,
    2,
    3,
    5,
    7,
    11,
    12,
    13,
    -1,
    -2,
    -3,
    -5,
    -11,
    -12,
    -13,
    10**20,
    -(10**20),
]


@pytest.mark.parametrize("length", [0, 1, 5, 12])
def test_slices_match_python_list_slicing(api: Api, length: int) -> None:
    session = sid()
    log = records(*(f"r{i}" for i in range(length)))
    if log:
        api.append(session, log)
    for start in SLICE_POINTS:
        for stop in SLICE_POINTS:
            got = api.read(session, 0 if start is None else start, stop)
            assert got == log[start:stop], (length, start, stop)


def test_same_batch_retry_is_a_no_op(api: Api) -> None:
    session = sid()
    batch = records("a", "b", "c")
    api.append(session, batch)
    api.append(session, batch)
    assert api.read(session) == batch


def test_already_stored_ids_are_skipped_and_the_rest_kept_in_order(api: Api) -> None:
    session = sid()
    api.append(session, records("a", "b"))
    api.append(session, records("b", "c", "a", "d"))
    assert [r.id for r in api.read(session)] == ["a", "b", "c", "d"]


def test_large_batch_is_chunked_inside_the_script(api: Api) -> None:
    # More elements than Lua's unpack() can take at once.
    session = sid()
    batch = [Record(f"id-{i}", f"{i}".encode()) for i in range(10_000)]
    api.append(session, batch)
    assert api.read(session, -3) == batch[-3:]
    assert api.read(session) == batch


# -- hostile session ids -----------------------------------------------------------------


def test_hostile_session_ids_stay_apart_and_list_back_exactly(
    any_redis_url: str, mode: str
) -> None:
    api = open_api(any_redis_url, mode)
    try:
        for position, session in enumerate(HOSTILE_IDS):
            api.append(session, [Record("m", str(position).encode())])
        for position, session in enumerate(HOSTILE_IDS):
            assert api.read(session) == [Record("m", str(position).encode())], session
        assert sorted(api.sessions()) == sorted(HOSTILE_IDS)
        for session in HOSTILE_IDS:
            assert sorted(api.sessions(session)) == sorted(
                s for s in HOSTILE_IDS if s.startswith(session)
            )
    finally:
        api.close()


@pytest.mark.parametrize("session", HOSTILE_IDS)
def test_both_keys_of_a_session_share_one_cluster_slot(session: str) -> None:
    layout = Layout("ns:", None, cluster=True)
    log_key, digests_key, ids_key = layout.keys(session)
    index_key = layout.binary_keys(session)[3]
    slots = {key_slot(key) for key in (log_key.encode(), digests_key.encode(), ids_key.encode())}
    assert slots == {key_slot(index_key)}
    assert layout.session_of(log_key) == session


def test_glob_characters_in_a_prefix_match_literally(api: Api) -> None:
    base = sid()
    api.append(base + "a*b", records("m"))
    api.append(base + "axb", records("m"))
    api.append(base + "a?", records("m"))
    api.append(base + "[a]", records("m"))
    assert api.sessions(base + "a*") == [base + "a*b"]
    assert api.sessions(base + "a?") == [base + "a?"]
    assert api.sessions(base + "[") == [base + "[a]"]
    assert sorted(api.sessions(base)) == sorted([base + s for s in ("a*b", "axb", "a?", "[a]")])


# -- namespaces ----------------------------------------------------------------------------


@pytest.mark.parametrize("option", ["namespace", "key_prefix"])
def test_namespaces_never_see_each_other(any_redis_url: str, mode: str, option: str) -> None:
    base = any_redis_url.rsplit("key_prefix=", 1)[1]
    url = any_redis_url.rsplit("?key_prefix=", 1)[0]
    if option == "namespace":  # tenants of one store: nested, prefix-of and default ones
        tenants: list[dict[str, str]] = [
            {"key_prefix": base, "namespace": name} for name in ("t1", "t1/x", "t1x", "t2")
        ]
        tenants.append({"key_prefix": base})
    else:  # separate stores in one database
        tenants = [{"key_prefix": base + name} for name in ("t1:", "t1:x:", "t1", "t2:")]
    apis = [open_api(url, mode, **tenant) for tenant in tenants]
    try:
        for number, api in enumerate(apis):
            api.append("shared-id", [Record("m", f"tenant {number}".encode())])
            api.append(f"only-{number}", records("m"))
        for number, api in enumerate(apis):
            assert api.read("shared-id") == [Record("m", f"tenant {number}".encode())]
            assert sorted(api.sessions()) == sorted(["shared-id", f"only-{number}"])
        apis[0].delete("shared-id")
        assert apis[0].read("shared-id") == []
        assert all(api.read("shared-id") for api in apis[1:])
    finally:
        for api in apis:
            api.close()


def test_key_prefix_with_braces_is_rejected() -> None:
    with pytest.raises(ValueError, match="hash tag"):
        RedisStore("redis://127.0.0.1:6379/0", key_prefix="a{b")
    with pytest.raises(ValueError, match="hash tag"):
        RedisStore("redis://127.0.0.1:6379/0?key_prefix=%7D")


# -- delete and list_sessions --------------------------------------------------------------


def test_delete_erases_log_and_ids(api: Api) -> None:
    session = sid()
    api.append(session, records("a", "b"))
    api.delete(session)
    assert api.read(session) == []
    assert session not in api.sessions()
    backend = api.store.backend
    assert isinstance(backend, RedisStore)
    assert raw_client(backend).exists(*backend.keys(session)) == 0
    # The ids were forgotten too: the same ids can be stored again.
    api.append(session, records("a"))
    assert api.read(session) == records("a")
    api.delete(sid())  # deleting an unknown session is fine


def test_reads_write_nothing_and_an_emptied_namespace_leaves_no_key(
    redis_store_url: str, redis_namespace: str, mode: str
) -> None:
    api = open_api(redis_store_url, mode)
    backend = api.store.backend
    assert isinstance(backend, RedisStore)
    raw = raw_client(backend)

    def keys() -> list[bytes]:
        return sorted(raw.scan_iter(match=redis_namespace + "*", count=1000))

    # Read-only use of an empty namespace (what `chatkeep sessions list` does) writes nothing.
    assert api.sessions() == [] and api.read(sid()) == []
    assert list(api.store.recent_sessions()) == []
    assert keys() == []
    sessions = [sid() for _ in range(3)]
    for session in sessions:
        api.append(session, records("a"))
    assert sorted(api.sessions()) == sorted(sessions)
    # A new handle's listing (the markers set before the first write spare it a SCAN).
    other = open_api(redis_store_url, mode)
    assert sorted(other.sessions()) == sorted(sessions)
    assert {s for s, _ in other.store.recent_sessions()} == set(sessions)
    other.close()
    for session in sessions:
        api.delete(session)
    # The namespace's markers went with its last session; what is left is the one marker
    # of the whole key prefix (its 0.1-era sessions were looked for once, for every
    # namespace under it).
    assert keys() == [backend._layout.every_namespace_marker()], "markers outlived the sessions"
    # The conformance suite's clean-up hook removes that one too, and only once no
    # namespace under the key prefix holds a session.
    nested = open_api(redis_store_url, mode, namespace="nested")
    nested.append(sessions[1], records("n"))
    backend.chatkeep_tidy()
    assert backend._layout.every_namespace_marker() in keys()
    nested.delete(sessions[1])
    nested.close()
    backend.chatkeep_tidy()
    assert keys() == [], "the key prefix's marker outlived every session under it"
    api.append(sessions[0], records("b"))  # and it works again from there
    assert api.sessions() == [sessions[0]]
    fresh = open_api(redis_store_url, mode)
    assert fresh.sessions() == [sessions[0]]
    fresh.close()
    api.close()


def test_list_sessions_pages_through_many_sessions(any_redis_url: str, mode: str) -> None:
    api = open_api(any_redis_url, mode, scan_count=7)
    try:
        made = [f"many-{i:03d}" for i in range(120)]
        for session in made:
            api.append(session, records("m"))
        listed = api.sessions()
        assert sorted(listed) == made
        assert len(listed) == len(set(listed))
        assert sorted(api.sessions("many-00")) == made[:10]
    finally:
        api.close()


def test_list_sessions_is_lazy(redis_store_url: str) -> None:
    store = RedisStore(redis_store_url, scan_count=1)
    try:
        for i in range(5):
            store.append(f"lazy-{i}", records("m"))
        iterator = store.list_sessions()
        first = next(iterator)
        store.delete(first)  # the listing goes on; no connection held between pages
        rest = list(iterator)
        assert first not in rest
        assert len(rest) == 4
    finally:
        store.close()


def test_cluster_listing_covers_every_master(redis_cluster_store_url: str) -> None:
    store = RedisStore(redis_cluster_store_url)
    try:
        sessions = [f"spread-{i}" for i in range(60)]
        for session in sessions:
            store.append(session, records("m"))
        client = store.client
        holders = {client.get_node_from_key(store.keys(s)[0]).name for s in sessions}
        assert len(holders) == 3  # the sessions really are spread over the three masters
        assert sorted(store.list_sessions()) == sorted(sessions)
    finally:
        store.close()


# -- ttl -------------------------------------------------------------------------------------


def test_ttl_slides_on_append_and_expired_sessions_vanish(any_redis_url: str, mode: str) -> None:
    api = open_api(any_redis_url, mode, ttl=0.6)
    backend = api.store.backend
    assert isinstance(backend, RedisStore)
    client = raw_client(backend)
    try:
        session = sid()
        api.append(session, records("a"))
        for key in backend.keys(session)[:2]:  # the log and its digests
            assert 0 < client.pttl(key) <= 600
        time.sleep(0.4)
        api.append(session, records("b"))  # renews the whole session
        for key in backend.keys(session)[:2]:
            assert client.pttl(key) > 400
        time.sleep(0.35)  # past the first deadline, within the renewed one
        assert [r.id for r in api.read(session)] == ["a", "b"]
        time.sleep(0.5)
        assert api.read(session) == []
        assert session not in api.sessions()
        # The ids went with it: the session starts afresh.
        api.append(session, records("a"))
        assert [r.id for r in api.read(session)] == ["a"]
    finally:
        api.close()


def test_ttl_from_the_url(redis_store_url: str) -> None:
    store = RedisStore(redis_store_url + "&ttl=30")
    try:
        session = sid()
        store.append(session, records("a"))
        assert 29_000 < store.client.pttl(store.keys(session)[0]) <= 30_000
        assert store.ttl is not None and store.ttl.total_seconds() == 30
    finally:
        store.close()


def test_without_ttl_sessions_do_not_expire(redis_store_url: str) -> None:
    store = RedisStore(redis_store_url)
    try:
        session = sid()
        store.append(session, records("a"))
        # -2: no 0.1-era id set exists for a new session
        assert [store.client.pttl(key) for key in store.keys(session)] == [-1, -1, -2]
    finally:
        store.close()


def test_a_retry_sets_the_expiry_and_a_handle_without_ttl_clears_it(
    redis_store_url: str,
) -> None:
    # The contract (core/BACKENDS.md, ttl): every append, an exact retry included, sets the
    # expiry to the handle's ttl; an append through a handle opened without ttl clears it.
    with_ttl, without = RedisStore(redis_store_url, ttl=60), RedisStore(redis_store_url)
    try:
        session = sid()
        log, digests = with_ttl.keys(session)[:2]
        with_ttl.append(session, records("a"))
        client = with_ttl.client
        client.pexpire(log, 5_000)
        client.pexpire(digests, 5_000)
        with_ttl.append(session, records("a"))  # stores nothing, but sets the expiry again
        assert client.pttl(log) > 50_000 and client.pttl(digests) > 50_000
        without.append(session, records("a"))  # a retry through a handle without ttl
        assert client.pttl(log) == -1 and client.pttl(digests) == -1
        with_ttl.append(session, records("b"))
        without.append(session, records("c"))
        assert client.pttl(log) == -1 and client.pttl(digests) == -1
        assert [r.id for r in without.read(session)] == ["a", "b", "c"]
    finally:
        with_ttl.close()
        without.close()


def test_the_no_expiry_field_follows_the_handles_ttl(redis_store_url: str) -> None:
    # An append without ttl takes the expiry off and writes a field saying so into the
    # digests hash, so later appends without ttl skip the two PERSISTs; an append with a
    # ttl sets the expiry and removes the field (then the next one without ttl persists).
    field = b"\x00no-expiry"
    with_ttl, without = RedisStore(redis_store_url, ttl=60), RedisStore(redis_store_url)
    try:
        session = sid()
        log, digests = without.keys(session)[:2]
        client = without.client
        without.append(session, records("a"))
        assert client.hget(digests, field) == b"1"
        assert client.pttl(log) == -1 and client.pttl(digests) == -1
        with_ttl.append(session, records("b"))
        assert client.hget(digests, field) is None
        assert client.pttl(log) > 50_000 and client.pttl(digests) > 50_000
        with_ttl.append(session, records("b"))  # a retry keeps it so
        assert client.hget(digests, field) is None and client.pttl(log) > 50_000
        without.append(session, records("b"))  # a retry without ttl clears the expiry
        assert client.pttl(log) == -1 and client.pttl(digests) == -1
        without.append(session, records("c"))
        assert client.hget(digests, field) == b"1"
        assert client.pttl(log) == -1 and client.pttl(digests) == -1
        assert [r.id for r in without.read(session)] == ["a", "b", "c"]
        # A session whose keys carry an expiry and have no field (as one written before
        # the field existed): the next append without ttl still clears it.
        other = sid()
        with_ttl.append(other, records("x"))
        assert client.hget(without.keys(other)[1], field) is None
        without.append(other, records("y"))
        assert [client.pttl(key) for key in without.keys(other)[:2]] == [-1, -1]
    finally:
        with_ttl.close()
        without.close()


# -- concurrency -------------------------------------------------------------------------


def test_concurrent_threads_all_survive_with_batches_contiguous(any_redis_url: str) -> None:
    store = Store(RedisStore(any_redis_url, pool_size=4), name="redis")
    session = sid()

    def writer(worker: int) -> None:
        for batch in range(15):
            store.append(session, records(*(f"w{worker}-b{batch}-{k}" for k in range(3))))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = [r.id for r in store.read(session)]
    assert len(ids) == 8 * 15 * 3 == len(set(ids))
    for start in range(0, len(ids), 3):  # batches of three never interleave
        prefix = ids[start].rsplit("-", 1)[0]
        assert [i.rsplit("-", 1)[0] for i in ids[start : start + 3]] == [prefix] * 3
    store.close()


def test_concurrent_async_appends_all_survive(any_redis_url: str) -> None:
    store = Store(RedisStore(any_redis_url, pool_size=3), name="redis")
    session = sid()

    async def main() -> None:
        await asyncio.gather(
            *(store.aappend(session, records(f"t{task}-a", f"t{task}-b")) for task in range(40))
        )
        stored = await store.aread(session)
        assert len(stored) == 80
        await store.aclose()

    asyncio.run(main())


def test_first_concurrent_async_commands_of_a_cluster_client_go_to_the_slot_owner(
    redis_cluster_store_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Recent redis-py (8.1) picks a command's route before it initializes a new cluster
    # client, so without chatkeep initializing first, each first command went to a
    # random primary and came back MOVED; with many at once redis-py then closed
    # connections in use (the "writelines on None" flake). Twelve first commands over
    # six sessions (on every master).
    moved: list[str] = []
    real = redis.asyncio.cluster.ClusterNode.execute_command

    async def counting(node: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await real(node, *args, **kwargs)
        except redis.exceptions.MovedError:
            moved.append(str(args[0]))
            raise

    monkeypatch.setattr(redis.asyncio.cluster.ClusterNode, "execute_command", counting)
    store = Store(RedisStore(redis_cluster_store_url), name="redis")
    sessions = [sid() for _ in range(6)]

    async def main() -> list[list[Record]]:
        await asyncio.gather(
            *(
                store.aappend(session, records(f"{session}-{task}"))
                for task in range(2)
                for session in sessions
            )
        )
        stored = [await store.aread(session) for session in sessions]
        await store.aclose()
        return stored

    with caplog.at_level(logging.WARNING, logger="chatkeep.redis"):
        stored = asyncio.run(main())
    assert [sorted(r.id for r in log) for log in stored] == [
        [f"{session}-0", f"{session}-1"] for session in sessions
    ]
    assert moved == []
    assert [r.getMessage() for r in caplog.records if r.name == "chatkeep.redis"] == []


def test_async_works_across_event_loops(any_redis_url: str) -> None:
    store = Store(RedisStore(any_redis_url), name="redis")
    session = sid()
    asyncio.run(store.aappend(session, records("a")))
    asyncio.run(store.aappend(session, records("b")))  # a new loop: a new asyncio client
    assert [r.id for r in asyncio.run(store.aread(session))] == ["a", "b"]
    store.close()


# -- scripts, corruption, close ----------------------------------------------------------


def test_append_reloads_the_script_after_script_flush(any_redis_url: str, mode: str) -> None:
    api = open_api(any_redis_url, mode)
    backend = api.store.backend
    assert isinstance(backend, RedisStore)
    client = raw_client(backend)
    try:
        session = sid()
        api.append(session, records("a"))
        if isinstance(client, redis.cluster.RedisCluster):
            for node in client.get_primaries():
                client.get_redis_connection(node).script_flush()
        else:
            client.script_flush()
        api.append(session, records("b"))
        assert [r.id for r in api.read(session)] == ["a", "b"]
    finally:
        api.close()


def test_a_damaged_element_raises_corrupt_record_at_its_position(
    any_redis_url: str, mode: str
) -> None:
    api = open_api(any_redis_url, mode)
    backend = api.store.backend
    assert isinstance(backend, RedisStore)
    try:
        session = sid()
        api.append(session, records("a", "b", "c", "d"))
        raw_client(backend).lset(backend.keys(session)[0], 2, b"\x07garbage")
        with pytest.raises(CorruptRecord) as caught:
            api.read(session)
        assert caught.value.position == 2
        assert "format" in caught.value.reason
        with pytest.raises(CorruptRecord) as caught:
            api.read(session, -3)
        assert caught.value.position == 2
        assert api.read(session, -1) == records("d")
    finally:
        api.close()


def test_close_is_idempotent_and_final(any_redis_url: str, mode: str) -> None:
    api = open_api(any_redis_url, mode)
    session = sid()
    api.append(session, records("a"))
    backend = api.store.backend
    assert isinstance(backend, RedisStore)
    api.close()
    backend.close()
    with pytest.raises(StoreUnavailable, match="closed"):
        backend.read(session)
    again = open_api(any_redis_url, mode)  # durable: a new store sees the data
    try:
        assert again.read(session) == records("a")
    finally:
        again.close()


def test_sync_close_also_releases_async_clients(redis_store_url: str) -> None:
    backend = RedisStore(redis_store_url)
    store = Store(backend, name="redis")
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(store.aappend(sid(), records("a")))
        assert backend._async._handles
        store.close()
        assert not backend._async._handles
    finally:
        loop.close()


def test_wrong_type_at_a_session_key_is_reported_not_swallowed(redis_store_url: str) -> None:
    backend = RedisStore(redis_store_url, retries=0)
    try:
        session = sid()
        backend.client.set(backend.keys(session)[0], b"not a list")
        with pytest.raises(StoreUnavailable, match="WRONGTYPE"):
            backend.read(session)
    finally:
        backend.close()


def test_redis_py_client_is_binary(redis_store_url: str) -> None:
    backend = RedisStore(redis_store_url)
    try:
        assert isinstance(backend.client, redis.Redis)
        assert backend.client.get_connection_kwargs().get("decode_responses") is False
    finally:
        backend.close()


def test_async_path_is_native_not_a_thread_hop(
    any_redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(RedisStore(any_redis_url), name="redis")

    def no_threads(*args: object, **kwargs: object) -> None:
        raise AssertionError("an async call went through a worker thread")

    monkeypatch.setattr(asyncio, "to_thread", no_threads)
    threads_before = threading.active_count()

    async def main() -> None:
        session = sid()
        await store.aappend(session, records("a", "b"))
        assert await store.aread(session, -1) == records("b")
        assert session in [s async for s in store.alist_sessions(session)]
        await store.adelete(session)
        assert threading.active_count() == threads_before  # no loop thread either
        monkeypatch.undo()  # Store.aclose (core) stops its idle loop thread via to_thread
        await store.aclose()

    asyncio.run(main())


@pytest.mark.parametrize("cycles", [12])
def test_close_releases_connections(any_redis_url: str, mode: str, cycles: int) -> None:
    def open_files() -> int:
        return len(os.listdir("/proc/self/fd"))

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc to count file descriptors")
    kept = []  # closed stores stay referenced: closing, not garbage collection, must free

    def cycle() -> None:
        api = open_api(any_redis_url, mode)
        for _ in range(6):  # several sessions: on a cluster, several nodes
            session = sid()
            api.append(session, records("a"))
            api.read(session)
        api.close()
        kept.append(api)

    cycle()
    before = open_files()
    for _ in range(cycles):
        cycle()
    assert open_files() - before <= 2
