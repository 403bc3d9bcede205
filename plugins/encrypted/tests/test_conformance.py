"""The whole conformance suite over the encryption wrapper, on every in-repo backend."""

from __future__ import annotations

import pytest

from chatkeep.testing import StoreConformance


class TestEncryptedMemory(StoreConformance):
    @pytest.fixture
    def chatkeep_url(self) -> str:
        return "encrypted+memory://"


class TestEncryptedSQLite(StoreConformance):
    @pytest.fixture
    def chatkeep_url(self, tmp_path_factory: pytest.TempPathFactory) -> str:
        return "encrypted+sqlite:///" + str(tmp_path_factory.mktemp("db") / "c.db")


class TestEncryptedRedis(StoreConformance):
    @pytest.fixture
    def chatkeep_url(self, redis_url: str) -> str:
        return "encrypted+" + redis_url


class TestEncryptedPostgres(StoreConformance):
    @pytest.fixture
    def chatkeep_url(self, postgres_url: str) -> str:
        return "encrypted+" + postgres_url


class TestEncryptedS3(StoreConformance):
    @pytest.fixture
    def chatkeep_url(self, s3_url: str) -> str:
        return "encrypted+" + s3_url


class TestEncryptedAzure(StoreConformance):
    @pytest.fixture
    def chatkeep_url(self, azure_url: str) -> str:
        return "encrypted+" + azure_url
