"""Atomic batches, same-batch retries and concurrent appends from threads."""

from __future__ import annotations

import threading

import pytest

from chatkeep.core import InvalidRecord, Record, Store

from ..checks import assert_batches_intact, new_session_id, plan_batches, records
from ._base import ConformanceBase

__all__ = ["AtomicBatchTests", "RetryTests", "ThreadConcurrencyTests"]


class AtomicBatchTests(ConformanceBase):
    """A batch is visible entirely or not at all."""

    def test_readers_never_see_a_partial_batch(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        plan = plan_batches("w", batches=30, per_batch=5)
        done = threading.Event()
        seen_partial: list[str] = []
        errors: list[BaseException] = []

        def check(log: list[Record], tail: list[Record]) -> None:
            ids = [record.id for record in log]
            expected = [record.id for batch in plan for record in batch][: len(ids)]
            if len(ids) % 5 or ids != expected:
                seen_partial.append(f"full read of {len(ids)} records: {ids[-6:]}")
            if tail and not tail[-1].id.endswith(".4"):
                seen_partial.append(f"tail read ending inside a batch: {[r.id for r in tail]}")

        def reader() -> None:
            try:
                while not done.is_set():
                    check(chatkeep_store.read(session), chatkeep_store.read(session, -3))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=reader) for _ in range(3)]
        for thread in threads:
            thread.start()
        try:
            for batch in plan:
                chatkeep_store.append(session, batch)
        finally:
            done.set()
            for thread in threads:
                thread.join(60)
        assert not errors, f"a reader failed: {errors[0]!r}"
        assert not seen_partial, f"a reader saw a partial batch: {seen_partial[0]}"
        assert_batches_intact(chatkeep_store.read(session), {"w": plan})

    def test_rejected_batch_stores_nothing(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        chatkeep_store.append(session, records(2))
        with pytest.raises(InvalidRecord):
            chatkeep_store.append(session, [Record("x1", b"ok"), Record("x1", b"twice")])
        with pytest.raises(InvalidRecord):
            chatkeep_store.append(session, [Record("x2", b"ok"), ("x3", "not bytes")])  # type: ignore[list-item]
        assert chatkeep_store.read(session) == records(2)

    def test_large_batch_is_one_unit(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        batch = records(1000)
        chatkeep_store.append(session, batch)
        assert chatkeep_store.read(session) == batch
        assert chatkeep_store.read(session, -1) == batch[-1:]


class RetryTests(ConformanceBase):
    """Retrying a batch that already landed is a no-op: record ids are unique per session."""

    def test_same_batch_retry_is_a_no_op(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        batch = records(3)
        chatkeep_store.append(session, batch)
        chatkeep_store.append(session, batch)
        assert chatkeep_store.read(session) == batch

    def test_retry_after_later_batches_is_a_no_op(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        first, second = records(2, "a"), records(2, "b")
        chatkeep_store.append(session, first)
        chatkeep_store.append(session, second)
        chatkeep_store.append(session, first)
        assert chatkeep_store.read(session) == first + second
        assert chatkeep_store.read(session, -2) == second

    def test_record_ids_are_scoped_to_their_session(self, chatkeep_store: Store) -> None:
        one, two = new_session_id(), new_session_id()
        chatkeep_store.append(one, [Record("same", b"one")])
        chatkeep_store.append(two, [Record("same", b"two")])
        assert chatkeep_store.read(one) == [Record("same", b"one")]
        assert chatkeep_store.read(two) == [Record("same", b"two")]


class ThreadConcurrencyTests(ConformanceBase):
    """Threads sharing one store handle append to one session; nothing is lost or mixed."""

    def test_threads_append_to_one_session(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        plans = {f"t{n}": plan_batches(f"t{n}", batches=20, per_batch=3) for n in range(4)}
        start = threading.Barrier(len(plans))
        errors: list[BaseException] = []

        def writer(plan: list[list[Record]]) -> None:
            try:
                start.wait(30)
                for batch in plan:
                    chatkeep_store.append(session, batch)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(plan,)) for plan in plans.values()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not errors, f"a writer failed: {errors[0]!r}"
        assert_batches_intact(chatkeep_store.read(session), plans)
