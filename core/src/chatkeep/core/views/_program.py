"""Store operations written once for sync and async callers.

A view operation is a sans-IO program (:mod:`chatkeep.core.programs`) that *yields* the
store calls it needs (:class:`Read`, :class:`Append`, :class:`AppendIf`, :class:`Delete`)
and receives their results; :func:`run` drives it with a blocking
:class:`~chatkeep.core.store.Store`, :func:`arun` with ``await``, both through the core's
one runner. So the logic of forks, undo and erasure exists once, and both flavours make
exactly the same calls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .. import programs
from ..programs import arun_program, run_program
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
Program = programs.Program[Op, T]


def _perform(store: Store) -> Callable[[Op], Any]:
    def perform(op: Op) -> Any:
        if isinstance(op, Read):
            return store.read(op.session_id, op.start, op.stop)
        if isinstance(op, Append):
            store.append(op.session_id, op.records)
        elif isinstance(op, AppendIf):
            store.append_if(op.session_id, op.records, after=op.after)
        else:
            store.delete(op.session_id)
        return None

    return perform


def _aperform(store: Store) -> Callable[[Op], Awaitable[Any]]:
    async def perform(op: Op) -> Any:
        if isinstance(op, Read):
            return await store.aread(op.session_id, op.start, op.stop)
        if isinstance(op, Append):
            await store.aappend(op.session_id, op.records)
        elif isinstance(op, AppendIf):
            await store.aappend_if(op.session_id, op.records, after=op.after)
        else:
            await store.adelete(op.session_id)
        return None

    return perform


def run(store: Store, program: Program[T]) -> T:
    """Drive ``program`` with blocking store calls; return its result. A failing call is
    thrown into the program (so it can clean up) before it propagates."""
    return run_program(program, _perform(store))


async def arun(store: Store, program: Program[T]) -> T:
    """Drive ``program`` with awaited store calls; return its result."""
    return await arun_program(program, _aperform(store))
