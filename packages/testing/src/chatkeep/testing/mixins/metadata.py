"""Session metadata over the store under test (:mod:`chatkeep.core.metadata`).

The core keeps it with the two hooks only (storage times inside the records it writes, the
view's own walk for the count), so it must work unchanged on every backend: these tests
prove it on the one under test, that describing a long compacted session reads a
bounded number of records, that an uncompacted one is counted within
:data:`~chatkeep.core.metadata.COUNT_WALK` records (a lower bound past it), and that a
damaged session is listed, not raised, and that the running count HistoryProvider keeps in
its records counts a long session exactly in a few small reads.
:class:`SessionListingTests` needs ``list_sessions``.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timezone

import pytest

from chatkeep.core import (
    AgentSession,
    CorruptRecord,
    HistoryProvider,
    Message,
    Record,
    SessionNotFound,
    Store,
    adescribe_session,
    compact,
    describe_session,
    encode_records,
    fork,
    list_session_infos,
    new_id,
    read_view,
    undo,
)
from chatkeep.core.metadata import COUNT_WALK, HEAD, STORED_AT_KEY

from ..checks import new_session_id
from ._base import ConformanceBase

__all__ = ["SessionListingTests", "SessionMetadataTests"]

_LONG = 400  # messages in the compacted session (one append: cheap on remote stores)


def _turns(store: Store, session_id: str, *questions: str) -> list[Message]:
    """Store one user/assistant turn per question through a HistoryProvider."""
    provider = HistoryProvider(store)
    session = AgentSession(session_id)
    passed: list[Message] = []

    async def run() -> None:
        for question in questions:
            request = [Message.user(question, message_id=new_id())]
            sent = await provider.invoking(session, request)
            response = [Message.assistant(f"re: {question}", message_id=new_id())]
            await provider.invoked(session, sent, response)
            passed.extend(request + response)

    asyncio.run(run())
    return passed


class _CountingReads:
    """The store under test, counting the records its reads return."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.returned = 0

    def append(self, session_id: str, records: list[Record]) -> None:
        self.store.append(session_id, records)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        result = self.store.read(session_id, start, stop)
        self.returned += len(result)
        return result


class SessionMetadataTests(ConformanceBase):
    """``describe_session``: times, the view's count and a title, at bounded cost."""

    def test_describe_turns_undo_and_fork(self, chatkeep_store: Store) -> None:
        session_id = new_session_id("meta")
        before = datetime.now(timezone.utc)
        passed = _turns(chatkeep_store, session_id, "first question", "second", "third")
        assert read_view(chatkeep_store, session_id) == passed, "the storage time is visible"
        stored = chatkeep_store.read(session_id, 0, 1)[0].data
        assert STORED_AT_KEY.encode() in stored
        info = describe_session(chatkeep_store, session_id)
        assert (info.id, info.messages, info.title) == (session_id, 6, "first question")
        assert info.created_at is not None and info.updated_at is not None
        assert before <= info.created_at <= info.updated_at <= datetime.now(timezone.utc)
        undo(chatkeep_store, session_id)
        assert describe_session(chatkeep_store, session_id).messages == 4
        child = fork(chatkeep_store, session_id, new_session_id=new_session_id("meta-fork"))
        forked = asyncio.run(adescribe_session(chatkeep_store, child))
        assert (forked.messages, forked.title) == (4, "first question")
        assert forked.created_at is not None and forked.created_at >= info.created_at

    def test_unknown_session_is_not_found(self, chatkeep_store: Store) -> None:
        with pytest.raises(SessionNotFound):
            describe_session(chatkeep_store, new_session_id("meta-none"))

    def test_describing_a_compacted_session_reads_few_records(self, chatkeep_store: Store) -> None:
        session_id = new_session_id("meta-long")
        messages = [
            (Message.user if n % 2 == 0 else Message.assistant)(f"m{n}", message_id=f"m{n:05d}")
            for n in range(_LONG)
        ]
        chatkeep_store.append(session_id, encode_records(messages, stored_at="2026-01-01"))
        compact(chatkeep_store, session_id, lambda view: view[-10:])
        counting = _CountingReads(chatkeep_store)
        info = describe_session(Store(counting), session_id)
        assert (info.messages, info.title) == (10, "m0")
        assert info.created_at == datetime(2026, 1, 1, tzinfo=timezone.utc)
        assert counting.returned <= 64, f"read {counting.returned} records of {_LONG + 1}"

    def test_an_uncompacted_long_session_is_counted_within_the_bound(
        self, chatkeep_store: Store
    ) -> None:
        session_id = new_session_id("meta-uncompacted")
        total = COUNT_WALK + 50
        messages = [Message.user(f"m{n}", message_id=f"m{n:05d}") for n in range(total)]
        chatkeep_store.append(session_id, encode_records(messages, stored_at="2026-01-01"))
        counting = _CountingReads(chatkeep_store)
        info = describe_session(Store(counting), session_id)
        assert not info.messages_exact and 0 < info.messages <= COUNT_WALK
        # Head, tail, and slices that may overshoot the bound by one growth step.
        assert counting.returned <= HEAD + 1 + 2 * COUNT_WALK, counting.returned
        exact = describe_session(chatkeep_store, session_id, exact=True)
        assert (exact.messages, exact.messages_exact) == (total, True)

    def test_a_running_count_counts_a_long_session_in_two_small_reads(
        self, chatkeep_store: Store
    ) -> None:
        session_id = new_session_id("meta-running")
        total = COUNT_WALK + 50
        messages = [Message.user(f"m{n}", message_id=f"m{n:05d}") for n in range(total)]
        chatkeep_store.append(session_id, encode_records(messages, stored_at="2026-01-01"))
        session = AgentSession(session_id)
        whole, windowed = (
            HistoryProvider(chatkeep_store),
            HistoryProvider(chatkeep_store, max_messages=8),
        )

        async def run() -> None:
            for provider in (whole, windowed, windowed):  # the first load reads the whole view
                sent = await provider.invoking(session, [Message.user("q", message_id=new_id())])
                response = [Message.assistant("a", message_id=new_id())]
                await provider.invoked(session, sent, response)

        asyncio.run(run())
        counting = _CountingReads(chatkeep_store)
        info = describe_session(Store(counting), session_id)
        assert (info.messages, info.messages_exact) == (total + 6, True)
        # Head, tail and the running count's check: no walk.
        assert counting.returned <= HEAD + 1 + 2, counting.returned
        assert info.messages == len(read_view(chatkeep_store, session_id))

    def test_undo_fork_and_checkpoints_keep_the_running_count(self, chatkeep_store: Store) -> None:
        session_id = new_session_id("meta-control")
        total = COUNT_WALK + 50
        messages = [Message.user(f"m{n}", message_id=f"m{n:05d}") for n in range(total)]
        chatkeep_store.append(session_id, encode_records(messages, stored_at="2026-01-01"))
        _turns(chatkeep_store, session_id, "proves the count", "and goes on")

        def counted(name: str) -> int:
            counting = _CountingReads(chatkeep_store)
            info = describe_session(Store(counting), name)
            assert info.messages_exact, f"{name}: the count fell back to the walk"
            assert counting.returned <= 2 * HEAD + 1 + 2, counting.returned  # no walk
            assert info.messages == len(read_view(chatkeep_store, name))
            return info.messages

        undo(chatkeep_store, session_id)  # the retract carries the count after it
        assert counted(session_id) == total + 2
        child = fork(chatkeep_store, session_id, new_session_id=new_session_id("meta-child"))
        assert counted(child) == total + 2  # the fork record: the parent's count
        assert counted(session_id) == total + 2  # the parent's registration: its own
        compact(chatkeep_store, child, lambda view: view[-(COUNT_WALK + 10) :])
        assert counted(child) == COUNT_WALK + 10  # the checkpoint: its keep
        # Another writer after a mark: the count falls back, never wrong.
        chatkeep_store.append(child, encode_records([Message.user("raw", message_id=new_id())]))
        info = describe_session(chatkeep_store, child)
        assert info.messages <= len(read_view(chatkeep_store, child))
        assert not info.messages_exact or info.messages == COUNT_WALK + 11


