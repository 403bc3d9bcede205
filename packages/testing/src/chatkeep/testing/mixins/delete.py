"""Stores that declare ``delete``: erasure on every read path."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from chatkeep.core import InvalidSessionId, Record, Store

from ..checks import new_session_id, records
from ..samples import INVALID_SESSION_IDS
from ._base import ConformanceBase

__all__ = ["DeleteListingTests", "DeleteTests"]


def _assert_erased(store: Store, session: str) -> None:
    assert store.read(session) == [], "full read after delete"
    assert store.read(session, -1) == [], "tail read after delete"
    assert store.read(session, -5) == [], "tail read after delete"
    assert store.read(session, 1, 3) == [], "slice read after delete"
    assert store.read(session, 0, 1) == [], "first record after delete"


class DeleteTests(ConformanceBase):
    """After ``delete`` nothing of the session is readable; nothing else is touched."""

    def test_delete_erases_every_read_path(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        for start in range(0, 12, 3):
            chatkeep_store.append(session, records(3, start=start))
        chatkeep_store.delete(session)
        _assert_erased(chatkeep_store, session)

    def test_delete_leaves_other_sessions_alone(self, chatkeep_store: Store) -> None:
        run = uuid.uuid4().hex
        target = f"ck-d-{run}-abc"
        # Neighbours whose ids share a prefix or differ by case or one character.
        neighbours = [
            f"ck-d-{run}-abcd",
            f"ck-d-{run}-ab",
            f"ck-d-{run}-ABC",
            f"ck-d-{run}-abc ",
            f"ck-d-{run}-abc/x",
            f"ck-d-{run}-abc%",
        ]
        for session in [target, *neighbours]:
            chatkeep_store.append(session, records(2, session[-4:]))
        chatkeep_store.delete(target)
        _assert_erased(chatkeep_store, target)
        for session in neighbours:
            assert chatkeep_store.read(session) == records(2, session[-4:]), session

    def test_deleting_an_unknown_session_is_fine(self, chatkeep_store: Store) -> None:
        session = new_session_id("unknown")
        chatkeep_store.delete(session)
        chatkeep_store.delete(session)
        assert chatkeep_store.read(session) == []

    def test_append_after_delete_starts_fresh(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        chatkeep_store.append(session, records(5))
        chatkeep_store.delete(session)
        # The same record ids again: a dedup index that survived the delete would drop them.
        chatkeep_store.append(session, records(2))
        assert chatkeep_store.read(session) == records(2)
        assert chatkeep_store.read(session, -1) == records(2)[-1:]
        chatkeep_store.append(session, records(1, "new"))
        assert chatkeep_store.read(session) == records(2) + records(1, "new")

    def test_delete_after_a_warm_tail_read(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        chatkeep_store.append(session, records(6))
        # Warm whatever a handle keeps about a session's end (a cached length, a cursor).
        for count in (1, 3, 6):
            assert chatkeep_store.read(session, -count) == records(6)[-count:]
        chatkeep_store.read(session, 2, 4)
        chatkeep_store.delete(session)
        _assert_erased(chatkeep_store, session)
        chatkeep_store.append(session, records(1, "new"))
        assert chatkeep_store.read(session, -3) == records(1, "new")
        assert chatkeep_store.read(session) == records(1, "new")

    def test_ids_are_free_after_delete_even_with_other_data(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        chatkeep_store.append(session, [Record("a", b"old"), Record("b", b"old")])
        chatkeep_store.delete(session)
        chatkeep_store.append(session, [Record("a", b"new")])
        assert chatkeep_store.read(session) == [Record("a", b"new")]

    def test_async_delete(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        chatkeep_store.append(session, records(3))
        asyncio.run(chatkeep_store.adelete(session))
        _assert_erased(chatkeep_store, session)

    @pytest.mark.parametrize("bad", INVALID_SESSION_IDS[:7], ids=lambda bad: repr(bad)[:20])
    def test_delete_rejects_invalid_ids(self, chatkeep_store: Store, bad: object) -> None:
        with pytest.raises(InvalidSessionId):
            chatkeep_store.delete(bad)  # type: ignore[arg-type]


class DeleteListingTests(ConformanceBase):
    """A deleted session is no longer listed (stores with ``delete`` and ``list_sessions``)."""

    def test_deleted_session_is_not_listed(self, chatkeep_store: Store) -> None:
        prefix = f"ck-dl-{uuid.uuid4().hex}-"
        keep, gone = prefix + "keep", prefix + "gone"
        chatkeep_store.append(keep, records(1))
        chatkeep_store.append(gone, records(3))
        chatkeep_store.delete(gone)
        assert sorted(chatkeep_store.list_sessions(prefix)) == [keep]
        assert gone not in set(chatkeep_store.list_sessions(gone))
        chatkeep_store.append(gone, records(1))
        assert sorted(chatkeep_store.list_sessions(prefix)) == [gone, keep]
