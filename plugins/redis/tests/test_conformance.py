"""The shared conformance suite against real Redis: the single server and a 3-master cluster.

Every test of the suite opens the store from the URL alone (child processes included), so
the per-test namespace travels in the URL's query string. After each test (once the suite
has deleted what it wrote and called the ``chatkeep_tidy`` hook) the test's key prefix
must hold no key at all: a conformance run leaves nothing behind, markers included.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from chatkeep.testing import StoreConformance


def _nothing_left(url: str, keys_left: Callable[[str], list[bytes]]) -> Iterator[str]:
    yield url
    left = keys_left(url)
    assert left == [], f"the test left {len(left)} key(s) behind: {left[:5]}"


class TestRedisConformance(StoreConformance):
    """The suite against the Redis at CHATKEEP_TEST_REDIS_URL (default 127.0.0.1:6379)."""

    @pytest.fixture
    def chatkeep_url(
        self, redis_store_url: str, redis_keys_left: Callable[[str], list[bytes]]
    ) -> Iterator[str]:
        yield from _nothing_left(redis_store_url, redis_keys_left)


class TestRedisClusterConformance(StoreConformance):
    """The suite against a real 3-master Redis Cluster started for this test run."""

    @pytest.fixture
    def chatkeep_url(
        self, redis_cluster_store_url: str, redis_keys_left: Callable[[str], list[bytes]]
    ) -> Iterator[str]:
        yield from _nothing_left(redis_cluster_store_url, redis_keys_left)
