"""Stores that declare ``shared``: other handles and other processes see the same data."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from chatkeep.core import Record, Store

from .._tracking import Tracker
from .._workers import Outcome, WorkerFleet
from ..checks import assert_batches_intact, new_session_id, plan_batches, records
from ..settings import SuiteSettings
from ._base import ConformanceBase

__all__ = [
    "CrashDurabilityTests",
    "CrossHandleDeleteTests",
    "CrossHandleTests",
    "CrossProcessRetryTests",
    "ProcessOrderTests",
    "SharedStoreTests",
]

_BATCHES = 25
_PER_BATCH = 3


def _wire(batches: list[list[Record]]) -> list[list[tuple[str, bytes]]]:
    return [[(r.id, r.data) for r in batch] for batch in batches]


def _append(url: str, session: str, batches: list[list[Record]], **extra: Any) -> dict[str, Any]:
    return {
        "op": "append",
        "url": url,
        "options": {},
        "session_id": session,
        "batches": _wire(batches),
        **extra,
    }


def _all_ok(outcomes: dict[int, Outcome]) -> None:
    failed = [outcome.describe() for outcome in outcomes.values() if not outcome.ok]
    assert not failed, "\n".join(failed)


class SharedStoreTests(ConformanceBase):
    """Writes through one handle or process are visible to all, and concurrent appends from
    several OS processes all survive."""

    def test_writes_are_visible_to_another_handle(
        self, chatkeep_store: Store, chatkeep_reopen: Callable[[], Store]
    ) -> None:
        session = new_session_id()
        other = chatkeep_reopen()
        chatkeep_store.append(session, records(2, "a"))
        assert other.read(session) == records(2, "a")
        other.append(session, records(2, "b"))
        assert chatkeep_store.read(session) == records(2, "a") + records(2, "b")

    def test_processes_append_to_one_session(
        self,
        chatkeep_url: str,
        chatkeep_store: Store,
        chatkeep_workers: WorkerFleet,
        chatkeep_tracker: Tracker,
        chatkeep_settings: SuiteSettings,
    ) -> None:
        session = new_session_id("procs")
        chatkeep_tracker.sessions().add(session)
        writers = range(chatkeep_settings.processes)
        plans = {f"p{n}": plan_batches(f"p{n}", _BATCHES, _PER_BATCH) for n in writers}
        start_at = time.time() + 0.5
        outcomes = chatkeep_workers.run(
            {n: _append(chatkeep_url, session, plans[f"p{n}"], start_at=start_at) for n in writers}
        )
        _all_ok(outcomes)
        assert_batches_intact(chatkeep_store.read(session), plans)


class CrossHandleTests(ConformanceBase):
    """A handle that has read a session sees what another handle wrote since (full, tail and
    slice reads): no cache outlives another writer's append or delete."""

    def test_reads_after_another_handle_appended(
        self, chatkeep_store: Store, chatkeep_reopen: Callable[[], Store]
    ) -> None:
        session = new_session_id()
        other = chatkeep_reopen()
        chatkeep_store.append(session, records(3, "a"))
        for _ in range(2):  # warm every read path of the first handle
            chatkeep_store.read(session)
            chatkeep_store.read(session, -2)
            chatkeep_store.read(session, 1, 3)
        other.append(session, records(2, "b"))
        log = records(3, "a") + records(2, "b")
        assert chatkeep_store.read(session) == log, "a full read missed another handle's append"
        assert chatkeep_store.read(session, -2) == log[-2:], "a tail read is stale"
        assert chatkeep_store.read(session, 1, 5) == log[1:5], "a slice read is stale"
        assert chatkeep_store.read(session, -1) == log[-1:]


class CrossHandleDeleteTests(ConformanceBase):
    """``shared`` and ``delete``: a handle that has read a session sees another handle's
    delete at once, on every read path."""

    def test_reads_after_another_handle_deleted(
        self, chatkeep_store: Store, chatkeep_reopen: Callable[[], Store]
    ) -> None:
        session = new_session_id()
        other = chatkeep_reopen()
        chatkeep_store.append(session, records(4))
        chatkeep_store.read(session)
        chatkeep_store.read(session, -2)
        other.delete(session)
        assert chatkeep_store.read(session) == [], "a full read shows erased records"
        assert chatkeep_store.read(session, -2) == [], "a tail read shows erased records"
        other.append(session, records(1, "new"))
        assert chatkeep_store.read(session, -2) == records(1, "new")


