"""Fixtures: the adapter's tests run on real stores (DESIGN section 7).

``conversation_store`` is a fresh :class:`ChatkeepConversationStore` (a prefix of its own)
on each of SQLite, PostgreSQL and Redis, then once each on S3 (moto's server), Azure Blob
(Azurite) and the encryption wrapper over SQLite. The servers come from
:mod:`chatkeep.testing.servers` (a missing one skips, or fails under ``CI=true``).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator

import pytest

from chatkeep.core import Record, Store, open_store
from chatkeep.pydantic_ai import ChatkeepConversationStore
from chatkeep.testing.servers import (  # noqa: F401  (fixtures)
    azure_url,
    postgres_url,
    redis_url,
    s3_url,
    sid,
    sqlite_url,
    store_url,
)

#: Every backend the contract tests run on ("bare": a backend with the two hooks and a
#: listing only, no conditional appends, no delete, no recent index).
ALL_BACKENDS = ("sqlite", "postgres", "redis", "s3", "azure", "encrypted", "bare")


class Bare:
    """A third-party backend at its smallest: ``append``, ``read`` and ``list_sessions``
    over another store."""

    capabilities = frozenset({"list_sessions"})

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    def append(self, session_id: str, records: list[Record]) -> None:
        self.inner.append(session_id, records)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        return self.inner.read(session_id, start, stop)

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        return self.inner.list_sessions(prefix)


@pytest.fixture
def bare_url() -> str:
    """Stands for the bare backend (the conversation store is made from a Store)."""
    return "bare"


@pytest.fixture
def anyio_backend() -> str:
    """``async def`` tests (marked ``anyio``) run on asyncio."""
    return "asyncio"


@pytest.fixture(scope="session")
def encrypted_url(sqlite_url: str) -> str:  # noqa: F811
    """An ``encrypted+sqlite://`` URL (keys in the environment for the whole run)."""
    from chatkeep.encrypted import Keyring

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("CHATKEEP_ENCRYPTION_KEYS", "test:" + Keyring.generate_key())
    return f"encrypted+{sqlite_url}"


@pytest.fixture(params=ALL_BACKENDS)
def backend_url(request: pytest.FixtureRequest) -> str:
    """A store URL on each backend in turn."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


@pytest.fixture
async def conversation_store(backend_url: str) -> AsyncIterator[ChatkeepConversationStore]:
    """A conversation store with a prefix of its own on each backend in turn."""
    prefix = f"t{secrets.token_hex(4)}:"
    if backend_url == "bare":
        inner = open_store("memory://")
        store = ChatkeepConversationStore(store=Store(Bare(inner), name="bare"), prefix=prefix)
        assert not store.store.supports("conditional") and not store.store.supports("delete")
        yield store
        inner.close()
        return
    store = ChatkeepConversationStore(url=backend_url, prefix=prefix)
    yield store
    await store.aclose()
