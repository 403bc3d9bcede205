"""Stores that declare ``durable``: data survives closing and reopening from the URL."""

from __future__ import annotations

from collections.abc import Callable

from chatkeep.core import Store, read_view

from ..checks import new_session_id, records
from ._base import ConformanceBase

__all__ = ["DurabilityTests", "DurableDeleteTests"]


class DurabilityTests(ConformanceBase):
    """What was appended before ``close`` reads back the same after reopening."""

    def test_records_survive_close_and_reopen(
        self, chatkeep_store: Store, chatkeep_reopen: Callable[[], Store]
    ) -> None:
        one, two = new_session_id(), new_session_id()
        chatkeep_store.append(one, records(3, "a"))
        chatkeep_store.append(two, [("big", bytes(range(256)) * 64)])
        chatkeep_store.append(one, records(2, "b"))
        chatkeep_store.close()
        again = chatkeep_reopen()
        assert again.read(one) == records(3, "a") + records(2, "b")
        assert again.read(one, -2) == records(2, "b")
        assert again.read(two) == [("big", bytes(range(256)) * 64)]
        again.append(one, records(1, "c"))
        assert again.read(one, -2) == records(1, "b", start=1) + records(1, "c")

    def test_retry_after_reopen_is_a_no_op(
        self, chatkeep_store: Store, chatkeep_reopen: Callable[[], Store]
    ) -> None:
        session = new_session_id()
        batch = records(3)
        chatkeep_store.append(session, batch)
        chatkeep_store.close()
        again = chatkeep_reopen()
        again.append(session, batch)
        assert again.read(session) == batch


class DurableDeleteTests(ConformanceBase):
    """A deleted session stays deleted after reopening."""

    def test_delete_survives_reopen(
        self, chatkeep_store: Store, chatkeep_reopen: Callable[[], Store]
    ) -> None:
        gone, kept = new_session_id(), new_session_id()
        chatkeep_store.append(gone, records(3))
        chatkeep_store.append(kept, records(1))
        chatkeep_store.delete(gone)
        chatkeep_store.close()
        again = chatkeep_reopen()
        paths = {
            "full": again.read(gone),
            "tail": again.read(gone, -1),
            "long tail": again.read(gone, -5),
            "slice": again.read(gone, 1, 3),
            "first": again.read(gone, 0, 1),
        }
        assert all(got == [] for got in paths.values()), f"read after reopen: {paths}"
        assert read_view(again, gone) == [], "the view after reopen"
        if again.supports("list_sessions"):
            assert gone not in set(again.list_sessions(gone)), "listed after reopen"
        assert again.read(kept) == records(1)
