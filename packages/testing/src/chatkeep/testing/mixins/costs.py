"""Cost promises, checked by ratios with wide margins (never by absolute time).

A tail read must cost in proportion to what it returns, and an append in proportion to its
batch, however long the log is, from a warm handle and from a freshly opened one. Each
operation is timed many times, interleaved between a short and a long session, and the
fastest run of each is compared: load on the machine only ever adds time, so the minimum is
the honest figure, and a correct store's ratio stays near 1 where a scan of the log is
hundreds of times slower. A ratio over the limit is measured again before it fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from chatkeep.core import Record, Store

from ..checks import new_session_id
from ..settings import SuiteSettings
from ._base import ConformanceBase

__all__ = ["TailCostTests"]

_SHORT = 100
_TAIL = 20
_LIMIT = 10.0  # a correct store is near 1; a scan of 20,000 records is hundreds
_REPEATS = 9
_ATTEMPTS = 3


def _fill(store: Store, session: str, count: int) -> None:
    batch = 1000
    for start in range(0, count, batch):
        store.append(
            session,
            [Record(f"r{n:07d}", b"x" * 48) for n in range(start, min(start + batch, count))],
        )


def _fastest(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def _ratio(measure: Callable[[str], float], short: str, long: str) -> tuple[float, float, float]:
    short_best = long_best = float("inf")
    for _ in range(_REPEATS):
        short_best = min(short_best, measure(short))
        long_best = min(long_best, measure(long))
    return long_best / max(short_best, 1e-9), short_best, long_best


class TailCostTests(ConformanceBase):
    """Tail reads and appends cost the same on a long log as on a short one."""

    @pytest.fixture
    def sessions(
        self, chatkeep_store: Store, chatkeep_settings: SuiteSettings
    ) -> tuple[str, str, int]:
        size = chatkeep_settings.tail_records
        if size == 0:
            pytest.skip("the tail-cost test is switched off (--chatkeep-tail-records=0)")
        short, long = new_session_id("short"), new_session_id("long")
        _fill(chatkeep_store, short, _SHORT)
        _fill(chatkeep_store, long, max(size, _SHORT * 10))
        return short, long, max(size, _SHORT * 10)

    def _check(self, what: str, measure: Callable[[str], float], short: str, long: str) -> None:
        results = []
        for _ in range(_ATTEMPTS):
            ratio, short_best, long_best = _ratio(measure, short, long)
            if ratio <= _LIMIT:
                return
            results.append(f"{ratio:.1f}x ({long_best * 1e3:.2f} ms vs {short_best * 1e3:.2f} ms)")
        pytest.fail(
            f"{what} on the long session took {', then '.join(results)} of the same on the "
            f"short one: it grows with the log's length (limit {_LIMIT:.0f}x)"
        )

    def test_warm_tail_read_costs_what_it_returns(
        self, chatkeep_store: Store, sessions: tuple[str, str, int]
    ) -> None:
        short, long, size = sessions
        assert chatkeep_store.read(long, -_TAIL) == [
            Record(f"r{n:07d}", b"x" * 48) for n in range(size - _TAIL, size)
        ]
        self._check(
            f"read(session, -{_TAIL})",
            lambda session: _fastest(lambda: chatkeep_store.read(session, -_TAIL)),
            short,
            long,
        )

    def test_cold_tail_read_costs_what_it_returns(
        self, chatkeep_open: Callable[..., Store], sessions: tuple[str, str, int]
    ) -> None:
        short, long, _ = sessions

        def measure(session: str) -> float:
            store = chatkeep_open()  # a fresh handle: no cache, no hint, no warm cursor
            try:
                return _fastest(lambda: store.read(session, -_TAIL))
            finally:
                store.close()

        self._check(f"a new handle's first read(session, -{_TAIL})", measure, short, long)

    def test_append_costs_what_it_appends(
        self,
        chatkeep_store: Store,
        chatkeep_open: Callable[..., Store],
        sessions: tuple[str, str, int],
    ) -> None:
        short, long, _ = sessions
        counter = iter(range(10**9))

        def measure(session: str) -> float:
            batch = [Record(f"new{next(counter)}", b"y" * 48)]
            return _fastest(lambda: chatkeep_store.append(session, batch))

        self._check("append(session, [one record])", measure, short, long)

        def cold(session: str) -> float:
            store = chatkeep_open()
            batch = [Record(f"cold{next(counter)}", b"y" * 48)]
            try:
                return _fastest(lambda: store.append(session, batch))
            finally:
                store.close()

        self._check("a new handle's first append", cold, short, long)
