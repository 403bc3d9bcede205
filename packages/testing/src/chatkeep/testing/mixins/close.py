"""Stores that declare ``close``: closing is idempotent and releases what it holds."""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Callable

from chatkeep.core import Store

from ..checks import new_session_id, records
from ._base import ConformanceBase

__all__ = ["CloseTests"]

_FD_DIRECTORY = "/proc/self/fd"


def _open_file_descriptors() -> int | None:
    """How many file descriptors this process holds, where the OS can tell (Linux)."""
    try:
        return len(os.listdir(_FD_DIRECTORY))
    except OSError:
        return None


class CloseTests(ConformanceBase):
    """``close`` may be called any number of times and leaves other handles working."""

    def test_close_is_idempotent(self, chatkeep_reopen: Callable[[], Store]) -> None:
        store = chatkeep_reopen()
        store.append(new_session_id(), records(1))
        store.close()
        store.close()
        asyncio.run(store.aclose())

    def test_context_managers_close(self, chatkeep_reopen: Callable[[], Store]) -> None:
        with chatkeep_reopen() as store:
            store.append(new_session_id(), records(1))
        store.close()

        async def scenario() -> None:
            async with chatkeep_reopen() as astore:
                await astore.aappend(new_session_id(), records(1))

        asyncio.run(scenario())

    def test_closing_one_handle_leaves_others_working(
        self, chatkeep_store: Store, chatkeep_reopen: Callable[[], Store]
    ) -> None:
        session = new_session_id()
        doomed = chatkeep_reopen()
        doomed.append(new_session_id(), records(1))
        chatkeep_store.append(session, records(1))
        doomed.close()
        chatkeep_store.append(session, records(1, start=1))
        assert chatkeep_store.read(session) == records(2)

    def test_close_releases_file_descriptors(self, chatkeep_reopen: Callable[[], Store]) -> None:
        # Open, use and close a handle a few times first, so one-off process-wide setup
        # (a shared client, a cached connection pool) is not mistaken for a leak.
        def cycle() -> None:
            store = chatkeep_reopen()
            session = new_session_id()
            store.append(session, records(1))
            store.read(session)
            # The async twins too: what a handle opened for them (an event loop's client
            # or pool) is the handle's to release on close().
            asyncio.run(store.aappend(session, records(1, start=1)))
            asyncio.run(store.aread(session))
            store.close()

        for _ in range(3):
            cycle()
        gc.collect()
        before = _open_file_descriptors()
        for _ in range(30):
            cycle()
        gc.collect()
        after = _open_file_descriptors()
        if before is not None and after is not None:
            assert after - before <= 3, (
                f"30 open/close cycles left {after - before} more file descriptors open"
            )
