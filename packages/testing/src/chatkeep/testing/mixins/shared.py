"""Stores that declare ``shared``: other handles and other processes see the same data."""

from __future__ import annotations

import multiprocessing
import queue
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from typing import Any

from chatkeep.core import Store

from .._workers import append_plan, runtime_plugin_modules
from ..checks import assert_batches_intact, new_session_id, plan_batches, records
from ._base import ConformanceBase

__all__ = ["SharedStoreTests"]

_PROCESSES = 4
_BATCHES = 25
_PER_BATCH = 3
_TIMEOUT = 180.0


def _collect(results: Any, processes: dict[str, BaseProcess], start: Any) -> list[str]:
    """Wait for every writer's report; notice a writer that died without one (and release
    the others from the start barrier, which it will never reach)."""
    failures: list[str] = []
    pending = dict(processes)
    deadline = time.monotonic() + _TIMEOUT
    while pending:
        try:
            writer, error = results.get(timeout=0.5)
        except queue.Empty:
            for writer, process in list(pending.items()):
                if process.exitcode is not None and results.empty():
                    failures.append(
                        f"writer {writer} exited with code {process.exitcode} before reporting "
                        "(its traceback is on stderr)"
                    )
                    del pending[writer]
                    start.abort()
            if time.monotonic() > deadline:
                failures.append(f"writers {sorted(pending)} did not finish in {_TIMEOUT:.0f} s")
                break
            continue
        pending.pop(writer, None)
        if error is not None:
            failures.append(f"writer {writer} failed:\n{error}")
    return failures


class SharedStoreTests(ConformanceBase):
    """Writes through one handle or process are visible to all, and concurrent appends from
    several OS processes all survive."""

    def test_writes_are_visible_to_another_handle(
        self, chatkeep_store: Store, chatkeep_reopen: Callable[[], Store]
    ) -> None:
        session = new_session_id()
        other = chatkeep_reopen()
        chatkeep_store.append(session, records(2, "a"))
        assert other.read(session) == records(2, "a")
        other.append(session, records(2, "b"))
        assert chatkeep_store.read(session) == records(2, "a") + records(2, "b")

    def test_processes_append_to_one_session(
        self, chatkeep_url: str, chatkeep_store: Store
    ) -> None:
        session = new_session_id("procs")
        context = multiprocessing.get_context("spawn")
        start = context.Barrier(_PROCESSES)
        results = context.Queue()
        plugins = runtime_plugin_modules()
        writers = [f"p{n}" for n in range(_PROCESSES)]
        processes = [
            context.Process(
                target=append_plan,
                args=(chatkeep_url,),
                kwargs={
                    "plugins": plugins,
                    "session_id": session,
                    "writer": writer,
                    "batches": _BATCHES,
                    "per_batch": _PER_BATCH,
                    "start": start,
                    "results": results,
                },
                name=f"chatkeep-conformance-{writer}",
            )
            for writer in writers
        ]
        for process in processes:
            process.start()
        try:
            failures = _collect(results, dict(zip(writers, processes, strict=True)), start)
        finally:
            for process in processes:
                process.join(10)
                if process.is_alive():
                    process.kill()
                    process.join()
        assert not failures, "\n".join(failures)
        plans = {writer: plan_batches(writer, _BATCHES, _PER_BATCH) for writer in writers}
        assert_batches_intact(chatkeep_store.read(session), plans)
