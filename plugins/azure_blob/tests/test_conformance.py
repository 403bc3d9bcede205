"""The shared conformance suite (chatkeep.testing) against Azurite."""

from __future__ import annotations

from typing import Any

import pytest

testing = pytest.importorskip("chatkeep.testing", reason="chatkeep-testing is not installed")


class TestAzureBlobConformance(testing.StoreConformance):  # type: ignore[misc,name-defined]
    """Every conformance test, on a fresh prefix of the Azurite test container."""

    @pytest.fixture
    def chatkeep_url(self, blob_service: Any) -> str:
        return str(blob_service.url())
