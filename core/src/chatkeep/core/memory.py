"""The built-in ``memory`` backend: a process-local store for tests, demos and caching.

``memory://`` opens a private, empty store; ``memory://NAME`` opens the process-wide store
called NAME, so two ``open_store("memory://shared")`` calls see the same sessions. Nothing
survives the process. ``namespace=`` (or ``?namespace=``) isolates tenants of one store.
Registered through the same hook as every external backend.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar
from urllib.parse import parse_qsl

from .errors import AppendConflict, InvalidOption, RecordConflict
from .hookspecs import RegisterBackend, hookimpl
from .namespaces import check_namespace
from .records import Record

__all__ = ["MemoryStore"]

#: Session ids a listing takes per hold of the lock.
LIST_PAGE = 100


class _Log:
    __slots__ = ("data_by_id", "records", "updated")

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.data_by_id: dict[str, bytes] = {}
        #: When an append last stored a record here (``time.time()``).
        self.updated = 0.0


class _Sessions:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        # (namespace, session id) -> log; the default namespace is "".
        self.logs: dict[tuple[str, str], _Log] = {}
        # namespace -> its session ids in code-point order, so a listing pages through
        # them instead of sorting every id before yielding the first.
        self.ordered: dict[str, list[str]] = {}


_named: dict[str, _Sessions] = {}
_named_lock = threading.Lock()


class MemoryStore:
    """Sessions kept in a dict of lists; thread-safe."""

    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"delete", "list_sessions", "close", "conditional", "namespace", "recent"}
    )
    #: A dict lookup is far cheaper than a thread hop: run on the event loop under ``await``.
    inline_hooks: ClassVar[frozenset[str]] = frozenset({"read", "append", "append_if"})

    def __init__(
        self, name: str | None = None, *, namespace: str | None = None, **unknown: Any
    ) -> None:
        if unknown:
            raise InvalidOption(
                f"unknown option(s) for the memory backend: {', '.join(sorted(unknown))} "
                "(it takes only namespace=)"
            )
        if name:
            with _named_lock:
                self._sessions = _named.setdefault(name, _Sessions())
        else:
            self._sessions = _Sessions()
        self.name = name
        self.namespace = "" if namespace is None else check_namespace(namespace)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> MemoryStore:
        """``memory://`` (private) or ``memory://NAME`` (shared within the process), with an
        optional ``?namespace=`` query (the ``namespace=`` keyword wins)."""
        rest = url.split("://", 1)[1]
        name, _, query = rest.partition("?")
        for key, value in parse_qsl(query, keep_blank_values=True):
            if key != "namespace":
                raise InvalidOption(
                    f"memory:// URLs take only a 'namespace' query option, not {key!r}"
                )
            options.setdefault("namespace", value)
        return cls(name=name.strip("/") or None, **options)

    def _fresh(self, log: _Log | None, session_id: str, records: list[Record]) -> list[Record]:
        """The records of ``records`` not stored yet (an id stored with other data raises)."""
        if log is None:
            return records
        fresh = []
        for record in records:
            stored = log.data_by_id.get(record.id)
            if stored is None:
                fresh.append(record)
            elif stored != record.data:
                raise RecordConflict(session_id, record.id)
        return fresh

    def _store(self, key: tuple[str, str], log: _Log | None, fresh: list[Record]) -> None:
        if log is None:
            log = self._sessions.logs[key] = _Log()
            bisect.insort(self._sessions.ordered.setdefault(key[0], []), key[1])
        log.records.extend(fresh)
        log.data_by_id.update(fresh)
        log.updated = time.time()

    def append(self, session_id: str, records: list[Record]) -> None:
        """Append the records not stored yet (see the store contract)."""
        key = (self.namespace, session_id)
        with self._sessions.lock:
            log = self._sessions.logs.get(key)
            fresh = self._fresh(log, session_id, records)
            if fresh:
                self._store(key, log, fresh)

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        """Append only if the session's last record is ``after`` (``None``: empty)."""
        key = (self.namespace, session_id)
        with self._sessions.lock:
            log = self._sessions.logs.get(key)
            fresh = self._fresh(log, session_id, records)
            if not fresh:
                return
            last = log.records[-1].id if log is not None and log.records else None
            if last != after:
                raise AppendConflict(session_id, after)
            self._store(key, log, fresh)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        """The records, sliced like a list."""
        with self._sessions.lock:
            log = self._sessions.logs.get((self.namespace, session_id))
            return [] if log is None else log.records[start:stop]

    def delete(self, session_id: str) -> None:
        """Erase the session (its record ids become free again)."""
        with self._sessions.lock:
            if self._sessions.logs.pop((self.namespace, session_id), None) is not None:
                ordered = self._sessions.ordered[self.namespace]
                del ordered[bisect.bisect_left(ordered, session_id)]

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        """This namespace's session ids in code-point order, :data:`LIST_PAGE` at a time
        from an ordered index (lazy: the first id costs a page, not the listing)."""
        prefix = prefix or ""
        after: str | None = None
        while True:
            with self._sessions.lock:
                ordered = self._sessions.ordered.get(self.namespace, [])
                at = (
                    bisect.bisect_left(ordered, prefix)
                    if after is None
                    else bisect.bisect_right(ordered, after)
                )
                page = ordered[at : at + LIST_PAGE]
            for name in page:
                if not name.startswith(prefix):
                    return
                yield name
            if len(page) < LIST_PAGE:
                return
            after = page[-1]

    def recent_sessions(
        self, prefix: str | None, before: tuple[float, str] | None, limit: int
    ) -> list[tuple[str, float]]:
        """Up to ``limit`` of this namespace's (session id, last append time) pairs, newest
        first (ties by id, descending), after the cursor ``before`` (the ``recent``
        capability). Sorts a snapshot of the namespace's sessions: O(n log n) per page, the
        price of keeping nothing but a time per session."""
        namespace = self.namespace
        with self._sessions.lock:
            pairs = [
                (log.updated, session_id)
                for (owner, session_id), log in self._sessions.logs.items()
                if owner == namespace
                and log.records
                and (prefix is None or session_id.startswith(prefix))
                and (before is None or (log.updated, session_id) < before)
            ]
        pairs.sort(reverse=True)
        return [(session_id, updated) for updated, session_id in pairs[:limit]]

    def close(self) -> None:
        """Nothing to release: the data stays for other handles of a named store."""

    def chatkeep_set_updated(self, session_id: str, updated: float) -> None:
        """Set the time of the session's last append to ``updated`` (a test hook of
        ``chatkeep.testing``, so the suite can make ties in ``recent``)."""
        with self._sessions.lock:
            log = self._sessions.logs.get((self.namespace, session_id))
            if log is None:
                raise KeyError(f"no session {session_id!r}")
            log.updated = float(updated)


@hookimpl
def chatkeep_register_backends(register: RegisterBackend) -> None:
    register(
        "memory",
        MemoryStore,
        schemes=["memory"],
        description="process-local, in memory (built in)",
    )
