"""Shared fixtures for the SQLite backend's unit tests."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatkeep.core.plugins import reset_plugins
from chatkeep.sqlite import SQLiteStore


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "chats.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SQLiteStore]:
    backend = SQLiteStore(db_path)
    yield backend
    backend.close()


@pytest.fixture
def raw(db_path: Path) -> Iterator[sqlite3.Connection]:
    """A bare connection to the store's file, for checks that bypass the backend."""
    connection = sqlite3.connect(db_path, isolation_level=None)
    yield connection
    connection.close()


@pytest.fixture
def only_sqlite_plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Discover only this plugin, so these tests do not depend on other members' state."""
    monkeypatch.setenv("CHATKEEP_PLUGINS", "sqlite")
    reset_plugins()
    yield
    reset_plugins()
