"""The two required hooks: append order and Python slice semantics of ``read``."""

from __future__ import annotations

import itertools
import sys

from chatkeep.core import Record, Store

from ..checks import new_session_id, records
from ._base import ConformanceBase

__all__ = ["OrderTests", "SliceTests"]

# A grid of bounds wide enough to cover negatives, out-of-range values and start > stop
# around a short log.
_LOG_LENGTH = 7
_BOUNDS = range(-_LOG_LENGTH - 3, _LOG_LENGTH + 4)


class OrderTests(ConformanceBase):
    """Records come back in append order, as :class:`Record` of ``str`` and ``bytes``."""

    def test_read_returns_appended_records_in_order(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        first, second, third = records(3, "a"), records(1, "b"), records(4, "c")
        for batch in (first, second, third):
            chatkeep_store.append(session, batch)
        assert chatkeep_store.read(session) == first + second + third

    def test_records_have_exact_types(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        chatkeep_store.append(session, [Record("m1", b"hello")])
        (record,) = chatkeep_store.read(session)
        assert isinstance(record, Record)
        assert type(record.id) is str
        assert type(record.data) is bytes
        assert type(chatkeep_store.read(session)) is list

    def test_unknown_session_reads_empty(self, chatkeep_store: Store) -> None:
        session = new_session_id("unknown")
        assert chatkeep_store.read(session) == []
        assert chatkeep_store.read(session, -5) == []
        assert chatkeep_store.read(session, 2, 4) == []

    def test_sessions_are_independent(self, chatkeep_store: Store) -> None:
        one, two = new_session_id(), new_session_id()
        chatkeep_store.append(one, records(2, "one"))
        chatkeep_store.append(two, records(3, "two"))
        chatkeep_store.append(one, records(1, "one", start=2))
        assert chatkeep_store.read(one) == records(3, "one")
        assert chatkeep_store.read(two) == records(3, "two")

    def test_many_small_batches_keep_order(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        expected = records(60)
        for record in expected:
            chatkeep_store.append(session, [record])
        assert chatkeep_store.read(session) == expected


class SliceTests(ConformanceBase):
    """``read(start, stop)`` behaves exactly like ``log[start:stop]`` on a Python list."""

    def test_slices_match_python(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        log = records(_LOG_LENGTH)
        chatkeep_store.append(session, log[:3])
        chatkeep_store.append(session, log[3:])
        wrong = []
        for start, stop in itertools.product(_BOUNDS, [None, *_BOUNDS]):
            got = chatkeep_store.read(session, start, stop)
            if got != log[start:stop]:
                wrong.append((start, stop, [r.id for r in got], [r.id for r in log[start:stop]]))
        assert not wrong, (
            f"{len(wrong)} slices differ from Python's; first (start, stop, got, expected): "
            f"{wrong[0]}"
        )

    def test_default_arguments(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        log = records(5)
        chatkeep_store.append(session, log)
        assert chatkeep_store.read(session) == log
        assert chatkeep_store.read(session, 2) == log[2:]
        assert chatkeep_store.read(session, stop=2) == log[:2]
        assert chatkeep_store.read(session, start=-2) == log[-2:]

    def test_tail_reads(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        log = records(30)
        for chunk in range(0, 30, 4):
            chatkeep_store.append(session, log[chunk : chunk + 4])
        for count in (1, 2, 3, 4, 5, 17, 29, 30, 31, 100):
            assert chatkeep_store.read(session, -count) == log[-count:], f"last {count}"

    def test_out_of_range_and_empty_slices(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        log = records(4)
        chatkeep_store.append(session, log)
        assert chatkeep_store.read(session, 4) == []
        assert chatkeep_store.read(session, 10) == []
        assert chatkeep_store.read(session, 10, 20) == []
        assert chatkeep_store.read(session, 3, 1) == []
        assert chatkeep_store.read(session, 2, 2) == []
        assert chatkeep_store.read(session, -1, -1) == []
        assert chatkeep_store.read(session, -1, -3) == []
        assert chatkeep_store.read(session, -100) == log
        assert chatkeep_store.read(session, 0, -100) == []
        assert chatkeep_store.read(session, -100, 2) == log[:2]
        assert chatkeep_store.read(session, 0, 100) == log

    def test_extreme_bounds(self, chatkeep_store: Store) -> None:
        before, session = new_session_id("before"), new_session_id()
        chatkeep_store.append(before, records(5, "prev"))  # written just before: must not leak
        log = records(6)
        chatkeep_store.append(session, log[:2])
        chatkeep_store.append(session, log[2:])
        huge = [sys.maxsize, 2**40, 2**31, 2**32 + 1]
        bounds = [0, 1, -1, 3, -3, *huge, *(-h for h in huge), -sys.maxsize - 1]
        wrong = []
        for start, stop in itertools.product(bounds, [None, *bounds]):
            got = chatkeep_store.read(session, start, stop)
            if got != log[start:stop]:
                wrong.append((start, stop, [r.id for r in got]))
        assert not wrong, f"{len(wrong)} extreme slices differ from Python's, e.g. {wrong[:2]}"
        # Far longer than the log, but not extreme (a position computed as length + start
        # and used as an offset elsewhere reaches into other sessions' rows only there).
        after = new_session_id("after")
        chatkeep_store.append(after, records(5, "next"))
        far_off = []
        for far in (10**6, 10**4, 1000, 7):
            for start, stop in [(-far, None), (-far, 3), (-far, 1 - far), (far, None), (0, far)]:
                got = chatkeep_store.read(session, start, stop)
                if got != log[start:stop]:
                    far_off.append((start, stop, [r.id for r in got]))
        assert not far_off, f"slices far past the log differ from Python's, e.g. {far_off[:2]}"
        unknown = new_session_id("unknown")
        for start in (-sys.maxsize, -(2**40), -(10**6), 2**40, sys.maxsize):
            assert chatkeep_store.read(unknown, start) == []
            assert chatkeep_store.read(unknown, start, -start) == []

    def test_slices_of_unknown_session_are_empty(self, chatkeep_store: Store) -> None:
        session = new_session_id("unknown")
        for start, stop in [(0, None), (-3, None), (1, 2), (5, 1), (-1, -2), (0, 0)]:
            assert chatkeep_store.read(session, start, stop) == []
