"""One algorithm, two drivers: the saver's operations are generators that *yield* store
requests; :func:`run` performs them with the store's blocking methods, :func:`arun` with
its ``await``-able ones (both on the core's :func:`~chatkeep.core.backend.run_program`),
so ``put`` and ``aput`` (and every other pair) are the same code. ``list`` also *emits*
results as it goes (:class:`Emit`), which :func:`iterate` / :func:`aiterate` hand out.

A store error is thrown back into the generator at the ``yield`` that asked for it, so an
operation catches ``AppendConflict`` and retries like straight-line code would.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from chatkeep.core import Store
from chatkeep.core.backend import arun_program, run_program
from chatkeep.core.records import Record

__all__ = [
    "Append",
    "AppendIf",
    "Delete",
    "Emit",
    "ListSessions",
    "Op",
    "Read",
    "Steps",
    "aiterate",
    "arun",
    "iterate",
    "run",
]


@dataclass(frozen=True)
class Read:
    """``store.read(session_id, start, stop)`` -> ``list[Record]``."""

    session_id: str
    start: int = 0
    stop: int | None = None


@dataclass(frozen=True)
class Append:
    """``store.append(session_id, records)``."""

    session_id: str
    records: list[Record]


@dataclass(frozen=True)
class AppendIf:
    """``store.append_if(session_id, records, after=after)`` (capability ``conditional``)."""

    session_id: str
    records: list[Record]
    after: str | None


@dataclass(frozen=True)
class Delete:
    """``store.delete(session_id)``."""

    session_id: str


@dataclass(frozen=True)
class ListSessions:
    """``list(store.list_sessions(prefix))`` -> ``list[str]``."""

    prefix: str


@dataclass(frozen=True)
class Emit:
    """Not a request: one result of a streaming operation (``list``)."""

    item: Any


Op = Read | Append | AppendIf | Delete | ListSessions | Emit
T = TypeVar("T")
#: An operation: a generator of requests, sent each request's result, returning ``T``.
Steps = Generator[Op, Any, T]


def _perform(store: Store, op: Op) -> Any:
    if isinstance(op, Read):
        return store.read(op.session_id, op.start, op.stop)
    if isinstance(op, Append):
        return store.append(op.session_id, op.records)
    if isinstance(op, AppendIf):
        return store.append_if(op.session_id, op.records, after=op.after)
    if isinstance(op, Delete):
        return store.delete(op.session_id)
    if isinstance(op, ListSessions):
        return list(store.list_sessions(op.prefix))
    raise TypeError(f"not a store request: {op!r}")


async def _aperform(store: Store, op: Op) -> Any:
    if isinstance(op, Read):
        return await store.aread(op.session_id, op.start, op.stop)
    if isinstance(op, Append):
        return await store.aappend(op.session_id, op.records)
    if isinstance(op, AppendIf):
        return await store.aappend_if(op.session_id, op.records, after=op.after)
    if isinstance(op, Delete):
        return await store.adelete(op.session_id)
    if isinstance(op, ListSessions):
        return [session async for session in store.alist_sessions(op.prefix)]
    raise TypeError(f"not a store request: {op!r}")


def iterate(store: Store, steps: Steps[Any]) -> Iterator[Any]:
    """Drive ``steps`` with blocking calls, yielding what it emits."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = steps.send(value) if error is None else steps.throw(error)
        except StopIteration:
            return
        value, error = None, None
        if isinstance(op, Emit):
            yield op.item
            continue
        try:
            value = _perform(store, op)
        except Exception as exc:
            error = exc


def run(store: Store, steps: Steps[T]) -> T:
    """Drive ``steps`` with blocking calls and return its result."""
    return run_program(steps, partial(_perform, store), throw=Exception)


async def aiterate(store: Store, steps: Steps[Any]) -> AsyncIterator[Any]:
    """Drive ``steps`` with ``await``-ed calls, yielding what it emits."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = steps.send(value) if error is None else steps.throw(error)
        except StopIteration:
            return
        value, error = None, None
        if isinstance(op, Emit):
            yield op.item
            continue
        try:
            value = await _aperform(store, op)
        except Exception as exc:
            error = exc


async def arun(store: Store, steps: Steps[T]) -> T:
    """Drive ``steps`` with ``await``-ed calls and return its result."""
    return await arun_program(steps, partial(_aperform, store), throw=Exception)
