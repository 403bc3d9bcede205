"""Fixtures of the reliability runs: real servers (shared and throwaway), fault proxies, and
a summary of the figures at the end of the run."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file

from chatkeep.testing.servers import (
    azure_store_url,
    postgres_store_url,
    redis_store_url,
    s3_store_url,
)

FIGURES: list[str] = []
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def scale() -> float:
    """CHATKEEP_RELIABILITY_SCALE multiplies the batches each writer thread appends."""
    return float(os.environ.get("CHATKEEP_RELIABILITY_SCALE", "1"))


@pytest.fixture
def report() -> list[str]:
    """Lines of figures printed after the run."""
    return FIGURES


@pytest.fixture
def cleanup() -> Iterator[ExitStack]:
    with ExitStack() as stack:
        yield stack


@pytest.fixture
def shared_url(request: pytest.FixtureRequest, cleanup: ExitStack, tmp_path: Path) -> str:
    """A store URL of its own on each backend's real service (the machine's PostgreSQL and
    Redis, a moto server, Azurite)."""
    backend = request.param
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'reliability.db'}"
    if backend == "postgres":
        return postgres_store_url(cleanup)
    if backend == "redis":
        return redis_store_url(cleanup)
    if backend == "s3":
        return s3_store_url(cleanup)
    if backend == "azure_blob":
        return azure_store_url(cleanup, tmp_path / "azurite", REPO)
    raise AssertionError(backend)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print every run's figures (records acknowledged, faults survived, lost, duplicated)."""
    if not FIGURES:
        return
    terminalreporter.section("chatkeep reliability figures")
    for line in FIGURES:
        terminalreporter.write_line(line)
