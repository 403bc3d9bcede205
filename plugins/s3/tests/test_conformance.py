"""The shared conformance suite (chatkeep-testing) against S3 over HTTP (moto by default,
``CHATKEEP_TEST_S3_URL`` otherwise)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

testing = pytest.importorskip("chatkeep.testing", reason="chatkeep-testing is not installed")


class TestS3Conformance(testing.StoreConformance):  # type: ignore[misc,name-defined]
    """Every conformance mixin; one prefix per test, so tests never see each other."""

    @pytest.fixture
    def chatkeep_url(self, s3_endpoint: Any) -> str:
        url: str = s3_endpoint.url()
        return url

    @pytest.fixture
    def chatkeep_settings(self, chatkeep_settings: Any, s3_endpoint: Any) -> Any:
        """On this run's own moto server, the suite leaves what it wrote in place: the
        server goes at the end of the run, and deleting the listing tests' 2,400 sessions
        one by one cost more than a minute (deletion has tests of its own)."""
        if not s3_endpoint.moto:
            return chatkeep_settings
        return dataclasses.replace(chatkeep_settings, keep_sessions=True)
