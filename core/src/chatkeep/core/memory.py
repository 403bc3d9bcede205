"""The built-in ``memory`` backend: a process-local store for tests, demos and caching.

``memory://`` opens a private, empty store; ``memory://NAME`` opens the process-wide store
called NAME, so two ``open_store("memory://shared")`` calls see the same sessions. Nothing
survives the process. Registered through the same hook as every external backend.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, ClassVar

from .hookspecs import RegisterBackend, hookimpl
from .records import Record

__all__ = ["MemoryStore"]


class _Sessions:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.logs: dict[str, list[Record]] = {}
        self.ids: dict[str, set[str]] = {}


_named: dict[str, _Sessions] = {}
_named_lock = threading.Lock()


class MemoryStore:
    """Sessions kept in a dict of lists; thread-safe."""

    capabilities: ClassVar[frozenset[str]] = frozenset({"delete", "list_sessions", "close"})

    def __init__(self, name: str | None = None) -> None:
        if name:
            with _named_lock:
                self._sessions = _named.setdefault(name, _Sessions())
        else:
            self._sessions = _Sessions()
        self.name = name

    @classmethod
    def from_url(cls, url: str, **options: Any) -> MemoryStore:
        """``memory://`` (private) or ``memory://NAME`` (shared within the process)."""
        name = url.split("://", 1)[1].strip("/")
        return cls(name=name or None, **options)

    def append(self, session_id: str, records: list[Record]) -> None:
        sessions = self._sessions
        with sessions.lock:
            ids = sessions.ids.setdefault(session_id, set())
            # Records already stored (a retried batch) are skipped, not duplicated.
            fresh = [record for record in records if record.id not in ids]
            if fresh:
                sessions.logs.setdefault(session_id, []).extend(fresh)
                ids.update(record.id for record in fresh)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        with self._sessions.lock:
            log = self._sessions.logs.get(session_id)
            return [] if log is None else log[start:stop]

    def delete(self, session_id: str) -> None:
        with self._sessions.lock:
            self._sessions.logs.pop(session_id, None)
            self._sessions.ids.pop(session_id, None)

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        with self._sessions.lock:
            names = sorted(self._sessions.logs)
        for name in names:
            if prefix is None or name.startswith(prefix):
                yield name

    def close(self) -> None:
        """Nothing to release: the data stays for other handles of a named store."""


@hookimpl
def chatkeep_register_backends(register: RegisterBackend) -> None:
    register(
        "memory",
        MemoryStore,
        schemes=["memory"],
        description="process-local, in memory (built in)",
    )
