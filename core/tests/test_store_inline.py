"""Inline hooks: a sync backend that declares ``inline_hooks`` is called on the event loop
under ``await`` (no worker thread); any other sync hook still runs in a worker thread."""

from __future__ import annotations

import asyncio
import threading

import pytest

from chatkeep.core import Record, Store, open_store


class _Recording:
    """A sync backend noting the thread of each call."""

    capabilities = frozenset({"conditional"})

    def __init__(self) -> None:
        self.logs: dict[str, list[Record]] = {}
        self.threads: dict[str, int] = {}

    def append(self, session_id: str, records: list[Record]) -> None:
        self.threads["append"] = threading.get_ident()
        self.logs.setdefault(session_id, []).extend(records)

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        self.threads["append_if"] = threading.get_ident()
        self.logs.setdefault(session_id, []).extend(records)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        self.threads["read"] = threading.get_ident()
        return self.logs.get(session_id, [])[start:stop]


class _Inline(_Recording):
    inline_hooks = frozenset({"read", "append", "append_if"})


async def _calls(store: Store, session_id: str = "s") -> int:
    await store.aappend(session_id, [Record("a", b"1")])
    await store.aappend_if(session_id, [Record("b", b"2")], after="a")
    assert [r.id for r in await store.aread(session_id)] == ["a", "b"]
    return threading.get_ident()


def test_declared_hooks_run_on_the_event_loop() -> None:
    backend = _Inline()
    store = Store(backend)
    assert store.inline_hooks == {"read", "append", "append_if"}
    loop_thread = asyncio.run(_calls(store))
    assert backend.threads == dict.fromkeys(("read", "append", "append_if"), loop_thread)


def test_undeclared_hooks_run_in_worker_threads() -> None:
    backend = _Recording()
    store = Store(backend)
    assert store.inline_hooks == frozenset()
    loop_thread = asyncio.run(_calls(store))
    assert loop_thread not in backend.threads.values()


def test_inline_hooks_can_be_turned_off_per_store() -> None:
    backend = _Inline()
    store = Store(backend)
    store.inline_hooks = frozenset({"read"})
    loop_thread = asyncio.run(_calls(store))
    assert backend.threads["read"] == loop_thread
    assert backend.threads["append"] != loop_thread
    assert backend.threads["append_if"] != loop_thread
    store.inline_hooks = frozenset()
    asyncio.run(_calls(store, "t"))
    assert loop_thread not in backend.threads.values()


def test_only_the_storage_hooks_can_be_inline() -> None:
    store = Store(_Inline())
    with pytest.raises(ValueError, match="delete"):
        store.inline_hooks = frozenset({"read", "delete"})
    assert store.inline_hooks == {"read", "append", "append_if"}


def test_the_memory_backend_is_inline() -> None:
    with open_store("memory://") as store:
        assert store.inline_hooks == {"read", "append", "append_if"}


class _AsyncLoopSafe:
    """An async backend declaring its hooks safe on any event loop."""

    loop_safe_async = True

    async def append(self, session_id: str, records: list[Record]) -> None:
        pass

    async def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        return []


class _SyncClaimingLoopSafe(_Recording):
    loop_safe_async = True  # no async hooks: nothing to await on the caller's loop


def test_loop_safe_async_is_the_backends_declaration() -> None:
    assert Store(_AsyncLoopSafe()).loop_safe_async is True
    assert Store(_Recording()).loop_safe_async is False  # not declared
    assert Store(_SyncClaimingLoopSafe()).loop_safe_async is False  # sync hooks only
    assert open_store("memory://").loop_safe_async is False
    store = Store(_AsyncLoopSafe())
    store.loop_safe_async = False  # an application may keep callers on worker threads
    assert store.loop_safe_async is False
