"""Volume: a store keeps accepting and returning data well past common size caps."""

from __future__ import annotations

import hashlib
import random

import pytest

from chatkeep.core import Record, Store

from ..checks import new_session_id
from ..settings import SuiteSettings
from ._base import ConformanceBase

__all__ = ["VolumeTests"]

_MIB = 1024 * 1024
_PER_APPEND = 4  # records of 1 MiB per append


def _data(seed: int, number: int) -> bytes:
    """1 MiB of reproducible, incompressible bytes (nothing big is kept in memory)."""
    return random.Random(seed * 1_000_003 + number).randbytes(_MIB)


class VolumeTests(ConformanceBase):
    """``--chatkeep-volume-mib`` MiB (default 80: past a 10 MiB or 64 MiB cap) go into one
    session in 1 MiB records and read back exactly, in slices and as a tail."""

    def test_a_session_holds_the_volume(
        self, chatkeep_store: Store, chatkeep_settings: SuiteSettings
    ) -> None:
        total = chatkeep_settings.volume_mib
        if total == 0:
            pytest.skip("the volume test is switched off (--chatkeep-volume-mib=0)")
        session = new_session_id("volume")
        seed = random.randrange(1 << 30)
        digests = []
        for start in range(0, total, _PER_APPEND):
            batch = [
                Record(f"v{n:05d}", _data(seed, n))
                for n in range(start, min(total, start + _PER_APPEND))
            ]
            digests += [hashlib.sha256(r.data).digest() for r in batch]
            try:
                chatkeep_store.append(session, batch)
            except Exception as exc:
                pytest.fail(
                    f"append refused after {start} MiB of {total} MiB in one session: "
                    f"{type(exc).__name__}: {exc}"
                )
        tail = chatkeep_store.read(session, -1)
        assert [r.id for r in tail] == [f"v{total - 1:05d}"], "tail read of the volume session"
        assert hashlib.sha256(tail[0].data).digest() == digests[-1], "the last record changed"
        changed = []
        for start in range(0, total, _PER_APPEND):
            got = chatkeep_store.read(session, start, start + _PER_APPEND)
            expected_ids = [f"v{n:05d}" for n in range(start, min(total, start + _PER_APPEND))]
            assert [r.id for r in got] == expected_ids, f"records {start}..: {[r.id for r in got]}"
            for offset, record in enumerate(got):
                if hashlib.sha256(record.data).digest() != digests[start + offset]:
                    changed.append(record.id)
        assert not changed, (
            f"{len(changed)} of {total} MiB records read back changed: {changed[:3]}"
        )
