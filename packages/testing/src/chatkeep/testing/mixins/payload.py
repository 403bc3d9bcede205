"""Record payloads and ids round-trip byte for byte, whatever they contain."""

from __future__ import annotations

import os

import pytest

from chatkeep.core import Record, Store

from ..checks import new_session_id
from ..samples import BINARY_PAYLOADS, HOSTILE_RECORD_IDS
from ._base import ConformanceBase

__all__ = ["PayloadTests"]

_LARGE = 5 * 1024 * 1024


class PayloadTests(ConformanceBase):
    """Large records, all 256 byte values, invalid UTF-8 and hostile record ids."""

    def test_five_mebibyte_record_round_trips(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        big = Record("big", os.urandom(_LARGE))
        chatkeep_store.append(session, [Record("before", b"x")])
        chatkeep_store.append(session, [big])
        chatkeep_store.append(session, [Record("after", b"y")])
        got = chatkeep_store.read(session, 1, 2)
        assert len(got) == 1 and got[0].id == "big"
        data = got[0].data
        # Compared by hand: pytest's diff of two 5 MiB values would take minutes.
        if data != big.data:
            first = next(
                (n for n, (a, b) in enumerate(zip(data, big.data, strict=False)) if a != b),
                min(len(data), _LARGE),
            )
            pytest.fail(
                f"the 5 MiB record came back changed: {len(data)} bytes instead of {_LARGE}, "
                f"first difference at byte {first}"
            )
        assert [r.id for r in chatkeep_store.read(session)] == ["before", "big", "after"]

    def test_binary_payloads_round_trip(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        batch = [Record(f"p{n}", data) for n, data in enumerate(BINARY_PAYLOADS)]
        chatkeep_store.append(session, batch)
        got = chatkeep_store.read(session)
        changed = [(b.id, b.data, g.data) for b, g in zip(batch, got, strict=False) if b != g]
        assert not changed, f"payload changed: {changed[0]!r}"
        assert got == batch

    def test_each_binary_payload_alone(self, chatkeep_store: Store) -> None:
        for data in BINARY_PAYLOADS:
            session = new_session_id()
            chatkeep_store.append(session, [Record("only", data)])
            assert chatkeep_store.read(session) == [Record("only", data)], f"payload {data!r}"
            assert chatkeep_store.read(session, -1) == [Record("only", data)]

    def test_hostile_record_ids_round_trip(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        batch = [Record(rid, rid.encode()) for rid in HOSTILE_RECORD_IDS]
        chatkeep_store.append(session, batch)
        assert [r.id for r in chatkeep_store.read(session)] == list(HOSTILE_RECORD_IDS)
        chatkeep_store.append(session, batch)
        assert chatkeep_store.read(session) == batch, "a retry with hostile ids duplicated"
