"""The whole conformance suite over the encryption wrapper, on one local backend (memory
and SQLite) and one server backend (PostgreSQL); Redis, S3 and Azure Blob get the round trip and
payload checks only.

The wrapper sees only the inner store's hooks (it never branches on the backend), so the
whole suite over every backend proved the same code six times: over S3 and Azure that was
half of CI's longest session (DESIGN section 12). Each backend's own conformance session
still runs the whole suite on it unwrapped.
"""

from __future__ import annotations

import pytest

from chatkeep.testing import StoreConformance
from chatkeep.testing.mixins import OrderTests, PayloadTests, SliceTests


class TestEncryptedMemory(StoreConformance):
    @pytest.fixture
    def chatkeep_url(self) -> str:
        return "encrypted+memory://"


class TestEncryptedSQLite(StoreConformance):
    @pytest.fixture
    def chatkeep_url(self, tmp_path_factory: pytest.TempPathFactory) -> str:
        return "encrypted+sqlite:///" + str(tmp_path_factory.mktemp("db") / "c.db")


class TestEncryptedPostgres(StoreConformance):
    @pytest.fixture
    def chatkeep_url(self, postgres_url: str) -> str:
        return "encrypted+" + postgres_url


class _RoundTrips(OrderTests, SliceTests, PayloadTests):
    """Records in and out through the wrapper on a backend the whole suite covers
    unwrapped (its own conformance session)."""


class TestEncryptedRedisRoundTrips(_RoundTrips):
    @pytest.fixture
    def chatkeep_url(self, redis_url: str) -> str:
        return "encrypted+" + redis_url


class TestEncryptedS3RoundTrips(_RoundTrips):
    @pytest.fixture
    def chatkeep_url(self, s3_url: str) -> str:
        return "encrypted+" + s3_url


class TestEncryptedAzureRoundTrips(_RoundTrips):
    @pytest.fixture
    def chatkeep_url(self, azure_url: str) -> str:
        return "encrypted+" + azure_url
