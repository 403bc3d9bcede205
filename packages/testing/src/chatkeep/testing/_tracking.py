"""Handles the suite opens, and the sessions it writes through them, so it can clean up.

Every handle a test gets from the fixtures is a :class:`TrackedStore`: the same backend
object ``open_store`` made (so sync and async paths are exactly the backend's own), with
``append`` and its variants noting the session id. After the test, :class:`Tracker` deletes
every session written, through a handle opened with the same options (namespace included),
when the store declares ``delete`` and the run does not keep sessions, then calls the
backend's ``chatkeep_tidy`` test hook, if it has one, so that nothing is left behind.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from chatkeep.core import InvalidSessionId, Record, Store, check_session_id, open_store

from .hooks import TIDY

__all__ = ["TrackedStore", "Tracker"]

_Key = tuple[str, tuple[tuple[str, str], ...]]


def _valid(session_id: object) -> bool:
    """Whether ``session_id`` could have been written (tests also try invalid ones, which
    the core refuses before the backend sees them: nothing to clean up for those)."""
    try:
        check_session_id(session_id)
    except InvalidSessionId:
        return False
    return True


def _key(url: str, options: dict[str, Any]) -> _Key:
    return url, tuple(sorted((name, repr(value)) for name, value in options.items()))


class TrackedStore(Store):
    """A :class:`Store` over a backend that ``open_store`` opened, noting written sessions."""

    __slots__ = ("_written",)

    def __init__(self, opened: Store, written: set[str]) -> None:
        super().__init__(
            opened.backend, name=opened.name, capabilities=opened.capabilities, url=opened.url
        )
        self._written = written

    def append(self, session_id: str, records: Iterable[Record | tuple[str, bytes]]) -> None:
        """:meth:`Store.append`, noting the session."""
        if _valid(session_id):
            self._written.add(session_id)
        super().append(session_id, records)

    async def aappend(self, session_id: str, records: Iterable[Record | tuple[str, bytes]]) -> None:
        """:meth:`Store.aappend`, noting the session."""
        if _valid(session_id):
            self._written.add(session_id)
        await super().aappend(session_id, records)

    def append_if(
        self,
        session_id: str,
        records: Iterable[Record | tuple[str, bytes]],
        *,
        after: str | None,
    ) -> None:
        """:meth:`Store.append_if`, noting the session."""
        if _valid(session_id):
            self._written.add(session_id)
        super().append_if(session_id, records, after=after)

    async def aappend_if(
        self,
        session_id: str,
        records: Iterable[Record | tuple[str, bytes]],
        *,
        after: str | None,
    ) -> None:
        """:meth:`Store.aappend_if`, noting the session."""
        if _valid(session_id):
            self._written.add(session_id)
        await super().aappend_if(session_id, records, after=after)


class Tracker:
    """The handles of one test and the sessions written through them (per option set)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.opened: dict[_Key, tuple[str, dict[str, Any]]] = {}
        self.written: dict[_Key, set[str]] = {}
        self.handles: list[Store] = []
        self.keys: dict[int, _Key] = {}

    def sessions(self, url: str | None = None, **options: Any) -> set[str]:
        """The set in which sessions written to ``url`` (the store under test by default)
        with ``options`` are noted; add to it what worker processes write."""
        url = self.url if url is None else url
        key = _key(url, options)
        self.opened.setdefault(key, (url, dict(options)))
        return self.written.setdefault(key, set())

    def open(self, **options: Any) -> TrackedStore:
        """A new tracked handle on the URL under test with ``options``."""
        return self.open_url(self.url, **options)

    def open_url(self, url: str, **options: Any) -> TrackedStore:
        """A new tracked handle on another URL of the same store (``?namespace=...``)."""
        opened = open_store(url, **options)
        store = TrackedStore(opened, self.sessions(url, **options))
        self.handles.append(store)
        self.keys[id(store)] = _key(url, options)
        return store

    def finish(self, *, delete: bool) -> None:
        """Delete what was written (if ``delete``), then close every handle."""
        try:
            if delete:
                self._clean_up()
        finally:
            handles, self.handles = self.handles, []
            for store in handles:
                try:
                    store.close()
                except Exception as exc:
                    warnings.warn(f"closing a store after the test failed: {exc!r}", stacklevel=2)

    def _clean_up(self) -> None:
        for key, sessions in self.written.items():
            if not sessions:
                continue
            store: Store | None = None
            url, options = self.opened[key]
            reusable = [h for h in self.handles if self.keys.get(id(h)) == key and not h.closed]
            try:
                # A handle the test left open will do (opening one costs a pool on some
                # stores); it is closed with the others afterwards.
                store = reusable[0] if reusable else open_store(url, **options)
                if not store.supports("delete"):
                    return
                if len(sessions) > 20:
                    with ThreadPoolExecutor(4) as pool:  # a big test's thousands of sessions
                        list(pool.map(store.delete, sorted(sessions)))
                else:
                    for session in sorted(sessions):
                        store.delete(session)
                tidy = getattr(store.backend, TIDY, None)
                if tidy is not None:  # what the backend keeps beside the sessions
                    tidy()
            except Exception as exc:
                warnings.warn(
                    f"chatkeep conformance: could not remove the sessions this test wrote "
                    f"({type(exc).__name__}: {exc})",
                    stacklevel=2,
                )
            finally:
                if store is not None and not reusable:
                    store.close()
