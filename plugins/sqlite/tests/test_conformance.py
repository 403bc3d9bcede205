"""The shared chatkeep conformance suite, run against a temporary SQLite file."""

from __future__ import annotations

import pytest

from chatkeep.testing import StoreConformance


class TestSQLiteConformance(StoreConformance):
    """Every contract test, on one file shared by the whole class (tests use fresh ids)."""

    @pytest.fixture
    def chatkeep_url(self, tmp_path_factory: pytest.TempPathFactory) -> str:
        return "sqlite:///" + str(tmp_path_factory.mktemp("db") / "c.db")


class TestSQLiteMemoryConformance(StoreConformance):
    """The private in-memory database: shared/durable tests skip as not declared."""

    @pytest.fixture
    def chatkeep_url(self) -> str:
        return "sqlite://:memory:"
