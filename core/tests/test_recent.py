"""The ``recent`` capability: Store.recent_sessions and the listing that uses it."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timezone

import pytest

import chatkeep.core.store as store_module
from chatkeep.core import CapabilityMissing, HistoryProvider, Record, Store
from chatkeep.core.memory import MemoryStore
from chatkeep.core.metadata import alist_session_infos, list_session_infos
from chatkeep.core.store import RECENT
from chatkeep.core.views._erase import TEMP_PREFIX

from .conftest import CountingBackend
from .test_metadata import chat

MakeStore = Callable[..., tuple[Store, CountingBackend]]


def _sessions(store: Store, count: int, prefix: str = "s") -> list[str]:
    names = [f"{prefix}{n:04d}" for n in range(count)]
    for name in names:
        store.append(name, [Record("r1", b"x")])
    return names


def test_memory_declares_recent() -> None:
    assert RECENT in MemoryStore.capabilities
    assert Store(MemoryStore()).supports("recent")


def test_newest_first_with_utc_times() -> None:
    store = Store(MemoryStore())
    before = time.time()
    names = _sessions(store, 5)
    store.append(names[1], [Record("r2", b"y")])  # now the newest
    pairs = list(store.recent_sessions())
    assert [name for name, _ in pairs] == [names[1], names[4], names[3], names[2], names[0]]
    for _, updated in pairs:
        assert updated.tzinfo is timezone.utc
        assert before - 1 <= updated.timestamp() <= time.time() + 1
    assert [name for name, _ in store.recent_sessions(limit=2)] == [names[1], names[4]]
    assert list(store.recent_sessions(limit=0)) == []


def test_a_retry_that_stores_nothing_does_not_move_a_session() -> None:
    store = Store(MemoryStore())
    store.append("a", [Record("r1", b"x")])
    store.append("b", [Record("r1", b"x")])
    stamp = dict(store.recent_sessions())["a"]
    store.append("a", [Record("r1", b"x")])  # an idempotent retry
    assert [name for name, _ in store.recent_sessions()] == ["b", "a"]
    assert dict(store.recent_sessions())["a"] == stamp
    store.append("a", [Record("r1", b"x"), Record("r2", b"y")])  # stores r2: moves
    assert [name for name, _ in store.recent_sessions()] == ["a", "b"]


def test_prefix_delete_and_namespaces() -> None:
    store = Store(MemoryStore("recent-ns"))
    tenant = Store(MemoryStore("recent-ns", namespace="t"))
    _sessions(store, 3, "p-")
    _sessions(store, 2, "q-")
    tenant.append("p-tenant", [Record("r", b"x")])
    assert [n for n, _ in store.recent_sessions("p-")] == ["p-0002", "p-0001", "p-0000"]
    store.delete("p-0001")
    assert [n for n, _ in store.recent_sessions("p-")] == ["p-0002", "p-0000"]
    assert [n for n, _ in tenant.recent_sessions()] == ["p-tenant"]


def test_ties_are_broken_by_id_descending(monkeypatch: pytest.MonkeyPatch) -> None:
    import chatkeep.core.memory as memory

    monkeypatch.setattr(memory.time, "time", lambda: 1_000_000.0)
    store = Store(MemoryStore())
    _sessions(store, 4)
    assert [n for n, _ in store.recent_sessions()] == ["s0003", "s0002", "s0001", "s0000"]


def test_keyset_paging_across_pages(
    counting_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "RECENT_PAGE", 3)
    store, backend = counting_store()
    clock = itertools.count(1_000_000)
    import chatkeep.core.memory as memory

    # Pairs of sessions share a time: a page boundary falls inside a tie.
    monkeypatch.setattr(memory.time, "time", lambda: float(next(clock) // 2))
    names = _sessions(store, 10)
    listed = [n for n, _ in store.recent_sessions()]
    assert listed == sorted(names, key=lambda n: (names.index(n) // 2, n), reverse=True)
    assert [limit for _, _, limit in backend.recent_calls] == [3, 3, 3, 3]
    backend.recent_calls.clear()
    assert len(list(store.recent_sessions(limit=7))) == 7
    assert [limit for _, _, limit in backend.recent_calls] == [3, 3, 1]
    cursors = [before for _, before, _ in backend.recent_calls]
    assert cursors[0] is None and cursors[1] is not None and cursors[1][1] == listed[2]


def test_arguments_are_checked_at_the_call() -> None:
    store = Store(MemoryStore())
    with pytest.raises(TypeError):
        store.recent_sessions(prefix=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        store.arecent_sessions(limit="2")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        store.recent_sessions(limit=-1)
    bare = Store(MemoryStore(), capabilities={"list_sessions"})
    with pytest.raises(CapabilityMissing):
        bare.recent_sessions()
    with pytest.raises(CapabilityMissing):
        bare.arecent_sessions()


async def _collect(pairs: AsyncIterator[tuple[str, datetime]]) -> list[tuple[str, datetime]]:
    return [pair async for pair in pairs]


def test_async_matches_sync() -> None:
    store = Store(MemoryStore())
    _sessions(store, 4)
    expected = list(store.recent_sessions(limit=3))
    assert asyncio.run(_collect(store.arecent_sessions(limit=3))) == expected
    store.inline_hooks = frozenset()  # through a worker thread
    assert asyncio.run(_collect(store.arecent_sessions(limit=3))) == expected


class _AsyncBackend:
    """A memory store behind coroutine hooks (the loop-thread path of a sync call)."""

    capabilities = frozenset({"list_sessions", "recent"})

    def __init__(self) -> None:
        self.inner = MemoryStore()

    async def append(self, session_id: str, records: list[Record]) -> None:
        self.inner.append(session_id, records)

    async def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        return self.inner.read(session_id, start, stop)

    async def list_sessions(self, prefix: str | None = None) -> AsyncIterator[str]:
        for name in self.inner.list_sessions(prefix):
            yield name

    async def recent_sessions(
        self, prefix: str | None, before: tuple[float, str] | None, limit: int
    ) -> list[tuple[str, float]]:
        return self.inner.recent_sessions(prefix, before, limit)


def test_an_async_backend_serves_both_sides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "RECENT_PAGE", 2)
    store = Store(_AsyncBackend())
    names = _sessions(store, 5)
    assert [n for n, _ in store.recent_sessions()] == names[::-1]
    assert [n for n, _ in asyncio.run(_collect(store.arecent_sessions()))] == names[::-1]
    store.close()


# -- list_session_infos on the index ------------------------------------------------------


def test_the_newest_are_listed_without_reading_every_session(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    provider = HistoryProvider(store)
    names = [f"chat-{n:03d}" for n in range(300)]
    for name in names:
        chat(provider, name, (f"about {name}", "ok"))
    backend.reads.clear()
    listed = [info.id for info in list_session_infos(store, limit=5)]
    assert listed == names[::-1][:5]
    assert {session for session, *_ in backend.reads} == set(listed), "read an unlisted session"
    assert len(backend.reads) <= 5 * 3  # head, tail and the running count's check
    assert len(backend.recent_calls) == 1
    # Without a limit the listing streams: taking three describes three.
    backend.reads.clear()
    first_three = [info.id for info in itertools.islice(list_session_infos(store), 3)]
    assert first_three == names[::-1][:3]
    assert {session for session, *_ in backend.reads} == set(first_three)


def test_the_async_listing_uses_the_index(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    provider = HistoryProvider(store)
    for name in ("b", "a", "c"):
        chat(provider, f"p-{name}", (f"about {name}", "ok"))
    chat(provider, "other", ("not listed", "ok"))
    backend.reads.clear()

    async def collect() -> list[str]:
        return [info.id async for info in alist_session_infos(store, prefix="p-", limit=2)]

    assert asyncio.run(collect()) == ["p-c", "p-a"]
    assert {session for session, *_ in backend.reads} == {"p-c", "p-a"}
    assert backend.recent_calls[-1][0] == "p-"


def test_internal_sessions_stay_out_of_the_listing() -> None:
    store = Store(MemoryStore())
    chat(HistoryProvider(store), "visible", ("hello", "hi"))
    store.append(TEMP_PREFIX + "x", [Record("r", b'{"type":"message","role":"user"}')])
    assert TEMP_PREFIX + "x" in {n for n, _ in store.recent_sessions()}
    assert [info.id for info in list_session_infos(store)] == ["visible"]


def test_recent_page_is_one_backend_call(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    _sessions(store, 5)
    page = store.recent_page(None, None, 2)
    assert [name for name, _ in page] == ["s0004", "s0003"]
    assert all(type(updated) is float for _, updated in page)
    assert [name for name, _ in store.recent_page(None, (page[-1][1], page[-1][0]), 10)] == [
        "s0002",
        "s0001",
        "s0000",
    ]
    assert asyncio.run(store.arecent_page("s", None, 1)) == page[:1]
    assert len(backend.recent_calls) == 3
    for bad in ((1.0,), ("1", "s"), [1.0, "s"], (1.0, 2)):
        with pytest.raises(TypeError):
            store.recent_page(None, bad, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        store.recent_page(None, None, -1)
    async_store = Store(_AsyncBackend())
    _sessions(async_store, 2)
    assert [n for n, _ in async_store.recent_page(None, None, 5)] == ["s0001", "s0000"]
    assert [n for n, _ in asyncio.run(async_store.arecent_page(None, None, 1))] == ["s0001"]
    async_store.close()


class _CopiesCapabilities:
    """A wrapper written before ``recent`` existed: it copies its inner store's capabilities
    but forwards only the hooks it knows."""

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner
        self.capabilities = inner.capabilities - {"conditional"}

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        return self.inner.read(session_id, start, stop)

    def append(self, session_id: str, records: list[Record]) -> None:
        self.inner.append(session_id, records)

    def list_sessions(self, prefix: str | None = None) -> object:
        return self.inner.list_sessions(prefix)


def test_recent_declared_without_its_hook_is_dropped_and_the_listing_falls_back() -> None:
    inner = MemoryStore()
    assert RECENT in inner.capabilities
    store = Store(_CopiesCapabilities(inner))
    assert not store.supports(RECENT)
    with pytest.raises(CapabilityMissing):
        store.recent_sessions()
    for name in ("older", "newer"):
        chat(HistoryProvider(store), name, ("hello", "hi"))
        time.sleep(0.002)  # distinct storage times, whatever the clock's resolution
    assert [info.id for info in list_session_infos(store)] == ["newer", "older"]
