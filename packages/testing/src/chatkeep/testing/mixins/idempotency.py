"""Per-record idempotency (CONTRACT item 1): stored ids are skipped, conflicting ones refused."""

from __future__ import annotations

import asyncio

import pytest

from chatkeep.core import Record, RecordConflict, Store

from ..checks import new_session_id, records
from ._base import ConformanceBase

__all__ = ["RecordIdempotencyTests"]


def _assert_conflict(error: pytest.ExceptionInfo[BaseException], session: str, rid: str) -> None:
    assert getattr(error.value, "session_id", None) == session, "the error names the session"
    assert getattr(error.value, "record_id", None) == rid, "the error names the record id"


class RecordIdempotencyTests(ConformanceBase):
    """Each record of a batch: already stored with the same data -> skipped; stored with
    other data -> ``RecordConflict`` and nothing of the batch stored; else appended, in
    batch order, contiguous with the batch's other new records."""

    def test_partly_stored_batches_append_only_the_new_records(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        a, b, c = Record("a", b"A"), Record("b", b"B"), Record("c", b"C")
        chatkeep_store.append(session, [a])
        chatkeep_store.append(session, [a, b])
        chatkeep_store.append(session, [c])
        assert chatkeep_store.read(session) == [a, b, c]
        assert chatkeep_store.read(session, -2) == [b, c]
        assert chatkeep_store.read(session, -1) == [c]

    def test_new_records_of_a_mixed_batch_stay_in_order_and_contiguous(
        self, chatkeep_store: Store
    ) -> None:
        session = new_session_id()
        stored = records(3, "old")
        chatkeep_store.append(session, stored)
        fresh = records(3, "new")
        mixed = [fresh[0], stored[1], fresh[1], stored[0], stored[2], fresh[2]]
        chatkeep_store.append(session, mixed)
        assert chatkeep_store.read(session) == stored + fresh
        chatkeep_store.append(session, [*records(1, "z"), *stored])
        assert chatkeep_store.read(session, -2) == [fresh[2], *records(1, "z")]

    def test_same_id_with_other_data_is_refused_whole(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        chatkeep_store.append(session, [Record("a", b"first")])
        with pytest.raises(RecordConflict) as error:
            chatkeep_store.append(session, [Record("b", b"new"), Record("a", b"second")])
        _assert_conflict(error, session, "a")
        assert chatkeep_store.read(session) == [Record("a", b"first")], "nothing of it stored"
        chatkeep_store.append(session, [Record("b", b"new")])
        assert chatkeep_store.read(session) == [Record("a", b"first"), Record("b", b"new")]

    def test_conflict_is_found_after_many_appends(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        chatkeep_store.append(session, [Record("early", b"v1")])
        for n in range(40):
            chatkeep_store.append(session, records(3, f"later{n}"))
        before = chatkeep_store.read(session)
        with pytest.raises(RecordConflict) as error:
            chatkeep_store.append(session, [Record("early", b"v2")])
        _assert_conflict(error, session, "early")
        chatkeep_store.append(session, [Record("early", b"v1")])  # the exact retry: a no-op
        assert chatkeep_store.read(session) == before

    def test_empty_and_different_length_data_conflict(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        chatkeep_store.append(session, [Record("e", b""), Record("f", b"abc")])
        for wrong in (Record("e", b"\x00"), Record("f", b"ab"), Record("f", b"abcd")):
            with pytest.raises(RecordConflict):
                chatkeep_store.append(session, [wrong])
        assert chatkeep_store.read(session) == [Record("e", b""), Record("f", b"abc")]

    def test_async_append_refuses_conflicts_too(self, chatkeep_store: Store) -> None:
        session = new_session_id()

        async def scenario() -> None:
            await chatkeep_store.aappend(session, [Record("a", b"1")])
            await chatkeep_store.aappend(session, [Record("a", b"1"), Record("b", b"2")])
            with pytest.raises(RecordConflict):
                await chatkeep_store.aappend(session, [Record("c", b"3"), Record("b", b"X")])

        asyncio.run(scenario())
        assert chatkeep_store.read(session) == [Record("a", b"1"), Record("b", b"2")]
