"""The shared conformance suite against real Redis: the single server and a 3-master cluster.

Every test of the suite opens the store from the URL alone (child processes included), so
the per-test namespace travels in the URL's query string.
"""

from __future__ import annotations

import pytest

from chatkeep.testing import StoreConformance


class TestRedisConformance(StoreConformance):
    """The suite against the Redis at CHATKEEP_TEST_REDIS_URL (default 127.0.0.1:6379)."""

    @pytest.fixture
    def chatkeep_url(self, redis_store_url: str) -> str:
        return redis_store_url


class TestRedisClusterConformance(StoreConformance):
    """The suite against a real 3-master Redis Cluster started for this test run."""

    @pytest.fixture
    def chatkeep_url(self, redis_cluster_store_url: str) -> str:
        return redis_cluster_store_url
