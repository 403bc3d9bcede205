"""Log views: fork, undo, compaction checkpoints and in-place edits on every backend.

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
    edit_delete(store, branch, 0)            # in-place edits: one control record each

Reading a window walks the log backward from its end, so it costs about as many records
as it returns however long the log is; a checkpoint ends the walk, so a compacted
conversation loads in proportion to its view, not its transcript. Every function has an
``a``-prefixed async twin.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .._loop import run_blocking
from ..errors import CapabilityMissing
from ..messages import Message
from ..store import Store
from ._builder import ViewBuilder as ViewBuilder
from ._builder import build_view
from ._control import Control as Control
from ._control import parse_entry as parse_entry
from ._edit import (
    Spliced,
    delete_program,
    insert_program,
    known_splice_program,
    replace_program,
    set_program,
    splice_program,
)
from ._erase import TEMP_PREFIX as TEMP_PREFIX
from ._erase import delete_program as erase_program
from ._erase import forks_program
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
    "Spliced",
    "acompact",
    "adelete_session",
    "aedit_delete",
    "aedit_insert",
    "aedit_replace",
    "aedit_set",
    "aedit_splice",
    "aedit_splice_known",
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
    "edit_delete",
    "edit_insert",
    "edit_replace",
    "edit_set",
    "edit_splice",
    "edit_splice_known",
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
    run(store, erase_program(session_id, cascade))


async def adelete_session(store: Store, session_id: str, *, cascade: bool = False) -> None:
    """Async :func:`delete_session`."""
    _require_delete(store)
    await arun(store, erase_program(session_id, cascade))


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


# -- in-place edits ---------------------------------------------------------------------------


def edit_splice(
    store: Store,
    session_id: str,
    start: int | None,
    stop: int | None,
    messages: Sequence[Message] = (),
) -> list[Message]:
    """``view[start:stop] = messages``, by Python's slice rules (``None`` for an open end,
    negative indices from the end, out-of-range bounds clamped); returns the messages it
    removed. One record is appended and nothing stored is rewritten: the log keeps every
    earlier message (``read_log`` shows them and the edit).

    Messages without a ``message_id`` get one. Removing the end of the view on a store with
    ``conditional`` is a ``chatkeep.retract``; an edit that reaches the view's first message
    a ``chatkeep.checkpoint``; any other a ``chatkeep.splice``; adding at the end, an append.
    On a store with ``conditional`` concurrent edits never work from the same view (each
    is computed again after losing a race), so two deletes remove two messages.
    """
    program = splice_program(session_id, start, stop, messages, conditional=_conditional(store))
    return run(store, program)


async def aedit_splice(
    store: Store,
    session_id: str,
    start: int | None,
    stop: int | None,
    messages: Sequence[Message] = (),
) -> list[Message]:
    """Async :func:`edit_splice`."""
    program = splice_program(session_id, start, stop, messages, conditional=_conditional(store))
    return await arun(store, program)


def edit_splice_known(
    store: Store,
    session_id: str,
    start: int | None,
    stop: int | None,
    messages: Sequence[Message] = (),
    *,
    newest_record_id: str | None,
    length: int,
) -> Spliced | None:
    """:func:`edit_splice` on a view the caller holds and has just checked is current: it
    has ``length`` messages and the log's newest record is ``newest_record_id`` (``None``:
    the log is empty), as a read of the log's end shows. Nothing is read back: one
    record is written after ``newest_record_id`` (with ``AppendIf`` on a store with
    ``conditional``). Returns a :class:`Spliced`: the edited slice's bounds ``first,
    last`` in the held view (the caller applies ``view[first:last] = messages`` to its
    copy) and the log's newest record now (the edit's), or ``None`` when the log has
    moved on since: nothing readers honour was written, call :func:`edit_splice` (or
    another edit) instead.

    A holder that is wrong about the view (a length or record id not read from the log)
    writes a wrong edit: this is for adapters that keep a decoded view and trust it only
    after a tail read. On a store without ``conditional`` an append at the end is not
    checked against other writers: read the log's end again before trusting the copy."""
    program = known_splice_program(
        session_id,
        start,
        stop,
        messages,
        newest_record_id=newest_record_id,
        length=length,
        conditional=_conditional(store),
    )
    return run(store, program)


async def aedit_splice_known(
    store: Store,
    session_id: str,
    start: int | None,
    stop: int | None,
    messages: Sequence[Message] = (),
    *,
    newest_record_id: str | None,
    length: int,
) -> Spliced | None:
    """Async :func:`edit_splice_known`."""
    program = known_splice_program(
        session_id,
        start,
        stop,
        messages,
        newest_record_id=newest_record_id,
        length=length,
        conditional=_conditional(store),
    )
    return await arun(store, program)


def edit_insert(store: Store, session_id: str, index: int, *messages: Message) -> None:
    """Insert ``messages`` before the view's message ``index`` (``list.insert`` rules: an
    index past the end appends, a negative one counts from the end)."""
    run(store, insert_program(session_id, index, messages, conditional=_conditional(store)))


async def aedit_insert(store: Store, session_id: str, index: int, *messages: Message) -> None:
    """Async :func:`edit_insert`."""
    await arun(store, insert_program(session_id, index, messages, conditional=_conditional(store)))


def edit_delete(store: Store, session_id: str, index: int = -1) -> Message:
    """Take the view's message ``index`` out of it and return it (``list.pop`` rules: the
    last by default). Raises :class:`~chatkeep.core.errors.EditOutOfRange` (an
    ``IndexError``) when the view has no such message."""
    return run(store, delete_program(session_id, index, conditional=_conditional(store)))


async def aedit_delete(store: Store, session_id: str, index: int = -1) -> Message:
    """Async :func:`edit_delete`."""
    return await arun(store, delete_program(session_id, index, conditional=_conditional(store)))


def edit_replace(store: Store, session_id: str, index: int, message: Message) -> Message:
    """Put ``message`` in place of the view's message ``index`` (a redaction, a
    correction) and return the message it replaced; the log keeps both. Raises
    :class:`~chatkeep.core.errors.EditOutOfRange` when the view has no such message."""
    program = replace_program(session_id, index, message, conditional=_conditional(store))
    return run(store, program)


async def aedit_replace(store: Store, session_id: str, index: int, message: Message) -> Message:
    """Async :func:`edit_replace`."""
    program = replace_program(session_id, index, message, conditional=_conditional(store))
    return await arun(store, program)


def edit_set(store: Store, session_id: str, messages: Sequence[Message]) -> list[Message]:
    """Make the view exactly ``messages`` and return the view it replaced. Only the part
    that differs is written (messages equal to the view's, ignoring a missing
    ``message_id``, are kept by reference), so setting the view to itself followed by new
    messages appends them; when the log behind the view has grown long (edits, undos),
    the whole view is saved as a checkpoint, so later reads cost the view again."""
    return run(store, set_program(session_id, messages, conditional=_conditional(store)))


async def aedit_set(store: Store, session_id: str, messages: Sequence[Message]) -> list[Message]:
    """Async :func:`edit_set`."""
    return await arun(store, set_program(session_id, messages, conditional=_conditional(store)))