class ProcessOrderTests(ConformanceBase):
    """Appends that complete one after another, from different processes, read back in
    that order (not in the order of each writer's clock, pid or handle)."""

    def test_appends_from_processes_in_turn_keep_their_order(
        self,
        chatkeep_url: str,
        chatkeep_store: Store,
        chatkeep_workers: WorkerFleet,
        chatkeep_tracker: Tracker,
        chatkeep_settings: SuiteSettings,
    ) -> None:
        session = new_session_id("order")
        chatkeep_tracker.sessions().add(session)
        expected: list[Record] = []
        for turn in range(4 * chatkeep_settings.processes):
            writer = turn % chatkeep_settings.processes
            batch = [Record(f"turn{turn:03d}.{n}", f"{writer}".encode()) for n in range(2)]
            if turn % 5 == 4:  # this process's own appends interleave too
                chatkeep_store.append(session, batch)
            else:
                _all_ok(chatkeep_workers.run({writer: _append(chatkeep_url, session, [batch])}))
            expected += batch
        got = chatkeep_store.read(session)
        assert [r.id for r in got] == [r.id for r in expected], (
            "appends made one after another were read back in another order"
        )


class CrossProcessRetryTests(ConformanceBase):
    """Record ids are checked across processes and after other appends: a re-sent batch is
    a no-op, a reused id with other data raises ``RecordConflict``."""

    def test_retry_from_another_process_after_other_appends(
        self,
        chatkeep_url: str,
        chatkeep_store: Store,
        chatkeep_workers: WorkerFleet,
        chatkeep_tracker: Tracker,
    ) -> None:
        session = new_session_id("retry")
        chatkeep_tracker.sessions().add(session)
        batch = records(3, "sent")
        _all_ok(chatkeep_workers.run({0: _append(chatkeep_url, session, [batch])}))
        for n in range(6):
            chatkeep_store.append(session, records(2, f"later{n}"))
        log = chatkeep_store.read(session)
        # The whole batch again, and a batch with one of its records and a new one.
        _all_ok(chatkeep_workers.run({1: _append(chatkeep_url, session, [batch])}))
        assert chatkeep_store.read(session) == log, "a re-sent batch was stored again"
        mixed = [batch[1], Record("fresh", b"new")]
        _all_ok(chatkeep_workers.run({1: _append(chatkeep_url, session, [mixed])}))
        assert chatkeep_store.read(session) == [*log, Record("fresh", b"new")]
        conflicting = [Record("other", b"o"), Record(batch[0].id, b"different data")]
        outcome = chatkeep_workers.run({0: _append(chatkeep_url, session, [conflicting])})[0]
        assert outcome.error_type == "RecordConflict", (
            f"a reused id with other data from another process: {outcome.describe()}"
        )
        assert chatkeep_store.read(session) == [*log, Record("fresh", b"new")]

    def test_retry_after_the_writer_died(
        self,
        chatkeep_url: str,
        chatkeep_store: Store,
        chatkeep_workers: WorkerFleet,
        chatkeep_tracker: Tracker,
    ) -> None:
        session = new_session_id("crash")
        chatkeep_tracker.sessions().add(session)
        batch = records(4, "acked")
        died = chatkeep_workers.run(
            {0: {**_append(chatkeep_url, session, [batch]), "op": "append_and_die"}}
        )[0]
        assert died.ok, died.describe()
        chatkeep_store.append(session, records(2, "meanwhile"))
        _all_ok(chatkeep_workers.run({1: _append(chatkeep_url, session, [batch])}))
        assert chatkeep_store.read(session) == batch + records(2, "meanwhile")


class CrashDurabilityTests(ConformanceBase):
    """``durable`` and ``shared``: what a process acknowledged survives that process dying
    at once (no ``close``, no flush, no exit handlers)."""

    def test_acknowledged_appends_survive_the_writer_dying(
        self,
        chatkeep_url: str,
        chatkeep_open: Callable[..., Store],
        chatkeep_workers: WorkerFleet,
        chatkeep_tracker: Tracker,
    ) -> None:
        session = new_session_id("died")
        chatkeep_tracker.sessions().add(session)
        batches = [records(3, f"b{n}") for n in range(3)]
        outcome = chatkeep_workers.run(
            {0: {**_append(chatkeep_url, session, batches), "op": "append_and_die"}}
        )[0]
        assert outcome.ok, outcome.describe()
        fresh = chatkeep_open()
        assert fresh.read(session) == [r for batch in batches for r in batch], (
            "records acknowledged before the writing process died are gone"
        )
