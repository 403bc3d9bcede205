"""The shared conformance suite (chatkeep.testing) against Azurite."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

testing = pytest.importorskip("chatkeep.testing", reason="chatkeep-testing is not installed")

#: Sessions per List Blobs page in this run, and the listing test's sessions: the full
#: listing crosses two page boundaries and its first half one. (At the service's 5,000 a
#: page, the suite's default 2,400 sessions were one page: no boundary at all.)
PAGE = 100
LISTING_SESSIONS = 240


class TestAzureBlobConformance(testing.StoreConformance):  # type: ignore[misc,name-defined]
    """Every conformance test, on a fresh prefix of the Azurite test container."""

    @pytest.fixture
    def chatkeep_url(self, blob_service: Any) -> str:
        return str(blob_service.url())

    @pytest.fixture(autouse=True)
    def _small_listing_pages(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr("chatkeep.azure_blob.store.LISTING_PAGE", PAGE)

    @pytest.fixture
    def chatkeep_settings(self, chatkeep_settings: Any, blob_service: Any) -> Any:
        """Listing pages of :data:`PAGE` sessions, so :data:`LISTING_SESSIONS` cross the
        page boundaries. On the Azurite this run started, the suite leaves what it wrote in
        place: that Azurite goes at the end of the run (deletion has tests of its own)."""
        sized = dataclasses.replace(chatkeep_settings, listing_sessions=LISTING_SESSIONS)
        if blob_service.process is None:
            return sized
        return dataclasses.replace(sized, keep_sessions=True)
