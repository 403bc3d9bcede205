"""Real stores for the adapter's tests: memory, SQLite, PostgreSQL, Redis, S3, Azure Blob.

``store_url`` is parametrized over the backends; each test gets a URL of its own (a fresh
file, namespace or prefix inside the run's schema / namespace / bucket / container), so
sessions never leak between tests. The servers come from ``chatkeep.testing.servers``
(DESIGN section 7's order of preference: ``CHATKEEP_TEST_*_URL``, the standard local
port, or a throwaway moto server / Azurite started here). A missing server skips its
tests with the reason, and fails them under ``CI=true``. Everything created is removed at
the end of the run (the schema, the Redis keys, the moto server, the Azurite process).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from chatkeep.testing.servers import (
    azure_url,
    fresh_store_url,
    postgres_url,
    redis_url,
    s3_url,
)

sys.path.insert(0, str(Path(__file__).parent))  # maf_support, also for spawned children

__all__ = ["azure_url", "postgres_url", "redis_url", "s3_url"]  # the servers' fixtures

#: Every backend the adapter is tested on.
BACKENDS = ["memory", "sqlite", "postgres", "redis", "s3", "azure_blob"]
#: The backends of the real-agent runs (issue 12: SQLite and PostgreSQL).
AGENT_BACKENDS = ["sqlite", "postgres"]
#: The backends whose async clients the many-event-loops run exercises.
LOOP_BACKENDS = ["sqlite", "postgres", "redis", "azure_blob"]


def url_for(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL of its own on ``backend`` (server fixtures are pulled in only when
    that backend is asked for); memory is a private store."""
    if backend == "memory":
        return "memory://"
    return fresh_store_url(backend, request, tmp_path)


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store URL on each backend in turn."""
    return url_for(request.param, request, tmp_path)


@pytest.fixture(params=AGENT_BACKENDS)
def agent_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store URL on SQLite, then PostgreSQL (the real-agent runs)."""
    return url_for(request.param, request, tmp_path)


@pytest.fixture(params=LOOP_BACKENDS)
def loop_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store URL on each backend with a native async client (and SQLite)."""
    return url_for(request.param, request, tmp_path)


def pytest_report_header() -> str:
    ci = "CI=true: a missing server fails" if os.environ.get("CI") == "true" else "not CI"
    return f"chatkeep-agent-framework: backends {', '.join(BACKENDS)} ({ci})"
