"""Stores that declare ``ttl``: a session expires after ``ttl`` seconds without an append.

Checked with a short real ``ttl`` (the suite cannot inject a clock into every backend).
Every assertion is made only when the measured times leave a clear margin on the right
side of the expiry, so a loaded machine makes the test measure again, never fail a correct
store; a store that ignores ``ttl`` fails on the first clean measurement.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest

from chatkeep.core import Record, Store

from ..checks import records
from ..hooks import EXPIRY
from ._base import ConformanceBase

__all__ = ["TtlRetryTests", "TtlTests"]

_TTL = 2.0
_MARGIN = 0.6
_ATTEMPTS = 3


def _wait_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.monotonic()))


class TtlTests(ConformanceBase):
    """Expiry from every read path and from listing; an append keeps a session alive; an
    expired session starts afresh."""

    def test_sessions_expire_unless_appended_to(self, chatkeep_open: Callable[..., Store]) -> None:
        for _ in range(_ATTEMPTS):
            if self._attempt(chatkeep_open(ttl=_TTL)):
                return
        pytest.skip(
            f"inconclusive: the machine was too slow to keep a {_MARGIN} s margin around a "
            f"{_TTL} s ttl in {_ATTEMPTS} attempts"
        )

    def _attempt(self, store: Store) -> bool:
        run = uuid.uuid4().hex[:12]
        idle, kept = f"ck-ttl-{run}-idle", f"ck-ttl-{run}-kept"
        started = time.monotonic()
        store.append(idle, [Record("r1", b"1"), Record("r2", b"2")])
        store.append(kept, [Record("k1", b"1")])
        written = time.monotonic()
        assert store.read(idle, -1) == [Record("r2", b"2")], "read right after writing"
        _wait_until(started + 0.55 * _TTL)
        store.append(kept, [Record("k2", b"2")])  # keeps it alive for another ttl
        refreshed = time.monotonic()
        if refreshed - written > _TTL - _MARGIN:
            return False
        _wait_until(written + _TTL + _MARGIN)
        checked = time.monotonic()
        kept_log = store.read(kept)
        idle_reads = [store.read(idle), store.read(idle, -1), store.read(idle, 0, 1)]
        listed = (
            set(store.list_sessions(f"ck-ttl-{run}-")) if store.supports("list_sessions") else None
        )
        done = time.monotonic()
        if done - refreshed > _TTL - _MARGIN / 2:
            return False  # too slow to tell "kept" from expired
        assert checked - written >= _TTL + _MARGIN / 2
        assert idle_reads == [[], [], []], (
            f"a session idle for {checked - written:.1f} s with ttl={_TTL} s still reads "
            f"{idle_reads}"
        )
        assert kept_log == [Record("k1", b"1"), Record("k2", b"2")], (
            f"a session appended to {done - refreshed:.1f} s ago (ttl={_TTL} s) reads {kept_log}"
        )
        if listed is not None:
            assert listed == {kept}, f"listing after expiry: {sorted(listed)}"
        store.append(idle, [Record("r1", b"again")])
        assert store.read(idle) == [Record("r1", b"again")], "an expired session came back"
        return True


#: Two ttls far apart, and how far the store's clock may be from the test's.
_SHORT_TTL, _LONG_TTL, _CLOCK_SKEW = 1000.0, 100000.0, 300.0


class TtlRetryTests(ConformanceBase):
    """Every append sets the expiry from the appending handle's ``ttl``, an exact retry
    that stores nothing included; an append through a handle opened without ``ttl`` clears
    it (handles of a ``shared`` store with different ``ttl``; the expiry read back with
    the ``chatkeep_expiry`` test hook, no sleeping)."""

    def test_the_appending_handle_sets_or_clears_the_expiry(
        self, chatkeep_open: Callable[..., Store]
    ) -> None:
        short, long = chatkeep_open(ttl=_SHORT_TTL), chatkeep_open(ttl=_LONG_TTL)
        plain = chatkeep_open()
        expiry = getattr(short.backend, EXPIRY)
        session = f"ck-ttlr-{uuid.uuid4().hex[:12]}"

        def expires_in(ttl: float | None, what: str) -> None:
            at = expiry(session)
            if ttl is None:
                assert at is None, f"{what}: the session expires at {at}, expected never"
                return
            assert at is not None, f"{what}: the session never expires, expected in {ttl:g} s"
            left = at - time.time()
            assert abs(left - ttl) < _CLOCK_SKEW, (
                f"{what}: the session expires in {left:.0f} s, expected {ttl:g} s"
            )

        batch = records(2)
        short.append(session, batch)
        expires_in(_SHORT_TTL, f"an append through a handle with ttl={_SHORT_TTL:g}")
        long.append(session, batch)  # an exact retry: stores nothing, sets the expiry
        expires_in(_LONG_TTL, f"an exact retry through a handle with ttl={_LONG_TTL:g}")
        short.append(session, batch)
        expires_in(_SHORT_TTL, f"an exact retry through a handle with ttl={_SHORT_TTL:g}")
        plain.append(session, batch)  # an exact retry without ttl: clears it
        expires_in(None, "an exact retry through a handle opened without ttl")
        long.append(session, records(3))  # stores the third record
        expires_in(_LONG_TTL, f"an append through a handle with ttl={_LONG_TTL:g}")
        plain.append(session, records(4))
        expires_in(None, "an append through a handle opened without ttl")
        assert short.read(session) == records(4), "the appends stored the records once each"
