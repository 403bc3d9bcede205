"""Core operations over the store under test when a step fails: the view code must finish
the job when called again, whatever step was interrupted."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from chatkeep.core import Record, Store, StoreUnavailable, delete_session, fork, read_view
from chatkeep.core.views import TEMP_PREFIX

from ..checks import new_session_id
from ._base import ConformanceBase
from .views import _turn

__all__ = ["ForkDeletionFaultTests", "Interrupting"]


class _Interrupted(StoreUnavailable):
    """The fault the suite injects."""


class Interrupting:
    """A backend over a :class:`Store` that fails its ``fail_at``-th write (append, append_if
    or delete): before passing it on (``after=False``: the write never happened) or after
    (``after=True``: it happened, but the caller sees an error, like a lost reply)."""

    def __init__(self, store: Store, fail_at: int, *, after: bool) -> None:
        self.store = store
        self.fail_at = fail_at
        self.after = after
        self.writes = 0
        self.fired = False
        self.capabilities = store.capabilities

    def _write(self, operation: Any, *args: Any, **kwargs: Any) -> None:
        self.writes += 1
        if self.writes != self.fail_at:
            operation(*args, **kwargs)
            return
        self.fired = True
        if self.after:
            operation(*args, **kwargs)
        raise _Interrupted(f"injected failure at write {self.writes}")

    def append(self, session_id: str, records: list[Record]) -> None:
        self._write(self.store.append, session_id, records)

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        method: Any = self.store.append_if
        self._write(method, session_id, records, after=after)

    def delete(self, session_id: str) -> None:
        self._write(self.store.delete, session_id)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        return self.store.read(session_id, start, stop)

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        return self.store.list_sessions(prefix)


def _family(store: Store) -> tuple[str, str, str]:
    parent = new_session_id("parent")
    for i in range(3):
        _turn(store, parent, f"p{i}")
    child = fork(store, parent)
    _turn(store, child, "c")
    grandchild = fork(store, child)
    _turn(store, grandchild, "g")
    return parent, child, grandchild


class ForkDeletionFaultTests(ConformanceBase):
    """``delete_session`` of a session with live forks, failing at each of its writes in
    turn (before and after the write lands): calling it again completes it, every fork keeps
    its whole view, and no temporary copy is left."""

    @pytest.mark.parametrize("after", [False, True], ids=["write-lost", "reply-lost"])
    def test_interrupted_fork_deletion_completes_when_called_again(
        self, chatkeep_store: Store, after: bool
    ) -> None:
        step = 1
        while True:
            parent, child, grandchild = _family(chatkeep_store)
            views = {s: read_view(chatkeep_store, s) for s in (child, grandchild)}
            interrupting = Interrupting(chatkeep_store, step, after=after)
            with (
                Store(interrupting, name="interrupting") as faulty,
                contextlib.suppress(_Interrupted),
            ):
                delete_session(faulty, parent)
            delete_session(chatkeep_store, parent)
            assert chatkeep_store.read(parent) == [], f"step {step}: the parent is not erased"
            for session, view in views.items():
                assert read_view(chatkeep_store, session) == view, (
                    f"failure at write {step} ({'after' if after else 'before'} it landed): "
                    f"fork {session!r} lost part of its view"
                )
            if chatkeep_store.supports("list_sessions"):
                left = [s for s in chatkeep_store.list_sessions(TEMP_PREFIX)]
                for temp in left:
                    chatkeep_store.delete(temp)
                assert not left, f"step {step}: temporary copies left behind: {left[:2]}"
            if not interrupting.fired:
                break  # every write of the operation has been interrupted once
            step += 1
            assert step < 200, "delete_session kept writing: no end in sight"
