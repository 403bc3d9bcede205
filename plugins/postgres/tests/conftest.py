"""Fixtures for the PostgreSQL backend's tests: a real server, a fresh schema per run.

The server URL comes from ``CHATKEEP_TEST_POSTGRES_URL``, else the standard local port. When
it cannot be reached the tests skip with the reason (shown in the ``-ra`` summary and the
report header), except under ``CI=true``, where they fail: CI must test the real thing.
"""

from __future__ import annotations

import secrets
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from chatkeep.core import redact_url
from chatkeep.postgres import PostgresStore
from chatkeep.testing.services import service_unavailable

# Helpers (and worker functions for spawned processes) live in a plain module next to the
# tests; spawned children inherit sys.path, so they import it by name too.
sys.path.insert(0, str(Path(__file__).parent))

from chatkeep_postgres_support import base_url, with_query


def _probe(url: str) -> str | None:
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"PostgreSQL is not reachable at {redact_url(url)}: {type(exc).__name__}: {exc}"
    return None


def pytest_report_header() -> str:
    problem = _probe(base_url())
    state = "reachable" if problem is None else f"NOT REACHABLE -> tests skip ({problem})"
    return f"chatkeep-postgres: server {redact_url(base_url())} {state}"


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The server's URL; skips (fails under CI=true) when the server is down."""
    url = base_url()
    problem = _probe(url)
    if problem is not None:
        service_unavailable(problem)
    return url


def drop_schema(url: str, schema: str) -> None:
    """Drop ``schema`` and everything in it."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(scope="session")
def pg_schema(postgres_url: str) -> Iterator[str]:
    """A schema private to this test run (and xdist worker), dropped afterwards."""
    name = "ck_test_" + secrets.token_hex(5)
    yield name
    drop_schema(postgres_url, name)


@pytest.fixture(scope="session")
def pg_store_url(postgres_url: str, pg_schema: str) -> str:
    """A chatkeep URL for the run's schema, shared by tests that use random session ids."""
    return with_query(postgres_url, schema=pg_schema)


@pytest.fixture
def fresh_schema(postgres_url: str) -> Iterator[str]:
    """A schema for one test (migration and fault tests that alter or race on it)."""
    name = "ck_test_" + secrets.token_hex(5)
    yield name
    drop_schema(postgres_url, name)


@pytest.fixture
def store(pg_store_url: str) -> Iterator[PostgresStore]:
    """A sync-path store on the run's schema."""
    opened = PostgresStore(pg_store_url)
    yield opened
    opened.close()


@pytest.fixture
def admin(postgres_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """A second, independent autocommit connection (the DBA's view)."""
    conn = psycopg.connect(postgres_url, autocommit=True)
    yield conn
    conn.close()


@pytest.fixture
def sid() -> str:
    """A fresh random session id."""
    return "s-" + uuid.uuid4().hex
