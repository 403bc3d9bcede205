"""LangGraph's own checkpointer conformance suite (langgraph-checkpoint-conformance, the
published package) on every backend, at its highest level: every base and extended
capability detected and passed ("FULL").

Three ways in: the async methods (what the suite calls), the sync methods (the suite run
through a subclass whose async methods call the sync ones in a thread), and the fallback
for stores without conditional appends (the capability hidden).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import CapabilityReport
from lg_support import counting_store

from chatkeep.core import open_store
from chatkeep.langgraph import ChatkeepSaver


class SyncDriven(ChatkeepSaver):
    """The async interface served by the sync methods (so the suite tests those)."""

    async def aget_tuple(self, config: Any) -> Any:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(self, config: Any, **kwargs: Any) -> AsyncIterator[Any]:
        for item in await asyncio.to_thread(lambda: list(self.list(config, **kwargs))):
            yield item

    async def aput(self, *args: Any) -> Any:
        return await asyncio.to_thread(self.put, *args)

    async def aput_writes(self, *args: Any, **kwargs: Any) -> None:
        await asyncio.to_thread(self.put_writes, *args, **kwargs)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source: str, target: str) -> None:
        await asyncio.to_thread(self.copy_thread, source, target)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


def _validate(name: str, make: Callable[[], ChatkeepSaver]) -> CapabilityReport:
    @checkpointer_test(name=name)
    async def factory() -> AsyncIterator[ChatkeepSaver]:
        saver = make()
        yield saver
        await saver.aclose()

    report = asyncio.run(validate(factory))
    report.print_report()
    return report


def _assert_full(report: CapabilityReport) -> None:
    failures = [f for r in report.results.values() for f in r.failures]
    assert not failures, "\n".join(failures)
    detected = {name for name, result in report.results.items() if result.detected}
    assert detected == {c.value for c in ALL_CAPABILITIES}
    assert all(result.passed is True for result in report.results.values())
    assert sum(result.tests_passed for result in report.results.values()) >= 80
    assert report.conformance_level() == "FULL"


def test_conformance_async(backend: str, url: str, prefix: str) -> None:
    report = _validate(f"ChatkeepSaver[{backend}]", lambda: ChatkeepSaver(url=url, prefix=prefix))
    _assert_full(report)


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres", "redis"], indirect=True)
def test_conformance_sync(backend: str, url: str, prefix: str) -> None:
    report = _validate(
        f"ChatkeepSaver[{backend}, sync]", lambda: SyncDriven(url=url, prefix=prefix)
    )
    _assert_full(report)


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres", "redis"], indirect=True)
def test_conformance_without_conditional_appends(backend: str, url: str, prefix: str) -> None:
    def make() -> ChatkeepSaver:
        store, _counter = counting_store(open_store(url), hide=frozenset({"conditional"}))
        assert not store.supports("conditional")
        return ChatkeepSaver(store=store, prefix=prefix)

    report = _validate(f"ChatkeepSaver[{backend}, no conditional]", make)
    _assert_full(report)


@pytest.mark.parametrize("backend", ["memory", "sqlite"], indirect=True)
def test_conformance_over_the_encryption_wrapper(
    backend: str, url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrapper backend (``encrypted+<URL>``) is just another store to the saver."""
    from chatkeep.encrypted import Keyring

    monkeypatch.setenv("CHATKEEP_ENCRYPTION_KEYS", "test:" + Keyring.generate_key())
    wrapped = f"encrypted+{url}"
    report = _validate(
        f"ChatkeepSaver[encrypted+{backend}]", lambda: ChatkeepSaver(url=wrapped, prefix=prefix)
    )
    _assert_full(report)
    at_rest = open_store(url)
    sessions = list(at_rest.list_sessions(prefix))
    assert sessions and all(b"channel1" not in r.data for s in sessions for r in at_rest.read(s))
    at_rest.close()
