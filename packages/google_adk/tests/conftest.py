"""Fixtures: the adapter's tests run on real stores (DESIGN section 7).

``session_service`` is the fixture ADK's own session tests take; here it is parametrized
over :class:`ChatkeepSessionService` on SQLite, PostgreSQL, Redis, S3 (moto's server),
Azure Blob (Azurite) and the encryption wrapper (over SQLite), and over ADK's own
``InMemorySessionService`` and ``DatabaseSessionService`` (the *reference* rows: the same
tests passing on ADK's services show that what they expect is ADK's behaviour, not this
adapter's idea of it). The servers come from :mod:`chatkeep.testing.servers` (a missing
one skips, or fails under ``CI=true``); each test gets a store namespace, file or prefix of
its own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from google.adk.sessions import BaseSessionService

from chatkeep.google_adk import ChatkeepSessionService
from chatkeep.testing.servers import (  # noqa: F401  (fixtures)
    azure_url,
    fresh_store_url,
    postgres_url,
    redis_url,
    s3_url,
)

sys.path.insert(0, str(Path(__file__).parent))  # adk_support, also for spawned children

#: The stores ChatkeepSessionService is tested on.
STORES = ["sqlite", "postgres", "redis", "s3", "azure_blob", "encrypted"]
#: ADK's own services, run through the same tests as the reference.
REFERENCES = ["adk_in_memory", "adk_database"]
#: The real-agent runs (issue 25: SQLite and PostgreSQL).
AGENT_STORES = ["sqlite", "postgres"]
#: The stores of the concurrency runs (shared between processes; conditional appends).
SHARED_STORES = ["sqlite", "postgres", "redis"]


def url_for(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL of its own on ``backend``; ``encrypted`` is the wrapper over SQLite."""
    if backend == "encrypted":
        return "encrypted+" + fresh_store_url("sqlite", request, tmp_path, name="adk")
    return fresh_store_url(backend, request, tmp_path, name="adk")


@pytest.fixture(autouse=True)
def encryption_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key for the ``encrypted+`` stores (set in every test, and in child processes)."""
    from chatkeep.encrypted import Keyring

    if "CHATKEEP_ENCRYPTION_KEYS" not in os.environ:
        monkeypatch.setenv("CHATKEEP_ENCRYPTION_KEYS", "test:" + Keyring.generate_key())


@pytest.fixture
def anyio_backend() -> str:
    """``async def`` tests (marked ``anyio``) run on asyncio."""
    return "asyncio"


@pytest.fixture(params=STORES)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store URL on each backend in turn."""
    return url_for(request.param, request, tmp_path)


@pytest.fixture(params=AGENT_STORES)
def agent_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store URL on SQLite, then PostgreSQL."""
    return url_for(request.param, request, tmp_path)


@pytest.fixture(params=SHARED_STORES)
def shared_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store URL on the backends several processes share in the tests."""
    return url_for(request.param, request, tmp_path)


def make_service(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A session service: ChatkeepSessionService on store ``kind``, or ADK's own."""
    if kind == "adk_in_memory":
        from google.adk.sessions import InMemorySessionService

        return InMemorySessionService()
    if kind == "adk_database":
        from google.adk.sessions.database_session_service import DatabaseSessionService

        return DatabaseSessionService("sqlite+aiosqlite:///:memory:")
    return ChatkeepSessionService(url=url_for(kind, request, tmp_path))


#: Where ADK's own services disagree with the tests (they follow ADK's in-memory service,
#: or the contract ADK's tests state): test name -> reference service -> why. Such a test
#: is marked ``xfail(strict=True)`` for that service, as ADK's own conformance registry
#: does, so it still runs and must still fail there.
DIVERGENCES: dict[str, dict[str, str]] = {
    "test_padded_session_id_reads_and_deletes": {
        "adk_database": "ADK records it: DatabaseSessionService keeps a padded id verbatim",
    },
    "test_create_session_with_padded_duplicate_id_raises_error": {
        "adk_database": "DatabaseSessionService keeps a padded id verbatim (a new session)",
    },
    "test_create_session_with_blank_id_generates_one": {
        "adk_database": "DatabaseSessionService stores a blank id verbatim",
    },
    "test_append_event_is_idempotent_for_same_event_id": {
        "adk_database": "DatabaseSessionService refuses a repeated event id (IntegrityError)",
    },
    "test_append_different_events_not_deduplicated": {
        "adk_database": "DatabaseSessionService refuses a repeated event id (IntegrityError)",
    },
}


@pytest.fixture(params=STORES + REFERENCES)
async def session_service(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[BaseSessionService]:
    """The service ADK's session tests take: the adapter on each store, then ADK's own."""
    reason = DIVERGENCES.get(request.node.originalname, {}).get(request.param)
    if reason is not None:
        request.node.add_marker(pytest.mark.xfail(strict=True, reason=reason))
    service = make_service(request.param, request, tmp_path)
    yield service
    close = getattr(service, "close", None)
    if close is not None:
        await close()


@pytest.fixture(params=[*STORES, "adk_database"])
async def database_service(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[BaseSessionService]:
    """For ADK's tests of its DatabaseSessionService's own rules (stale sessions, event
    order): the adapter on each store, then that service as the reference."""
    service = make_service(request.param, request, tmp_path)
    yield service
    await service.close()


@pytest.fixture
async def chatkeep_service(store_url: str) -> AsyncIterator[ChatkeepSessionService]:
    """ChatkeepSessionService on each store (the tests of what only it does)."""
    service = ChatkeepSessionService(url=store_url)
    yield service
    await service.close()


@pytest.fixture
def memory_service() -> Iterator[ChatkeepSessionService]:
    """ChatkeepSessionService on the memory store (unit tests of the layout)."""
    yield ChatkeepSessionService(url="memory://")


def pytest_report_header() -> str:
    ci = "CI=true: a missing server fails" if os.environ.get("CI") == "true" else "not CI"
    return f"chatkeep-google-adk: stores {', '.join(STORES)}; references {REFERENCES} ({ci})"
