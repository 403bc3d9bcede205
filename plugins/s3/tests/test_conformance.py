"""The shared conformance suite (chatkeep-testing) against S3 over HTTP (moto by default,
``CHATKEEP_TEST_S3_URL`` otherwise)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

testing = pytest.importorskip("chatkeep.testing", reason="chatkeep-testing is not installed")

#: Sessions per delimiter LIST page in this run, and the listing test's sessions: the full
#: listing crosses two page boundaries and its first half one, as 2,400 sessions do at S3's
#: 1,000 a page, for a tenth of the PUTs.
PAGE = 100
LISTING_SESSIONS = 240


class TestS3Conformance(testing.StoreConformance):  # type: ignore[misc,name-defined]
    """Every conformance mixin; one prefix per test, so tests never see each other."""

    @pytest.fixture
    def chatkeep_url(self, s3_endpoint: Any) -> str:
        url: str = s3_endpoint.url()
        return url

    @pytest.fixture(autouse=True)
    def _small_listing_pages(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr("chatkeep.s3.bucket.FOLDER_PAGE", PAGE)

    @pytest.fixture
    def chatkeep_settings(self, chatkeep_settings: Any, s3_endpoint: Any) -> Any:
        """Listing pages of :data:`PAGE` sessions, so :data:`LISTING_SESSIONS` cross the
        page boundaries. On this run's own moto server, the suite leaves what it wrote in
        place: the server goes at the end of the run (deletion has tests of its own)."""
        sized = dataclasses.replace(chatkeep_settings, listing_sessions=LISTING_SESSIONS)
        if not s3_endpoint.moto:
            return sized
        return dataclasses.replace(sized, keep_sessions=True)
