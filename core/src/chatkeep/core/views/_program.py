"""Store operations written once for sync and async callers.

A view operation is a generator that *yields* the store calls it needs (:class:`Read`,
:class:`Append`, :class:`AppendIf`, :class:`Delete`) and receives their results;
:func:`run` drives it with a blocking :class:`~chatkeep.core.store.Store`, :func:`arun`
with ``await``. So the logic of forks, undo and erasure exists once, and both flavours
make exactly the same calls.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from ..records import Record
from ..store import Store

__all__ = ["Append", "AppendIf", "Delete", "Op", "Program", "Read", "arun", "run"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Read:
    """``store.read(session_id, start, stop)``; the program receives the records."""

    session_id: str
    start: int = 0
    stop: int | None = None


@dataclass(frozen=True, slots=True)
class Append:
    """``store.append(session_id, records)``; the program receives ``None``."""

    session_id: str
    records: list[Record]


@dataclass(frozen=True, slots=True)
class AppendIf:
    """``store.append_if(session_id, records, after=after)``; the program receives ``None``
    (or has :class:`~chatkeep.core.errors.AppendConflict` thrown into it)."""

    session_id: str
    records: list[Record]
    after: str | None


@dataclass(frozen=True, slots=True)
class Delete:
    """``store.delete(session_id)``; the program receives ``None``."""

    session_id: str


Op = Read | Append | AppendIf | Delete
Program = Generator[Op, Any, T]


def _perform(store: Store, op: Op) -> Any:
    if isinstance(op, Read):
        return store.read(op.session_id, op.start, op.stop)
    if isinstance(op, Append):
        store.append(op.session_id, op.records)
        return None
    if isinstance(op, AppendIf):
        store.append_if(op.session_id, op.records, after=op.after)
        return None
    store.delete(op.session_id)
    return None


async def _aperform(store: Store, op: Op) -> Any:
    if isinstance(op, Read):
        return await store.aread(op.session_id, op.start, op.stop)
    if isinstance(op, Append):
        await store.aappend(op.session_id, op.records)
        return None
    if isinstance(op, AppendIf):
        await store.aappend_if(op.session_id, op.records, after=op.after)
        return None
    await store.adelete(op.session_id)
    return None


def run(store: Store, program: Program[T]) -> T:
    """Drive ``program`` with blocking store calls; return its result."""
    try:
        op = next(program)
        while True:
            try:
                result = _perform(store, op)
            except BaseException as error:  # let the program clean up, then re-raise
                op = program.throw(error)
            else:
                op = program.send(result)
    except StopIteration as finished:
        value: T = finished.value
        return value


async def arun(store: Store, program: Program[T]) -> T:
    """Drive ``program`` with awaited store calls; return its result."""
    try:
        op = next(program)
        while True:
            try:
                result = await _aperform(store, op)
            except BaseException as error:
                op = program.throw(error)
            else:
                op = program.send(result)
    except StopIteration as finished:
        value: T = finished.value
        return value
