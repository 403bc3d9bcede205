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
import secrets
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import pytest

from chatkeep.testing.servers import azure_url, postgres_url, redis_url, s3_url, with_query

sys.path.insert(0, str(Path(__file__).parent))  # maf_support, also for spawned children

__all__ = ["azure_url", "postgres_url", "redis_url", "s3_url"]  # the servers' fixtures

#: Every backend the adapter is tested on.
BACKENDS = ["memory", "sqlite", "postgres", "redis", "s3", "azure_blob"]
#: The backends of the real-agent runs (issue 12: SQLite and PostgreSQL).
AGENT_BACKENDS = ["sqlite", "postgres"]
#: The backends whose async clients the many-event-loops run exercises.
LOOP_BACKENDS = ["sqlite", "postgres", "redis", "azure_blob"]


def _under(url: str, token: str) -> str:
    """``url`` with ``-<token>`` added to its path (a prefix of its own in the bucket or
    container)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"{parts.path.rstrip('/')}-{token}"))


def url_for(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL of its own on ``backend`` (server fixtures are pulled in only when
    that backend is asked for)."""
    token = secrets.token_hex(6)
    if backend == "memory":
        return "memory://"
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / f'chats-{token}.db'}"
    if backend == "postgres":  # the run's schema; a namespace (tenant) of its own
        return with_query(request.getfixturevalue("postgres_url"), namespace=f"t{token}")
    if backend == "redis":  # nested in the run's namespace, so the run's cleanup erases it
        base: str = request.getfixturevalue("redis_url")
        namespace = dict(parse_qsl(urlsplit(base).query))["namespace"]
        return with_query(base, namespace=f"{namespace}/{token}")
    if backend == "s3":
        return _under(request.getfixturevalue("s3_url"), token)
    if backend == "azure_blob":
        return _under(request.getfixturevalue("azure_url"), token)
    raise ValueError(backend)


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
