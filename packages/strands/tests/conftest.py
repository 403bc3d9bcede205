"""Fixtures: the adapter's tests run on real stores (DESIGN section 7).

``store_url`` / ``store`` are parametrized over SQLite, PostgreSQL and Redis; ``s3_url`` and
``azure_url`` serve the tests that run once on each of those. The servers come from
:mod:`chatkeep.testing.servers` (a missing one skips, or fails under ``CI=true``).
"""

from __future__ import annotations

import pytest

from chatkeep.testing.servers import (  # noqa: F401  (fixtures)
    azure_url,
    postgres_url,
    redis_url,
    s3_url,
    sid,
    sqlite_url,
    store,
    store_url,
)


@pytest.fixture
def anyio_backend() -> str:
    """``async def`` tests (marked ``anyio``) run on asyncio."""
    return "asyncio"
