"""Event loops for synchronous code that drives async code.

:class:`LoopThread`: a loop on a daemon thread. One loop per store: connections an async
driver binds to its loop stay valid across calls. The core's
:class:`~chatkeep.core.store.Store` uses one for async-only backends; a backend that drives
an async SDK from its own sync methods uses the same class
(``from chatkeep.core import LoopThread``).

:func:`run_blocking`: ``asyncio.run`` without its cost per call, for the core's blocking
entry points (``Agent.run_sync``, ``compact`` with an async reducer): each thread keeps one
loop and reuses it, so a call costs one task on it (~10 µs) instead of a new loop and its
teardown (~150 µs), and what a driver or SDK client binds to the loop stays usable.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["LoopThread", "run_blocking"]


class _ThreadLoop:
    """The loop :func:`run_blocking` reuses in one thread; closed when the thread's
    locals go away (the thread ended) or at interpreter exit."""

    __slots__ = ("__weakref__", "loop")

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        weakref.finalize(self, _close, self.loop)


def _close(loop: asyncio.AbstractEventLoop) -> None:
    if not loop.is_closed() and not loop.is_running():
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


_local = threading.local()


def _cancel_rest(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the tasks still pending on ``loop`` and let them finish, as ``asyncio.run``
    does before it closes its loop (so nothing of one call runs during the next)."""
    pending = asyncio.all_tasks(loop)
    if not pending:
        return
    for task in pending:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


def run_blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion and return its result, like ``asyncio.run``, on a
    loop this thread keeps for such calls (created on first use).

    As with ``asyncio.run``: calling it from a running event loop raises ``RuntimeError``;
    tasks the coroutine left pending are cancelled before it returns. Unlike it, the loop
    is not closed after each call, so its async generators are finalized lazily and its
    clients (connection pools) are kept for the next call on this thread. After a
    ``KeyboardInterrupt`` or ``SystemExit`` the loop is thrown away and the next call gets a
    new one.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coroutine.close()
        raise RuntimeError(
            "a blocking chatkeep call (run_sync, compact) cannot run inside a running "
            "event loop; await its async form instead"
        )
    holder: _ThreadLoop | None = getattr(_local, "holder", None)
    if holder is None or holder.loop.is_closed():
        holder = _local.holder = _ThreadLoop()
    loop = holder.loop
    task = loop.create_task(coroutine)
    try:
        result = loop.run_until_complete(task)
    except BaseException:
        if not task.done():  # interrupted (Ctrl-C): cancel what is left, start afresh next time
            _local.holder = None
            try:
                _cancel_rest(loop)
            finally:
                _close(loop)
        else:
            _cancel_rest(loop)
        raise
    _cancel_rest(loop)
    return result


class LoopThread:
    """Runs coroutines on a loop owned by a background thread, started on first use."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name=f"chatkeep-{self._name}", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    @property
    def started(self) -> bool:
        """Whether the loop thread is running."""
        return self._loop is not None

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coroutine`` on the loop (starting it if needed); a future for its result.

        ``await asyncio.wrap_future(thread.submit(...))`` waits for it from another loop.
        """
        return asyncio.run_coroutine_threadsafe(coroutine, self._ensure())

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and block until it finishes."""
        loop = self._ensure()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            coroutine.close()
            raise RuntimeError("a blocking chatkeep call was made from its own backend loop")
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

    def stop(self) -> None:
        """Stop the loop and join its thread (no-op if it never started)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
