"""The shared conformance suite (chatkeep-testing) against S3 over HTTP (moto by default,
``CHATKEEP_TEST_S3_URL`` otherwise)."""

from __future__ import annotations

from typing import Any

import pytest

testing = pytest.importorskip("chatkeep.testing", reason="chatkeep-testing is not installed")


class TestS3Conformance(testing.StoreConformance):  # type: ignore[misc,name-defined]
    """Every conformance mixin; one prefix per test, so tests never see each other."""

    @pytest.fixture
    def chatkeep_url(self, s3_endpoint: Any) -> str:
        url: str = s3_endpoint.url()
        return url
