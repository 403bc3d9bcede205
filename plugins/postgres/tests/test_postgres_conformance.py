"""The shared chatkeep conformance suite, run against a real PostgreSQL server.

One store URL (a schema private to this run) serves every test; the suite uses fresh random
session ids, and child processes reopen the same data from the URL alone.
"""

from __future__ import annotations

import pytest
from chatkeep_postgres_support import with_query

try:
    from chatkeep.testing import StoreConformance
except ImportError as exc:  # the suite ships in chatkeep-testing
    pytest.skip(f"chatkeep.testing is not importable: {exc}", allow_module_level=True)


class TestPostgresConformance(StoreConformance):
    """Every conformance test, on the default (sync and async) paths."""

    @pytest.fixture
    def chatkeep_url(self, pg_store_url: str) -> str:
        return pg_store_url


class TestPostgresNamespacedConformance(StoreConformance):
    """The same suite with a namespace, a table prefix and a small list page size, so keys
    and paging are exercised off the defaults."""

    @pytest.fixture
    def chatkeep_url(self, pg_store_url: str) -> str:
        return with_query(
            pg_store_url, namespace="conformance", table_prefix="conf_", list_page_size=7
        )
