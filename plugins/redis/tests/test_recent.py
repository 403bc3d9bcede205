"""The ``recent`` capability on Redis: the ``{}:recent`` sorted set the append script keeps
by the server's clock, what delete and expiry do to it, and what a cluster declares."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis

from chatkeep.core import Record, Store, open_store
from chatkeep.core.metadata import list_session_infos
from chatkeep.redis import RedisStore
from chatkeep.redis.base import RECENT_BUDGET
from chatkeep.redis.plugin import CLUSTER_CAPABILITIES

from .conftest import with_option


def _ids(store: Store, prefix: str | None = None) -> list[str]:
    return [session_id for session_id, _ in store.recent_sessions(prefix)]


def _members(client: redis.Redis, namespace: str) -> dict[bytes, float]:
    return dict(client.zrange(f"{namespace}{{}}:recent", 0, -1, withscores=True))


def test_the_append_script_scores_by_the_servers_clock(
    redis_url: str, redis_store_url: str, redis_namespace: str
) -> None:
    client = redis.Redis.from_url(redis_url)
    store = open_store(redis_store_url)
    seconds, micros = client.time()
    server_before = seconds + micros / 1e6
    store.append("a b/c", [Record("r1", b"x")])
    seconds, micros = client.time()
    server_after = seconds + micros / 1e6
    members = _members(client, redis_namespace)
    assert list(members) == [b"a%20b%2Fc"]  # the encoded id, as in the sessions index
    assert server_before <= members[b"a%20b%2Fc"] <= server_after
    [(session_id, updated)] = store.recent_sessions()
    assert session_id == "a b/c"
    assert updated.timestamp() == pytest.approx(members[b"a%20b%2Fc"], abs=1e-6)
    store.append("a b/c", [Record("r1", b"x")])  # a retry: the script returns before ZADD
    assert _members(client, redis_namespace) == members
    store.delete("a b/c")
    assert _members(client, redis_namespace) == {}
    store.close()
    client.close()


def test_expired_sessions_are_dropped_from_the_index(
    redis_url: str, redis_store_url: str, redis_namespace: str
) -> None:
    client = redis.Redis.from_url(redis_url)
    store = open_store(with_option(redis_store_url, "ttl", "1"))
    store.append("idle", [Record("r1", b"x")])
    time.sleep(1.5)
    store.append("fresh", [Record("r1", b"x")])
    assert set(_members(client, redis_namespace)) == {b"idle", b"fresh"}
    assert _ids(store) == ["fresh"]
    assert set(_members(client, redis_namespace)) == {b"fresh"}, "the expired member stayed"
    assert [info.id for info in list_session_infos(store)] == ["fresh"]
    store.close()
    client.close()


def test_a_narrow_prefix_pages_past_the_script_budget(
    redis_url: str, redis_store_url: str, redis_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import chatkeep.redis.base as base

    monkeypatch.setattr(base, "RECENT_BUDGET", 7)
    store = open_store(redis_store_url)
    store.append("wanted-old", [Record("r1", b"x")])
    for n in range(30):
        store.append(f"other-{n:02d}", [Record("r1", b"x")])
    store.append("wanted-new", [Record("r1", b"x")])
    # 2 of 32 match: taken from the prefix's range of the sessions index, one call.
    assert _ids(store, "wanted-") == ["wanted-new", "wanted-old"]
    assert _ids(store)[:3] == ["wanted-new", "other-29", "other-28"]
    assert len(_ids(store)) == 32
    # 30 of 32 match, pages of 2: the walk of {}:recent, seven members a call.
    import chatkeep.core.store as store_module

    monkeypatch.setattr(store_module, "RECENT_PAGE", 2)
    assert _ids(store, "other-") == [f"other-{n:02d}" for n in range(29, -1, -1)]
    assert _ids(store, "wanted-") == ["wanted-new", "wanted-old"]
    assert RECENT_BUDGET == 2000
    store.close()


def test_async_hooks_answer_on_the_callers_loop(redis_store_url: str) -> None:
    store = open_store(redis_store_url)
    for name in ("x", "y", "z"):
        store.append(name, [Record("r1", b"x")])

    async def collect() -> list[str]:
        return [session_id async for session_id, _ in store.arecent_sessions(limit=2)]

    assert asyncio.run(collect()) == ["z", "y"]
    assert isinstance(store.backend, RedisStore)
    store.close()


def test_a_cluster_store_does_not_declare_recent(redis_cluster_store_url: str) -> None:
    store = open_store(redis_cluster_store_url)
    assert not store.supports("recent")
    assert store.capabilities == CLUSTER_CAPABILITIES
    store.append("s", [Record("r1", b"x")])
    assert store.read("s") == [Record("r1", b"x")]
    store.close()


def test_sessions_from_before_the_index_are_put_in_once(
    redis_url: str, redis_store_url: str, redis_namespace: str
) -> None:
    client = redis.Redis.from_url(redis_url)
    store = open_store(redis_store_url)
    for name in ("old-a", "old-b"):
        store.append(name, [Record("r1", b"x")])
    store.close()
    # As an older chatkeep-redis left them: in the sessions index, not in {}:recent.
    client.delete(f"{redis_namespace}{{}}:recent", f"{redis_namespace}{{}}:recent-indexed")
    store = open_store(redis_store_url)
    store.append("new", [Record("r1", b"x")])
    pairs = list(store.recent_sessions())
    assert [name for name, _ in pairs] == ["new", "old-b", "old-a"]  # old ones at time 0
    assert [updated.timestamp() for _, updated in pairs[1:]] == [0.0, 0.0]
    assert client.exists(f"{redis_namespace}{{}}:recent-indexed")
    store.append("old-a", [Record("r2", b"y")])  # its next append gives it a real time
    assert _ids(store) == ["old-a", "new", "old-b"]
    store.close()
    client.close()


def test_ties_are_by_id_descending_and_pages_split_them(
    redis_url: str, redis_store_url: str, redis_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sessions whose last appends share one score (the server's clock cannot be made to
    repeat from outside, so the test writes the tie into ``{}:recent``): newest first, ties
    by id descending in code-point order (ids whose encoding differs from them included),
    and keyset pages that end inside a tie go on after it."""
    import chatkeep.core.store as store_module

    client = redis.Redis.from_url(redis_url)
    store = open_store(redis_store_url)
    names = ["a", "c", "b", "e", "d", "a b", "a!", "a~", "a/"]
    for name in [*names, "newest"]:
        store.append(name, [Record("r1", b"x")])
    key = f"{redis_namespace}{{}}:recent"
    newest = client.zscore(key, b"newest")
    assert newest is not None
    client.zadd(key, {member: newest - 3600 for member in _members(client, redis_namespace)})
    client.zadd(key, {b"newest": newest})
    expected = ["newest", *sorted(names, reverse=True)]
    assert _ids(store) == expected
    monkeypatch.setattr(store_module, "RECENT_PAGE", 2)  # pages end inside the tie
    assert _ids(store) == expected
    # A prefix few match (from the sessions index) and one most match (the walk), in
    # pages of 2 and whole: the same order.
    narrow = sorted((n for n in names if n.startswith("a")), reverse=True)
    assert _ids(store, "a") == narrow
    monkeypatch.setattr(store_module, "RECENT_PAGE", 100)
    assert _ids(store, "a") == narrow
    assert _ids(store, "") == expected
    for name in [*names, "newest"]:
        store.delete(name)
    store.close()
    client.close()


