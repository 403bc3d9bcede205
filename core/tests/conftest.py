"""Shared fixtures for the chatkeep-core tests.

Every test runs with ``CHATKEEP_PLUGINS=""`` (only the built-in ``memory`` backend) and a
fresh plugin registry, so half-written plugins of other members never leak in.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest

from chatkeep.core import Record, Store
from chatkeep.core.memory import MemoryStore
from chatkeep.core.plugins import reset_plugins


@pytest.fixture(autouse=True)
def isolated_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Only the built-in backend, no default URL, and a clean registry before and after."""
    monkeypatch.setenv("CHATKEEP_PLUGINS", "")
    monkeypatch.delenv("CHATKEEP_URL", raising=False)
    reset_plugins()
    yield
    reset_plugins()


class CountingBackend:
    """A memory backend that records every call it receives (to count appends and reads)."""

    capabilities: ClassVar[frozenset[str]] = MemoryStore.capabilities

    def __init__(self, inner: MemoryStore | None = None) -> None:
        self.inner = inner or MemoryStore()
        self.lock = threading.Lock()
        self.appends: list[tuple[str, list[Record]]] = []
        #: (session_id, start, stop, number of records returned)
        self.reads: list[tuple[str, int, int | None, int]] = []
        #: (prefix, before, limit) of every recent_sessions call
        self.recent_calls: list[tuple[str | None, tuple[float, str] | None, int]] = []

    def append(self, session_id: str, records: list[Record]) -> None:
        with self.lock:
            self.appends.append((session_id, list(records)))
        self.inner.append(session_id, records)

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        with self.lock:
            self.appends.append((session_id, list(records)))
        self.inner.append_if(session_id, records, after)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        result = self.inner.read(session_id, start, stop)
        with self.lock:
            self.reads.append((session_id, start, stop, len(result)))
        return result

    def delete(self, session_id: str) -> None:
        self.inner.delete(session_id)

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        return self.inner.list_sessions(prefix)

    def recent_sessions(
        self, prefix: str | None, before: tuple[float, str] | None, limit: int
    ) -> list[tuple[str, float]]:
        with self.lock:
            self.recent_calls.append((prefix, before, limit))
        return self.inner.recent_sessions(prefix, before, limit)

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def counting_store() -> Callable[..., tuple[Store, CountingBackend]]:
    """Factory: ``store, backend = counting_store()`` (optionally over a given MemoryStore)."""

    def make(inner: MemoryStore | None = None) -> tuple[Store, CountingBackend]:
        backend = CountingBackend(inner)
        return Store(backend, name="counting"), backend

    return make


@pytest.fixture
def memory_url() -> str:
    """A URL of a named memory store no other test uses."""
    return f"memory://test-{uuid.uuid4().hex}"


def pytest_make_parametrize_id(config: Any, val: object, argname: str) -> str | None:
    """Readable ids for classes used as parameters."""
    if isinstance(val, type):
        return val.__name__
    return None
