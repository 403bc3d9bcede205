"""The shared conformance suite (chatkeep.testing) against Azurite."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

testing = pytest.importorskip("chatkeep.testing", reason="chatkeep-testing is not installed")


class TestAzureBlobConformance(testing.StoreConformance):  # type: ignore[misc,name-defined]
    """Every conformance test, on a fresh prefix of the Azurite test container."""

    @pytest.fixture
    def chatkeep_url(self, blob_service: Any) -> str:
        return str(blob_service.url())

    @pytest.fixture
    def chatkeep_settings(self, chatkeep_settings: Any, blob_service: Any) -> Any:
        """On the Azurite this run started, the suite leaves what it wrote in place: that
        Azurite goes at the end of the run, and deleting the listing tests' 2,400 sessions
        one by one cost more than a minute (deletion has tests of its own)."""
        if blob_service.process is None:
            return chatkeep_settings
        return dataclasses.replace(chatkeep_settings, keep_sessions=True)