def test_a_tie_larger_than_a_batch_is_ordered_by_decoded_id(
    redis_url: str, redis_store_url: str, redis_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tie of more members than one ``ZRANGE`` batch (200) or one script's budget, whose
    encoded order ('%2F' < '%C3' < '-') is not the code-point order ('-' < '/' < 'é'):
    walked whole, in pages, and with the script resuming inside the tie."""
    import chatkeep.core.store as store_module
    import chatkeep.redis.base as base

    client = redis.Redis.from_url(redis_url)
    store = open_store(redis_store_url)
    tied = [f"t{n:02d}{end}" for n in range(70) for end in ("-", "/", "é")]
    plain = [f"u{n:03d}" for n in range(210)]  # no escape: Redis's own order is kept
    older = ["o-", "o/", "oé"]
    for name in [*tied, *plain, *older]:
        store.append(name, [Record("r1", b"x")])
    key = f"{redis_namespace}{{}}:recent"
    members = _members(client, redis_namespace)
    top = max(members.values())
    client.zadd(key, {member: top for member in members})
    client.zadd(key, {name.encode(): top - 30 for name in plain})
    client.zadd(key, {m.encode(): top - 60 for m in ("o-", "o%2F", "o%C3%A9")})
    expected = [*sorted(tied, reverse=True), *sorted(plain, reverse=True)]
    expected += sorted(older, reverse=True)
    assert expected[:3] == ["t69é", "t69/", "t69-"]
    assert _ids(store) == expected
    assert _ids(store, "t0") == [n for n in expected if n.startswith("t0")]  # the walk
    assert _ids(store, "t05") == ["t05é", "t05/", "t05-"]  # the sessions index
    monkeypatch.setattr(store_module, "RECENT_PAGE", 3)
    assert _ids(store) == expected
    monkeypatch.setattr(base, "RECENT_BUDGET", 7)  # the script stops inside the tie
    assert _ids(store) == expected
    assert _ids(store, "t1") == [n for n in expected if n.startswith("t1")]
    for name in [*tied, *plain, *older]:
        store.delete(name)
    store.close()
    client.close()
