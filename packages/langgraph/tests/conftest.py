"""Fixtures: a fresh chatkeep store on every in-repo backend, real servers only.

The servers come from the backends' own test harnesses, imported from their conftest files
so that discovery stays in one place: PostgreSQL and Redis from ``CHATKEEP_TEST_<BACKEND>_URL``
or the standard local port, a throwaway 3-master Redis Cluster, S3 from a moto server and
Azure Blob from Azurite started on free loopback ports. A missing service skips (fails
under ``CI=true``).
"""

from __future__ import annotations

import importlib.util
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from chatkeep.core import Store, open_store
from chatkeep.langgraph import ChatkeepSaver

REPO = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # support modules, for tests and the processes they spawn


def _harness(backend: str) -> ModuleType:
    """A backend's tests/conftest.py, loaded as a module of its own."""
    name = f"chatkeep_langgraph_harness_{backend}"
    if name in sys.modules:
        return sys.modules[name]
    path = REPO / "plugins" / backend / "tests" / "conftest.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_postgres = _harness("postgres")
_redis = _harness("redis")
_s3 = _harness("s3")
_azure = _harness("azure_blob")

# The servers' fixtures, reused as they are.
postgres_url = _postgres.postgres_url
pg_schema = _postgres.pg_schema
pg_store_url = _postgres.pg_store_url
redis_url = _redis.redis_url
redis_run_namespace = _redis.redis_run_namespace
redis_namespace = _redis.redis_namespace
redis_store_url = _redis.redis_store_url
redis_cluster_url = _redis.redis_cluster_url
redis_cluster_store_url = _redis.redis_cluster_store_url
s3_endpoint = _s3.s3_endpoint
s3_url = _s3.s3_url
blob_service = _azure.blob_service

BACKENDS = ["memory", "sqlite", "postgres", "redis", "redis_cluster", "s3", "azure_blob"]
#: Backends whose data another process can see (for the multi-process tests).
SHARED = ["sqlite", "postgres", "redis"]


def store_url(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> str:
    """A URL naming an empty area of ``backend`` for one test."""
    if backend == "memory":
        return f"memory://langgraph-{uuid.uuid4().hex}"
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'checkpoints.db'}"
    if backend == "postgres":
        return str(request.getfixturevalue("pg_store_url"))
    if backend == "redis":
        return str(request.getfixturevalue("redis_store_url"))
    if backend == "redis_cluster":
        return str(request.getfixturevalue("redis_cluster_store_url"))
    if backend == "s3":
        return str(request.getfixturevalue("s3_url"))
    if backend == "azure_blob":
        return str(request.getfixturevalue("blob_service").url())
    raise ValueError(backend)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each test using this runs once per in-repo backend."""
    return str(request.param)


@pytest.fixture
def url(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> str:
    """An empty area of the backend under test."""
    return store_url(request, backend, tmp_path)


@pytest.fixture
def prefix() -> str:
    """A saver prefix of this test's own (stores shared by a run stay apart)."""
    return f"lg-{uuid.uuid4().hex[:10]}:"


@pytest.fixture
def open_saver(url: str, prefix: str) -> Iterator[Callable[..., ChatkeepSaver]]:
    """``open_saver(**options)`` -> a saver on the backend under test (closed afterwards)."""
    opened: list[ChatkeepSaver] = []

    def factory(**options: Any) -> ChatkeepSaver:
        options.setdefault("prefix", prefix)
        if "store" not in options:
            options.setdefault("url", url)
        saver = ChatkeepSaver(**options)
        opened.append(saver)
        return saver

    yield factory
    for saver in opened:
        saver.close()


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    """A store on the backend under test (closed afterwards)."""
    opened = open_store(url)
    yield opened
    opened.close()
