"""Fixtures: the adapter's tests run on real stores (DESIGN section 7).

``conversation_store`` is a fresh :class:`ChatkeepConversationStore` (a prefix of its own)
on each of SQLite, PostgreSQL and Redis, then once each on S3 (moto's server), Azure Blob
(Azurite) and the encryption wrapper over SQLite. The servers come from
:mod:`chatkeep.testing.servers` (a missing one skips, or fails under ``CI=true``).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest

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

#: Every backend the contract tests run on.
ALL_BACKENDS = ("sqlite", "postgres", "redis", "s3", "azure", "encrypted")


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
    store = ChatkeepConversationStore(url=backend_url, prefix=f"t{secrets.token_hex(4)}:")
    yield store
    await store.aclose()
