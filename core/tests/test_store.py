"""The Store adapter: sync and async callers over sync, async and mixed backends."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, ClassVar, TypeVar

import pytest

from chatkeep.core import (
    CapabilityMissing,
    InvalidRecord,
    InvalidSessionId,
    Record,
    Store,
)
from chatkeep.core.memory import MemoryStore

T = TypeVar("T")
ALL = frozenset({"delete", "list_sessions", "close"})


def run_in_thread(function: Callable[[], T], timeout: float = 10.0) -> T:
    """Run ``function`` in a daemon thread; fail (instead of hanging) if it deadlocks."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = function()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        pytest.fail(f"deadlock: call did not finish within {timeout} s")
    if "error" in outcome:
        raise outcome["error"]
    result: T = outcome["value"]
    return result


def run_async(coroutine: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
    return run_in_thread(lambda: asyncio.run(coroutine), timeout)


# -- toy backends -----------------------------------------------------------------------------


class _Log:
    """Shared bookkeeping of the toy backends."""

    def __init__(self) -> None:
        self.logs: dict[str, list[Record]] = {}
        self.calls: list[str] = []
        self.closed = 0
        self.loops: set[int] = set()
        self.threads: set[threading.Thread] = set()

    def note(self, call: str) -> None:
        self.calls.append(call)
        with contextlib.suppress(RuntimeError):  # called outside any loop
            self.loops.add(id(asyncio.get_running_loop()))
        self.threads.add(threading.current_thread())

    def do_append(self, session_id: str, records: list[Record]) -> None:
        self.logs.setdefault(session_id, []).extend(records)

    def do_read(self, session_id: str, start: int, stop: int | None) -> list[Record]:
        return list(self.logs.get(session_id, [])[start:stop])

    def do_list(self, prefix: str | None) -> list[str]:
        return [s for s in sorted(self.logs) if prefix is None or s.startswith(prefix)]


class SyncOnly(_Log):
    capabilities: ClassVar[frozenset[str]] = ALL

    def append(self, session_id: str, records: list[Record]) -> None:
        self.note("append")
        self.do_append(session_id, records)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        self.note("read")
        return self.do_read(session_id, start, stop)

    def delete(self, session_id: str) -> None:
        self.note("delete")
        self.logs.pop(session_id, None)

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        self.note("list_sessions")
        yield from self.do_list(prefix)

    def close(self) -> None:
        self.note("close")
        self.closed += 1


class AsyncOnly(_Log):
    """Every hook is ``async def`` under the plain name; list_sessions an async generator."""

    capabilities: ClassVar[frozenset[str]] = ALL

    async def append(self, session_id: str, records: list[Record]) -> None:
        self.note("append")
        await asyncio.sleep(0)
        self.do_append(session_id, records)

    async def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        self.note("read")
        await asyncio.sleep(0)
        return self.do_read(session_id, start, stop)

    async def delete(self, session_id: str) -> None:
        self.note("delete")
        self.logs.pop(session_id, None)

    async def list_sessions(self, prefix: str | None = None) -> AsyncIterator[str]:
        self.note("list_sessions")
        for name in self.do_list(prefix):
            await asyncio.sleep(0)
            yield name

    async def close(self) -> None:
        self.note("close")
        self.closed += 1


class AsyncPrefixed(_Log):
    """Async hooks only, under the ``a``-prefixed names."""

    capabilities: ClassVar[frozenset[str]] = ALL

    async def aappend(self, session_id: str, records: list[Record]) -> None:
        self.note("aappend")
        self.do_append(session_id, records)

    async def aread(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        self.note("aread")
        return self.do_read(session_id, start, stop)

    async def adelete(self, session_id: str) -> None:
        self.note("adelete")
        self.logs.pop(session_id, None)

    async def alist_sessions(self, prefix: str | None = None) -> AsyncIterator[str]:
        self.note("alist_sessions")
        for name in self.do_list(prefix):
            yield name

    async def aclose(self) -> None:
        self.note("aclose")
        self.closed += 1


class Both(AsyncPrefixed, SyncOnly):
    """Sync hooks plus async twins (``AsyncPrefixed``'s): sync callers get the sync ones,
    async callers the twins."""


class SyncWithAsyncGenListing(SyncOnly):
    """Sync append/read, but list_sessions is an async generator."""

    async def list_sessions(self, prefix: str | None = None) -> AsyncIterator[str]:  # type: ignore[override]
        self.note("list_sessions")
        for name in self.do_list(prefix):
            await asyncio.sleep(0)
            yield name


class Minimal:
    """Only the two required hooks, no capabilities."""

    def __init__(self) -> None:
        self.calls = 0

    def append(self, session_id: str, records: list[Record]) -> None:
        self.calls += 1

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        self.calls += 1
        return []


BACKENDS = [SyncOnly, AsyncOnly, AsyncPrefixed, Both, SyncWithAsyncGenListing]
R = [Record(f"r{i}", f"data {i}".encode()) for i in range(6)]


def _scenario_sync(store: Store) -> list[Any]:
    store.append("s1", R[:3])
    store.append("s1", R[3:])
    store.append("s2", [("x", b"tuple form")])
    store.append("other", R[:1])
    out: list[Any] = [
        store.read("s1"),
        store.read("s1", -2),
        store.read("s1", 1, 3),
        store.read("s1", stop=2),
        store.read("s1", -100, 100),
        store.read("unknown"),
        sorted(store.list_sessions()),
        sorted(store.list_sessions("s")),
    ]
    store.delete("s1")
    out += [store.read("s1"), sorted(store.list_sessions())]
    return out


async def _scenario_async(store: Store) -> list[Any]:
    await store.aappend("s1", R[:3])
    await store.aappend("s1", R[3:])
    await store.aappend("s2", [("x", b"tuple form")])
    await store.aappend("other", R[:1])
    out: list[Any] = [
        await store.aread("s1"),
        await store.aread("s1", -2),
        await store.aread("s1", 1, 3),
        await store.aread("s1", stop=2),
        await store.aread("s1", -100, 100),
        await store.aread("unknown"),
        sorted([s async for s in store.alist_sessions()]),
        sorted([s async for s in store.alist_sessions("s")]),
    ]
    await store.adelete("s1")
    out += [await store.aread("s1"), sorted([s async for s in store.alist_sessions()])]
    return out


EXPECTED = [
    R,
    R[-2:],
    R[1:3],
    R[:2],
    R,
    [],
    ["other", "s1", "s2"],
    ["s1", "s2"],
    [],
    ["other", "s2"],
]


@pytest.mark.parametrize("backend_class", BACKENDS)
def test_sync_api_works_for_every_backend_kind(backend_class: type[_Log]) -> None:
    store = Store(backend_class())
    try:
        assert run_in_thread(lambda: _scenario_sync(store)) == EXPECTED
    finally:
        store.close()


@pytest.mark.parametrize("backend_class", BACKENDS)
def test_async_api_works_for_every_backend_kind(backend_class: type[_Log]) -> None:
    store = Store(backend_class())

    async def main() -> list[Any]:
        try:
            return await _scenario_async(store)
        finally:
            await store.aclose()

    assert run_async(main()) == EXPECTED


@pytest.mark.parametrize("backend_class", BACKENDS)
def test_sync_api_called_inside_a_running_loop_does_not_deadlock(
    backend_class: type[_Log],
) -> None:
    store = Store(backend_class())

    async def main() -> list[Any]:
        return _scenario_sync(store)  # blocking calls from a coroutine

    try:
        assert run_async(main()) == EXPECTED
    finally:
        store.close()


def test_both_kinds_use_the_matching_implementation() -> None:
    backend = Both()
    store = Store(backend)
    _scenario_sync(store)
    assert set(backend.calls) == {"append", "read", "list_sessions", "delete"}
    backend.calls.clear()
    run_async(_scenario_async(store))
    assert set(backend.calls) == {"aappend", "aread", "alist_sessions", "adelete"}
    store.close()
    assert backend.calls[-1] == "close"


def test_async_backend_driven_from_sync_code_uses_one_private_loop() -> None:
    backend = AsyncOnly()
    store = Store(backend)
    for i in range(5):
        store.append("s", [Record(f"id{i}", b"")])
        store.read("s")
    # One loop for every call, so connections a driver binds to its loop stay valid.
    assert len(backend.loops) == 1
    (thread,) = backend.threads
    assert thread is not threading.current_thread()
    assert thread.is_alive()
    store.close()
    assert not thread.is_alive()


def test_blocking_call_from_the_backends_own_loop_raises_instead_of_deadlocking() -> None:
    class Reentrant(AsyncOnly):
        store: Store

        async def read(
            self, session_id: str, start: int = 0, stop: int | None = None
        ) -> list[Record]:
            return self.store.read("other")  # a blocking call on the store's own loop

    backend = Reentrant()
    store = backend.store = Store(backend)
    try:
        with pytest.raises(RuntimeError, match="own backend loop"):
            run_in_thread(lambda: store.read("s"))
    finally:
        store.close()


def test_aread_on_a_sync_backend_does_not_block_the_event_loop() -> None:
    class Slow(SyncOnly):
        def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
            time.sleep(0.2)
            return super().read(session_id, start, stop)

        def append(self, session_id: str, records: list[Record]) -> None:
            time.sleep(0.2)
            super().append(session_id, records)

    store = Store(Slow())

    async def main() -> tuple[int, list[Record]]:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        await store.aappend("s", R[:2])
        result = await store.aread("s")
        stop.set()
        await task
        return ticks, result

    ticks, result = run_async(main())
    assert result == R[:2]
    assert ticks >= 10  # ~0.4 s of sleeping backend; a blocked loop would tick once


# -- validation before the backend -------------------------------------------------------------


@pytest.mark.parametrize("bad", ["", "a" * 513, "a\x00", None, 5, "\ud800"])
def test_invalid_session_ids_never_reach_the_backend(bad: Any) -> None:
    backend = SyncOnly()
    store = Store(backend)
    for call in (
        lambda: store.append(bad, R[:1]),
        lambda: store.read(bad),
        lambda: store.delete(bad),
        lambda: asyncio.run(store.aappend(bad, R[:1])),
        lambda: asyncio.run(store.aread(bad)),
        lambda: asyncio.run(store.adelete(bad)),
    ):
        with pytest.raises(InvalidSessionId):
            call()
    assert backend.calls == []


@pytest.mark.parametrize("batch", [[], (), iter([])])
def test_empty_batch_never_reaches_the_backend(batch: Any) -> None:
    backend = SyncOnly()
    store = Store(backend)
    store.append("s", batch)
    asyncio.run(store.aappend("s", []))
    assert backend.calls == []
    assert store.read("s") == []


def test_invalid_batches_never_reach_the_backend() -> None:
    backend = AsyncOnly()
    store = Store(backend)
    for batch in ([("a", b""), ("a", b"")], [("a", "str data")], [("", b"")]):
        with pytest.raises(InvalidRecord):
            store.append("s", batch)  # type: ignore[arg-type]
        with pytest.raises(InvalidRecord):
            asyncio.run(store.aappend("s", batch))  # type: ignore[arg-type]
    assert backend.calls == []
    store.close()


def test_appended_bytearray_is_not_aliased() -> None:
    store = Store(MemoryStore())
    buffer = bytearray(b"first")
    store.append("s", [Record("a", buffer)])  # type: ignore[arg-type]
    buffer[:] = b"later"
    assert store.read("s") == [Record("a", b"first")]
    assert type(store.read("s")[0].data) is bytes


@pytest.mark.parametrize(
    ("start", "stop"), [("1", None), (1.0, None), (None, None), (True, None), (0, "2"), (0, 2.5)]
)
def test_invalid_slice_arguments_raise_type_error(start: Any, stop: Any) -> None:
    backend = SyncOnly()
    store = Store(backend)
    with pytest.raises(TypeError):
        store.read("s", start, stop)
    with pytest.raises(TypeError):
        asyncio.run(store.aread("s", start, stop))
    assert backend.calls == []


def test_list_sessions_prefix_must_be_str() -> None:
    store = Store(SyncOnly())
    with pytest.raises(TypeError):
        list(store.list_sessions(5))  # type: ignore[arg-type]


# -- capabilities, construction, close ---------------------------------------------------------


def test_undeclared_capabilities_raise_capability_missing() -> None:
    backend = Minimal()
    store = Store(backend, name="minimal")
    assert not store.supports("delete")
    with pytest.raises(CapabilityMissing, match=r"'minimal'.*'delete'"):
        store.delete("s")
    with pytest.raises(CapabilityMissing, match="list_sessions"):
        list(store.list_sessions())

    async def main() -> None:
        with pytest.raises(CapabilityMissing):
            await store.adelete("s")
        with pytest.raises(CapabilityMissing):
            [s async for s in store.alist_sessions()]

    asyncio.run(main())
    assert backend.calls == 0
    assert issubclass(CapabilityMissing, NotImplementedError)


def test_capabilities_come_from_the_backend_or_the_caller() -> None:
    assert Store(SyncOnly()).capabilities == ALL
    assert Store(SyncOnly()).supports("list_sessions")
    assert Store(SyncOnly(), capabilities=["delete"]).capabilities == {"delete"}
    assert Store(Minimal()).capabilities == frozenset()


def test_an_object_without_the_hooks_is_not_a_backend() -> None:
    class NoRead:
        def append(self, session_id: str, records: list[Record]) -> None: ...

    with pytest.raises(TypeError, match="append and read"):
        Store(NoRead())
    with pytest.raises(TypeError):
        Store(object())


@pytest.mark.parametrize("backend_class", BACKENDS)
def test_close_is_idempotent(backend_class: type[_Log]) -> None:
    backend = backend_class()
    store = Store(backend)
    store.read("s")
    store.close()
    store.close()
    assert backend.closed == 1

    backend = backend_class()
    store = Store(backend)

    async def main() -> None:
        await store.aread("s")
        await store.aclose()
        await store.aclose()

    run_async(main())
    assert backend.closed == 1


def test_context_managers_close() -> None:
    backend = AsyncOnly()
    with Store(backend) as store:
        store.append("s", R[:1])
        (thread,) = backend.threads
    assert backend.closed == 1
    assert not thread.is_alive()

    backend = AsyncOnly()

    async def main() -> None:
        async with Store(backend) as store:
            await store.aappend("s", R[:1])

    run_async(main())
    assert backend.closed == 1


def test_close_without_close_hook_is_harmless() -> None:
    store = Store(Minimal())
    store.close()
    store.close()


def test_store_exposes_its_backend_and_name() -> None:
    backend = SyncOnly()
    store = Store(backend)
    assert store.backend is backend
    assert store.name == "SyncOnly"
    assert "SyncOnly" in repr(store)
    assert Store(backend, name="custom").name == "custom"


def test_an_async_listing_closed_early_closes_the_backends_listing_at_once() -> None:
    # A caller that stops after the first id: the backend's listing (and the page it
    # holds) is closed with the store's, not left to the loop's collection.
    closed: list[str] = []

    class Listing(AsyncPrefixed):
        async def alist_sessions(self, prefix: str | None = None) -> AsyncIterator[str]:
            try:
                for name in self.do_list(prefix):
                    yield name
            finally:
                closed.append("closed")

    store = Store(Listing(), name="listing")

    async def first_only() -> None:
        await store.aappend("a", R[:1])
        await store.aappend("b", R[:1])
        listing = store.alist_sessions()
        assert await listing.__anext__() == "a"
        await listing.aclose()  # type: ignore[attr-defined]
        assert closed == ["closed"]

    asyncio.run(first_only())
