"""The async twins (``aappend``, ``aread``) behave like the sync methods."""

from __future__ import annotations

import asyncio

from chatkeep.core import Record, Store

from ..checks import assert_batches_intact, new_session_id, plan_batches, records
from ._base import ConformanceBase

__all__ = ["AsyncApiTests"]


class AsyncApiTests(ConformanceBase):
    """Async and sync calls see the same data with the same semantics."""

    def test_async_api_matches_sync(self, chatkeep_store: Store) -> None:
        session, unknown = new_session_id(), new_session_id("unknown")
        first, second = records(3, "a"), records(2, "b")

        async def scenario() -> list[list[Record]]:
            await chatkeep_store.aappend(session, first)
            await chatkeep_store.aappend(session, second)
            await chatkeep_store.aappend(session, first)  # a retry: no-op
            return [
                await chatkeep_store.aread(session),
                await chatkeep_store.aread(session, -2),
                await chatkeep_store.aread(session, 1, 4),
                await chatkeep_store.aread(session, 4, 1),
                await chatkeep_store.aread(unknown),
            ]

        log = first + second
        assert asyncio.run(scenario()) == [log, log[-2:], log[1:4], [], []]
        assert chatkeep_store.read(session) == log

    def test_sync_writes_are_visible_to_async_reads(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        chatkeep_store.append(session, records(3))
        assert asyncio.run(chatkeep_store.aread(session, -2)) == records(3)[-2:]

    def test_concurrent_async_appends(self, chatkeep_store: Store) -> None:
        session = new_session_id()
        plans = {f"c{n}": plan_batches(f"c{n}", batches=5, per_batch=3) for n in range(6)}

        async def writer(plan: list[list[Record]]) -> None:
            for batch in plan:
                await chatkeep_store.aappend(session, batch)

        async def scenario() -> None:
            await asyncio.gather(*(writer(plan) for plan in plans.values()))

        asyncio.run(scenario())
        assert_batches_intact(chatkeep_store.read(session), plans)
