"""Callers and the store never share mutable state."""

from __future__ import annotations

from chatkeep.core import Record, Store

from ..checks import new_session_id, records
from ._base import ConformanceBase

__all__ = ["MutationSafetyTests"]


class MutationSafetyTests(ConformanceBase):
    """Reads return fresh lists; mutating what was appended or read changes nothing stored."""

    def test_reads_return_a_new_list_each_time(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        chatkeep_store.append(session, records(3))
        first, second = chatkeep_store.read(session), chatkeep_store.read(session)
        assert first is not second
        first.clear()
        second.append(Record("intruder", b"!"))
        assert chatkeep_store.read(session) == records(3)
        assert chatkeep_store.read(session, -2) == records(3)[-2:]

    def test_mutating_a_read_slice_changes_nothing(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        chatkeep_store.append(session, records(4))
        tail = chatkeep_store.read(session, -2)
        tail.append(Record("intruder", b"!"))
        chatkeep_store.read(session, 0).reverse()
        assert chatkeep_store.read(session) == records(4)

    def test_mutating_the_appended_batch_changes_nothing(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        batch = records(2)
        chatkeep_store.append(session, batch)
        batch.append(Record("late", b"!"))
        batch[0] = Record("swapped", b"!")
        assert chatkeep_store.read(session) == records(2)

    def test_mutating_appended_bytearray_changes_nothing(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        buffer = bytearray(b"original")
        chatkeep_store.append(session, [("m1", buffer)])  # type: ignore[list-item]
        buffer[:] = b"MUTATED!"
        assert chatkeep_store.read(session) == [Record("m1", b"original")]
