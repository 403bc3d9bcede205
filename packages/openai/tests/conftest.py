"""A fake model server on loopback for the client tests (no network)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chatkeep.fake_model import FakeModelServer


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as running:
        yield running


@pytest.fixture
def sdk_args(server: FakeModelServer) -> dict[str, object]:
    """What every client under test needs to reach the fake server."""
    return {"base_url": server.base_url, "api_key": "test-key", "max_retries": 0}
