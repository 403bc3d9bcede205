"""How the session's coroutines reach the store.

Through the store's blocking API, in a worker thread: one thread hop per session call, as
the SDK's own ``SQLiteSession`` does; or, when every store hook a call makes is one the
store runs inline (``Store.inline_hooks``: SQLite, memory), directly, since the hop would
cost more than the call; or, for reads and appends, by awaiting the store's own async hooks
on the caller's loop when the backend declares them safe on any loop, loops that open and
close included (``Store.loop_safe_async``: Redis, one client per loop, closed with it; see
:func:`native`). Pops and clears keep the thread path (their lock is a threading lock).
Nothing else belongs to the caller's event loop, so
the session works the same under ``Runner.run``, ``Runner.run_sync`` (which keeps one loop
per thread), ``asyncio.run`` per call and loops a thread opens and closes itself. (A
backend with only ``async def`` hooks runs on the store's own private loop thread.)

Writes are *settled*: a caller cancelled while a write is in flight still waits for its
outcome before the cancellation propagates, so the caller never has to guess whether it
happened (the SDK's sessions promise the same).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from chatkeep.core import Store

__all__ = ["in_thread", "native", "session_lock", "settled"]

T = TypeVar("T")

# Striped locks serializing read-then-write operations (pop, clear) on one session within
# this process, whichever session object they come from; bounded however many sessions.
_LOCKS = tuple(threading.Lock() for _ in range(64))


def session_lock(store: Store, session_id: str) -> threading.Lock:
    """The lock for ``session_id`` on ``store`` (shared with a few unrelated sessions)."""
    return _LOCKS[hash((id(store), session_id)) % len(_LOCKS)]


def native(store: Store) -> bool:
    """Whether reads and appends may await ``store``'s async hooks on the caller's loop:
    the backend declared them loop-safe and does not run those hooks inline anyway."""
    return store.loop_safe_async and not store.inline_hooks


async def settled(operation: Awaitable[T]) -> T:
    """Await ``operation`` to the end even if the caller is cancelled meanwhile, then
    raise the cancellation (or return the result)."""
    task = asyncio.ensure_future(operation)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved: the caller learns of the cancellation instead
        raise cancelled
    return task.result()


async def in_thread(
    store: Store, hooks: tuple[str, ...] | None, function: Callable[..., T], *args: Any
) -> T:
    """``function(*args)`` in a worker thread (the default executor), or right here when
    the only store hooks it calls (``hooks``; ``None``: unknown or others too) are ones
    ``store`` runs inline on an event loop anyway."""
    if hooks is not None and store.inline_hooks.issuperset(hooks):
        return function(*args)
    return await asyncio.to_thread(function, *args)