def _prefix() -> str:
    return f"ck-meta-{uuid.uuid4().hex}-"


class SessionListingTests(ConformanceBase):
    """``list_session_infos``: newest first or in store order, bounded by ``limit``."""

    def test_newest_first_and_in_store_order(self, chatkeep_store: Store) -> None:
        prefix = _prefix()
        for name in ("b", "a", "c"):  # updated in this order
            _turns(chatkeep_store, prefix + name, f"about {name}")
        newest = list(list_session_infos(chatkeep_store, prefix=prefix))
        assert [i.id for i in newest] == [prefix + n for n in ("c", "a", "b")]
        assert [i.title for i in newest] == ["about c", "about a", "about b"]
        assert [i.messages for i in newest] == [2, 2, 2]
        two = list(list_session_infos(chatkeep_store, prefix=prefix, limit=2))
        assert two == newest[:2]
        ordered = list(list_session_infos(chatkeep_store, prefix=prefix, newest_first=False))
        assert sorted(i.id for i in ordered) == sorted(i.id for i in newest)
        one = list(list_session_infos(chatkeep_store, prefix=prefix, newest_first=False, limit=1))
        assert len(one) == 1 and one[0] in ordered

    def test_a_damaged_session_is_listed_not_raised(self, chatkeep_store: Store) -> None:
        prefix = _prefix()
        _turns(chatkeep_store, prefix + "good", "fine")
        chatkeep_store.append(prefix + "bad", [Record(new_id(), b"not a chatkeep record")])
        with pytest.raises(CorruptRecord):
            describe_session(chatkeep_store, prefix + "bad")
        for newest_first in (True, False):
            infos = {
                i.id: i
                for i in list_session_infos(
                    chatkeep_store, prefix=prefix, newest_first=newest_first
                )
            }
            assert set(infos) == {prefix + "good", prefix + "bad"}
            bad = infos[prefix + "bad"]
            assert bad.damaged is not None and repr(prefix + "bad") in bad.damaged
            assert (bad.messages, bad.messages_exact) == (0, False)
            good = infos[prefix + "good"]
            assert (good.damaged, good.messages, good.messages_exact) == (None, 2, True)
