"""Log views: fork, undo and compaction checkpoints on every backend.

Everything here is built on the two storage hooks (``read`` and ``append``; ``delete`` for
erasure), so it works unchanged on every backend. A session's log holds message records
and *control records* (JSON whose ``type`` starts with ``"chatkeep."``) that only the core
interprets; the *view* of a session is what those records mean::

    from chatkeep.core import open_store
    from chatkeep.core.views import fork, read_view, undo

    store = open_store("sqlite:///chats.db")
    read_view(store, "chat-1", limit=50)     # the newest 50 messages of the view
    undo(store, "chat-1")                    # retract the last turn (the log keeps it)
    branch = fork(store, "chat-1")           # a new session continuing from here
    delete_session(store, "chat-1")          # the fork keeps its prefix
    list(list_conversations(store))          # the conversations (not the core's own sessions)
    read_log(store, branch)                  # every record of its own log, with its kind

Reading a window walks the log backward from its end, so it costs about as many records
as it returns however long the log is; a checkpoint ends the walk, so a compacted
conversation loads in proportion to its view, not its transcript. Every function has an
``a``-prefixed async twin.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from .._loop import run_blocking
from ..errors import CapabilityMissing
from ..messages import Message
from ..store import Store
from ._builder import ViewBuilder as ViewBuilder
from ._builder import build_view
from ._control import Control as Control
from ._control import parse_entry as parse_entry
from ._erase import TEMP_PREFIX as TEMP_PREFIX
from ._erase import delete_program, forks_program
from ._log import (
    CORRUPT,
    MESSAGE,
    LogEntry,
    alist_conversations,
    decode_log,
    is_internal_session,
    list_conversations,
    log_program,
)
from ._ops import (
    Checkpoint,
    checkpoint_program,
    fork_program,
    undo_program,
    view_program,
)
from ._ops import ViewRead as ViewRead
from ._program import arun, run

# The ``X as X`` imports above (Control, ViewBuilder, ViewRead, parse_entry, TEMP_PREFIX) are
# the interpreter's internals, still importable from here for code written before the views
# had a public API for what they were used for (list_conversations, read_log, build_view).
# They are not part of that API.
__all__ = [
    "CORRUPT",
    "MESSAGE",
    "Checkpoint",
    "LogEntry",
    "acompact",
    "adelete_session",
    "afork",
    "alist_conversations",
    "alist_forks",
    "aread_log",
    "aread_view",
    "aundo",
    "build_view",
    "compact",
    "decode_log",
    "delete_session",
    "fork",
    "is_internal_session",
    "list_conversations",
    "list_forks",
    "read_log",
    "read_view",
    "undo",
]

ReduceFunction = Callable[[list[Message]], "list[Message] | Awaitable[list[Message]]"]


def _conditional(store: Store) -> bool:
    return store.supports("conditional")


def read_view(store: Store, session_id: str, *, limit: int | None = None) -> list[Message]:
    """The session's messages as the view sees them (undo, checkpoints and forks applied),
    oldest first; only the newest ``limit`` when given. An unknown session reads as ``[]``.

    Raw ``store.read`` still returns every record (the audit trail).
    """
    return run(store, view_program(session_id, limit)).messages


async def aread_view(store: Store, session_id: str, *, limit: int | None = None) -> list[Message]:
    """Async :func:`read_view`."""
    return (await arun(store, view_program(session_id, limit))).messages


def read_log(
    store: Store, session_id: str, start: int = 0, stop: int | None = None
) -> list[LogEntry]:
    """Every record of the session's own log (sliced like ``store.read``) with what it is:
    a message, a control record of some kind, or a record that cannot be decoded.

    The audit trail, not the view: retracted messages and control records are all there,
    fork prefixes are not followed, and a damaged record is a ``CORRUPT`` entry rather
    than an error. An unknown session reads as ``[]``.
    """
    return run(store, log_program(session_id, start, stop))


async def aread_log(
    store: Store, session_id: str, start: int = 0, stop: int | None = None
) -> list[LogEntry]:
    """Async :func:`read_log`."""
    return await arun(store, log_program(session_id, start, stop))


def undo(store: Store, session_id: str, turns: int = 1) -> list[Message]:
    """Retract the last ``turns`` turns (a turn starts at a user message and runs to the
    end) by appending one ``chatkeep.retract`` record; nothing stored is rewritten.

    Returns the retracted messages (``[]`` when there is nothing to undo), so a chat UI's
    *retry* can send the user's message again. Later appends continue normally. Asking for
    more turns than there are retracts them all. On a store with the ``conditional``
    capability concurrent undos never retract the same turn twice.
    """
    return run(store, undo_program(session_id, turns, conditional=_conditional(store)))


async def aundo(store: Store, session_id: str, turns: int = 1) -> list[Message]:
    """Async :func:`undo`."""
    return await arun(store, undo_program(session_id, turns, conditional=_conditional(store)))


def fork(
    store: Store, session_id: str, at: str | None = None, *, new_session_id: str | None = None
) -> str:
    """A new session that continues from ``session_id``, without copying its records.

    ``at=None`` forks at the end of the log; ``at=MESSAGE_ID`` right after that message
    (any stored message, even one retracted since: the fork sees the log as it was).
    Returns the new session's id (``new_session_id`` if given; it must be unused). Costs
    O(log n) one-record reads to find the fork point, whatever the parent's length.
    Raises :class:`~chatkeep.core.errors.SessionNotFound` or
    :class:`~chatkeep.core.errors.MessageNotFound`.
    """
    return run(store, fork_program(session_id, at, new_session_id, conditional=_conditional(store)))


async def afork(
    store: Store, session_id: str, at: str | None = None, *, new_session_id: str | None = None
) -> str:
    """Async :func:`fork`."""
    return await arun(
        store, fork_program(session_id, at, new_session_id, conditional=_conditional(store))
    )


def list_forks(store: Store, session_id: str) -> list[str]:
    """The ids of the live forks of ``session_id`` (forks that read their prefix from it)."""
    return run(store, forks_program(session_id))


async def alist_forks(store: Store, session_id: str) -> list[str]:
    """Async :func:`list_forks`."""
    return await arun(store, forks_program(session_id))


def _require_delete(store: Store) -> None:
    if not store.supports("delete"):
        raise CapabilityMissing(store.name, "delete")


def delete_session(store: Store, session_id: str, *, cascade: bool = False) -> None:
    """Erase a session, never silently taking a fork's prefix with it.

    With live forks, ``cascade=True`` deletes them too (and their forks). The default,
    ``cascade=False``, first makes each live fork self-contained (its log is rewritten
    with a copy of the prefix it read from this session; its view does not change), then
    erases the session. Crash-safe: if it stops part way, calling it again completes it.
    Needs the ``delete`` capability.
    """
    _require_delete(store)
    run(store, delete_program(session_id, cascade))


async def adelete_session(store: Store, session_id: str, *, cascade: bool = False) -> None:
    """Async :func:`delete_session`."""
    _require_delete(store)
    await arun(store, delete_program(session_id, cascade))


async def _await(value: Awaitable[list[Message]]) -> list[Message]:
    return await value


def compact(store: Store, session_id: str, reducer: ReduceFunction) -> Checkpoint | None:
    """Apply ``reducer`` to the session's whole view and save the result as a checkpoint,
    so later loads read O(view) records. The transcript is untouched (raw reads keep every
    record). Returns the checkpoint written, or ``None`` if the reducer changed nothing.
    """
    read = run(store, view_program(session_id))
    if read.newest_record_id is None:
        return None
    reduced: Any = reducer(list(read.messages))
    if inspect.isawaitable(reduced):
        reduced = run_blocking(_await(reduced))
    checkpoint = Checkpoint.between(read.messages, reduced, read.newest_record_id)
    if checkpoint is not None:
        run(store, checkpoint_program(session_id, checkpoint, counted=True))
    return checkpoint


async def acompact(store: Store, session_id: str, reducer: ReduceFunction) -> Checkpoint | None:
    """Async :func:`compact`."""
    read = await arun(store, view_program(session_id))
    if read.newest_record_id is None:
        return None
    reduced: Any = reducer(list(read.messages))
    if inspect.isawaitable(reduced):
        reduced = await reduced
    checkpoint = Checkpoint.between(read.messages, reduced, read.newest_record_id)
    if checkpoint is not None:
        await arun(store, checkpoint_program(session_id, checkpoint, counted=True))
    return checkpoint
